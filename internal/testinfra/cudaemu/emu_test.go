package cudaemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The emulator with the kernels of testdata/kernels and the C++ test driver
// (testdata/driver.cc) are built once per test binary, on first use.
var (
	buildOnce sync.Once
	tmpRoot   string
	libDir    string
	driverExe string
	buildErr  error
	buildTime time.Duration
)

func TestMain(m *testing.M) {
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

func testSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("testdata/kernels/*")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(f)] = string(b)
	}
	return srcs
}

// built returns the library folder and the driver, building them if needed.
func built(t *testing.T) (string, string) {
	t.Helper()
	if !Available() {
		SkipUnavailable(t, "g++ is not on PATH: the CUDA emulator cannot be built")
	}
	srcs := testSources(t)
	buildOnce.Do(func() {
		tmpRoot, buildErr = os.MkdirTemp("", "gdrotrain-emu-test-")
		if buildErr != nil {
			return
		}
		libDir = filepath.Join(tmpRoot, "lib")
		driverExe = filepath.Join(tmpRoot, "driver")
		var wg sync.WaitGroup
		var driverErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"-std=c++17", "-O1", "-ffp-contract=off", "-pthread", "-o", driverExe, "testdata/driver.cc", "-ldl"}
			if runtime.GOARCH == "amd64" {
				args = append(args, "-fcf-protection=none")
			}
			out, err := exec.Command("g++", args...).CombinedOutput()
			if err != nil {
				driverErr = fmt.Errorf("compiling the test driver: %v\n%s", err, out)
			}
		}()
		start := time.Now()
		buildErr = Build(libDir, srcs)
		buildTime = time.Since(start)
		wg.Wait()
		if buildErr == nil {
			buildErr = driverErr
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return libDir, driverExe
}

// runDriver runs one test of the driver with extra environment variables.
func runDriver(t *testing.T, name string, env ...string) (string, error) {
	lib, drv := built(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, drv, lib, name)
	for _, e := range os.Environ() {
		// The build's FMA mode goes on: the driver's GEMM reference follows it.
		if !strings.HasPrefix(e, "GDROTRAIN_EMU_") || strings.HasPrefix(e, FMAEnv+"=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestEmulator(t *testing.T) {
	lib, _ := built(t)
	t.Logf("emulator built in %v", buildTime)
	for _, f := range []string{LibCUDA, LibCUBLAS, LibNVRTC} {
		if _, err := os.Stat(filepath.Join(lib, f)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		env  []string
	}{
		{"load", nil},
		{"before_init", nil},
		{"no_device", []string{"GDROTRAIN_EMU_NO_DEVICE=1"}},
		{"context", nil},
		{"memory", []string{"GDROTRAIN_EMU_MEM_BYTES=1048576"}},
		{"events", nil},
		{"vecadd", nil},
		{"scalars", nil},
		{"grid", nil},
		{"reduce", nil},
		{"softmax", nil},
		{"shuffle", nil},
		{"warp_reduce", nil},
		{"atomics", nil},
		{"early_exit", nil},
		{"misc_kernels", nil},
		{"missing_sync", nil},
		{"launch_errors", nil},
		{"gemm", nil},
		{"fma", nil},
		{"fault", nil},
		{"nvrtc", nil},
		{"arch", nil},
		{"threads", nil},
		{"capture_modes", nil},
		{"hazard_shuffle", nil},
		{"shfl_exited", nil},
		{"shared_uninit", nil},
		{"spin_flag", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := runDriver(t, tc.name, tc.env...)
			if err != nil || !strings.Contains(out, "PASS") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	t.Run("deadlock", func(t *testing.T) {
		t.Parallel()
		out, err := runDriver(t, "deadlock")
		if err == nil || !strings.Contains(out, "kernel deadlock") || !strings.Contains(out, "barrier") {
			t.Fatalf("want a deadlock report; got %v\n%s", err, out)
		}
	})
}

// TestAdversary runs the planted bugs whose detection ends the process or
// the launch with a report: each must fail, and say what and where.
func TestAdversary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		abort bool     // the process aborts (undefined behaviour in a warp operation)
		want  []string // in the output
	}{
		{"shfl_unreached", true, []string{"kernel shfl_unreached", "deadlock", "__syncthreads", "a shuffle (mask ffffffff)"}},
		{"shfl_mismatch", true, []string{"kernel shfl_mismatch", "different warp operations", "a shuffle xor", "a vote"}},
		{"shfl_not_in_mask", true, []string{"kernel shfl_not_in_mask", "thread (3,0,0) of block 0", "mask fffffff0", "leaves its lane (3) out"}},
		{"misaligned", false, []string{"kernel misaligned_load: misaligned access (adversary.cu:", "aligned to 16 bytes", "CUDA_ERROR_MISALIGNED_ADDRESS", "GDROTRAIN_EMU_SEED=1"}},
		{"oob_end", false, []string{"kernel write_at: illegal address", "at offset +1024 of the 1024-byte allocation", "past its end", "block (3,0,0) thread (0,0,0)", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		{"oob_slack", false, []string{"kernel write_at wrote at offset +1000 of the 1000-byte allocation", "past its end", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		{"oob_before", false, []string{"kernel write_at wrote at offset -4 of the 1024-byte allocation", "before its start"}},
		{"oob_read", false, []string{"kernel read_at: illegal address", "at offset +4096 of the 4096-byte allocation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := runDriver(t, tc.name)
			if tc.abort {
				if err == nil || !strings.Contains(out, "aborting") {
					t.Errorf("want the process to abort; got %v", err)
				}
			} else if err != nil || !strings.Contains(out, "PASS") {
				t.Errorf("%v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
	// A fault in host code is not a kernel's: it still ends the process.
	t.Run("host_fault", func(t *testing.T) {
		t.Parallel()
		out, err := runDriver(t, "host_fault")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(ee.String(), "segmentation fault") || !strings.Contains(out, "faulting in host code") {
			t.Errorf("want the driver killed by SIGSEGV; got %v\n%s", err, out)
		}
	})
}

func TestBuildErrors(t *testing.T) {
	built(t) // warms the object cache, so only the kernels below compile
	dir := t.TempDir()

	err := Build(dir, map[string]string{"broken.cu": "extern \"C\" __global__ void k(float* x) {\n\tx[0] = undefined_thing;\n}\n"})
	if err == nil || !strings.Contains(err.Error(), "broken.cu:2") || !strings.Contains(err.Error(), "undefined_thing") {
		t.Errorf("compile error: got %v", err)
	}

	// NVRTC has no M_PI or INFINITY built in; neither does the emulator.
	err = Build(dir, map[string]string{"pi.cu": "extern \"C\" __global__ void k(float* x) { x[0] = M_PI + INFINITY; }\n"})
	if err == nil || !strings.Contains(err.Error(), "M_PI") {
		t.Errorf("M_PI: got %v", err)
	}

	k := "extern \"C\" __global__ void same(int* x) { x[0] = 1; }\n"
	err = Build(dir, map[string]string{"a.cu": k, "b.cu": k})
	if err == nil || !strings.Contains(err.Error(), "same is defined in both a.cu and b.cu") {
		t.Errorf("duplicate kernel: got %v", err)
	}

	err = Build(dir, map[string]string{"../escape.cu": k})
	if err == nil || !strings.Contains(err.Error(), "bad source name") {
		t.Errorf("bad name: got %v", err)
	}

	err = Build(dir, map[string]string{"x.cu": "#error not for the emulator\n"})
	if err == nil || !strings.Contains(err.Error(), "not for the emulator") {
		t.Errorf("#error: got %v", err)
	}

	// ptxas refuses a kernel with more than 48 KiB of static shared memory,
	// counting the __shared__ variables of the functions it calls; so does
	// the build. CUDA allows no initialiser on a __shared__ variable.
	for _, c := range []struct{ src, want string }{
		{`extern "C" __global__ void too_big(float* x) {
	__shared__ float big[49 * 256];
	big[threadIdx.x] = x[threadIdx.x];
	__syncthreads();
	x[threadIdx.x] = big[255 - threadIdx.x];
}
`, "kernel too_big uses too much shared data (50176 bytes of __shared__ variables: big 50176; at most 49152"},
		{`__device__ __noinline__ float h(int t) {
	__shared__ float hs[8 * 256];
	hs[t] = (float)t;
	__syncthreads();
	return hs[t ^ 1];
}
extern "C" __global__ void fits(float* x) {
	__shared__ float s[48 * 256];
	s[threadIdx.x] = x[0];
	__syncthreads();
	x[threadIdx.x] = s[threadIdx.x ^ 1];
}
extern "C" __global__ void via_helper(float* x) {
	__shared__ float s[41 * 256];
	s[threadIdx.x] = h(threadIdx.x);
	__syncthreads();
	x[threadIdx.x] = s[threadIdx.x ^ 1];
}
`, "kernel via_helper uses too much shared data (50176 bytes of __shared__ variables: "},
		{`extern "C" __global__ void initialised(float* x) {
	__shared__ float s = 1.0f;
	s += x[0];
	x[1] = s;
}
`, "kernel initialised: __shared__ variable s is not in the unit's .tbss"},
	} {
		err = Build(dir, map[string]string{"shared.cu": c.src})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error saying %q", err, c.want)
		} else if strings.Contains(err.Error(), "kernel fits") {
			t.Errorf("a kernel of exactly 48 KiB was refused: %v", err)
		}
	}

	// A build that works after failures, into the same folder, with a
	// kernel in a subfolder and no kernels at all in another file.
	if err := Build(dir, map[string]string{"sub/ok.cu": k, "empty.cu": "// nothing\n"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{LibCUDA, LibCUBLAS, LibNVRTC, LibNCCL} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	for _, l := range []string{LibCUBLAS, LibNCCL} {
		if target, err := os.Readlink(filepath.Join(dir, l)); err != nil || target != LibCUDA {
			t.Errorf("%s -> %q, %v", l, target, err)
		}
	}
}

func TestExports(t *testing.T) {
	lib, _ := built(t)
	if _, err := exec.LookPath("nm"); err != nil {
		t.Skip("nm not on PATH")
	}
	out, err := exec.Command("nm", "-D", "--defined-only", filepath.Join(lib, LibCUDA)).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			got[f[2]] = true
		}
	}
	for _, want := range strings.Fields(`cuInit cuDriverGetVersion cuDeviceGetCount cuDeviceGet cuDeviceGetName
		cuDeviceGetAttribute cuDeviceTotalMem_v2 cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRelease_v2
		cuCtxSetCurrent cuCtxSynchronize cuMemAlloc_v2 cuMemFree_v2 cuMemGetInfo_v2 cuMemcpyHtoD_v2
		cuMemcpyDtoH_v2 cuMemcpyDtoD_v2 cuMemcpyHtoDAsync_v2 cuMemcpyDtoHAsync_v2 cuMemcpyDtoDAsync_v2
		cuMemsetD8_v2 cuMemsetD32_v2 cuStreamCreate cuStreamDestroy_v2 cuStreamSynchronize cuEventCreate
		cuEventRecord cuEventSynchronize cuEventElapsedTime cuEventDestroy_v2 cuModuleLoadData cuModuleUnload
		cuModuleGetFunction cuFuncSetAttribute cuLaunchKernel cuGetErrorName cuGetErrorString
		cublasCreate_v2 cublasDestroy_v2 cublasSetStream_v2 cublasSetMathMode cublasGetVersion_v2
		cublasGemmEx cublasGemmStridedBatchedEx
		nvrtcVersion nvrtcGetErrorString nvrtcCreateProgram nvrtcCompileProgram nvrtcGetProgramLogSize
		nvrtcGetProgramLog nvrtcGetPTXSize nvrtcGetPTX nvrtcGetCUBINSize nvrtcGetCUBIN nvrtcDestroyProgram
		cuStreamQuery cuStreamBeginCapture_v2 cuStreamEndCapture cuThreadExchangeStreamCaptureMode ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommDestroy ncclCommAbort
		ncclCommGetAsyncError ncclGetErrorString ncclGetLastError ncclAllReduce ncclReduceScatter
		ncclAllGather ncclBroadcast`) {
		if !got[want] {
			t.Errorf("%s is not exported", want)
		}
	}
	for name := range got {
		if !strings.HasPrefix(name, "cu") && !strings.HasPrefix(name, "nvrtc") && !strings.HasPrefix(name, "nccl") {
			t.Errorf("unexpected export %s", name)
		}
	}
}

// TestFMAEnv checks the values GDROTRAIN_EMU_FMA takes (the FMA build
// itself is tested by running the whole suite with it, as make test does).
func TestFMAEnv(t *testing.T) {
	for _, v := range []string{"", "0"} {
		t.Setenv(FMAEnv, v)
		if on, err := FMA(); on || err != nil {
			t.Errorf("%s=%q: %v, %v; want off", FMAEnv, v, on, err)
		}
	}
	t.Setenv(FMAEnv, "yes")
	if _, err := FMA(); err == nil || !strings.Contains(err.Error(), "want 0 or 1") {
		t.Errorf("%s=yes: %v", FMAEnv, err)
	}
	t.Setenv(FMAEnv, "1")
	on, err := FMA()
	if can := runtime.GOARCH == "amd64" && cpuHasFMA(); on != can || (err == nil) != can {
		t.Errorf("%s=1 on %s (FMA in /proc/cpuinfo: %v): %v, %v", FMAEnv, runtime.GOARCH, cpuHasFMA(), on, err)
	}
	t.Logf("%s=1 here: %v, %v", FMAEnv, on, err)
}

// TestWgmma runs the warpgroup MMA model: products checked against
// references, the equality with mma.sync, and planted bugs that must fail
// their launch with a report saying what and where.
func TestWgmma(t *testing.T) {
	runPassing(t, "wgmma", "wgmma_mma", "wgmma_ok", "wgmma_wait1")
	where := "block (0,0,0) thread ("
	runPlanted(t, func(name string) string {
		if name == "wgmma_acc_read" {
			return "" // the NaN reads are the test's own finding, not a report
		}
		return "kernel wgmma_bug: "
	}, []plantedCase{
		{"wgmma_acc_read", []string{"accumulators read before wgmma.wait_group: NaN in all 128 threads"}},
		{"wgmma_acc_write", []string{"the accumulator registers of an in-flight wgmma were written (d[1] = 0x7fe0dead)", where, "CUDA_ERROR_LAUNCH_FAILED"}},
		{"wgmma_not_sm90a", []string{"a warpgroup MMA (wgmma) in a module not compiled for sm_90a", where, "CUDA_ERROR_LAUNCH_FAILED"}},
		{"wgmma_a_changed", []string{"the A registers of an in-flight wgmma (RS) changed", where}},
		{"wgmma_smem_inflight", []string{"shared memory operand of an in-flight wgmma was written (B, 16 bytes at window address 0x", where}},
		{"wgmma_no_fence", []string{"wgmma.mma_async without a wgmma.fence since the kernel's start", where}},
		{"wgmma_acc_after_fence", []string{"the accumulator registers of a wgmma.mma_async were written after the last wgmma.fence", where}},
		{"wgmma_a_after_fence", []string{"the A registers of a wgmma.mma_async were written after the last wgmma.fence", where}},
		{"wgmma_no_proxy_fence", []string{"was written after the last fence.proxy.async", where}},
		{"wgmma_desc_mismatch", []string{"differs from warp", "the 4 warps of a warpgroup must issue the same wgmma operations", where}},
		{"wgmma_base_offset", []string{"has base offset 1, which the emulator does not model", where}},
		{"wgmma_past_end", []string{"runs past the end of the 2048-byte __shared__ variable at window 0x", "CUDA_ERROR_ILLEGAL_ADDRESS", where}},
		{"wgmma_outside", []string{"start address 0x10 is outside every __shared__ variable", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		{"wgmma_uncommitted", []string{"wgmma.wait_group 0 with a wgmma.mma_async not committed", where}},
		{"wgmma_pending_exit", []string{"the thread exits with 1 wgmma.mma_async in flight", where}},
		{"wgmma_cvta_global", []string{"__cvta_generic_to_shared of an address outside every __shared__ variable", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		{"wgmma_lane_missing", []string{"wgmma.fence needs all 32 lanes of the warp", where}},
		{"wgmma_swizzle_misaligned", []string{"(128B swizzle) points into a __shared__ variable not aligned to 1024 bytes", "declare it __align__(1024)", where}},
		{"wgmma_warp_missing", []string{"warp 3 of warpgroup 0", "did 0 wgmma operations, warp 0 of its warpgroup 4", where}},
	})
}

// runPassing runs driver cases that must pass.
func runPassing(t *testing.T, names ...string) {
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runDriver(t, name)
			if err != nil || !strings.Contains(out, "PASS") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// plantedCase is a driver case with a planted bug and what its output must say.
type plantedCase struct {
	name string
	want []string
}

// runPlanted runs each planted bug under a few schedules (the report must
// not depend on the order in which threads get there) and checks its
// output for the case's phrases and for kernel(name), the report's
// "kernel X: " prefix ("" for cases the driver itself detects).
func runPlanted(t *testing.T, kernel func(name string) string, cases []plantedCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for seed := 1; seed <= 3; seed++ {
				out, err := runDriver(t, tc.name, fmt.Sprintf("GDROTRAIN_EMU_SEED=%d", seed))
				if err != nil || !strings.Contains(out, "PASS") {
					t.Errorf("seed %d: %v", seed, err)
				}
				want := tc.want
				if k := kernel(tc.name); k != "" {
					want = append(want, k)
				}
				for _, w := range want {
					if !strings.Contains(out, w) {
						t.Errorf("seed %d: the output lacks %q", seed, w)
					}
				}
				if t.Failed() || testing.Verbose() {
					t.Logf("seed %d: output:\n%s", seed, out)
				}
			}
		})
	}
}

// TestCpAsync runs the cp.async model: a double-buffered tile copy checked
// exactly against its input, and planted bugs that must fail their launch
// with a report saying what and where (or, for an early read and a missing
// __syncthreads, give the poison).
func TestCpAsync(t *testing.T) {
	runPassing(t, "cpasync", "cpasync_empty_group", "cpasync_wgmma_ok", "cpasync_spin")
	where := "block (0,0,0) thread ("
	runPlanted(t, func(name string) string {
		switch name {
		case "cpasync_read_early", "cpasync_no_sync":
			return "" // the poison reads are the driver's own finding, not a report
		case "cpasync_no_proxy_fence":
			return "kernel cpasync_wgmma: "
		}
		return "kernel cpasync_tiles: "
	}, []plantedCase{
		{"cpasync_read_early", []string{"destination read before cp.async.wait_group: poison in all 128 threads"}},
		{"cpasync_no_sync", []string{"missing __syncthreads: ", "elements read as cp.async poison"}},
		{"cpasync_dst_write", []string{"the destination of an in-flight cp.async (16 bytes) was written between its issue and the cp.async.wait_group that completed it at shared window address 0x400,", "block (0,0,0) thread (0,0,0)", "CUDA_ERROR_LAUNCH_FAILED"}},
		{"cpasync_src_write", []string{"the source of an in-flight cp.async (16 bytes) was modified between its issue and the cp.async.wait_group", "block (0,0,0) thread (0,0,0)", "CUDA_ERROR_LAUNCH_FAILED"}},
		{"cpasync_exit_pending", []string{"cp.async still in flight at thread exit (4 copies, 0 of them never committed", where, "CUDA_ERROR_LAUNCH_FAILED"}},
		{"cpasync_uncommitted", []string{"cp.async still in flight at thread exit (8 copies, 8 of them never committed", where}},
		{"cpasync_misaligned_dst", []string{"cp.async destination not 16-byte aligned (offset 84 of a 16384-byte __shared__ variable)", "block (0,0,0) thread (5,0,0)", "CUDA_ERROR_MISALIGNED_ADDRESS"}},
		{"cpasync_misaligned_src", []string{"cp.async source not 16-byte aligned", "block (0,0,0) thread (6,0,0)", "CUDA_ERROR_MISALIGNED_ADDRESS"}},
		{"cpasync_dst_global", []string{"cp.async destination outside every __shared__ variable of the kernel", "block (0,0,0) thread (7,0,0)", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		{"cpasync_src_size", []string{"cp.async.cg.shared.global with src-size 17: it must be 0 to 16", "block (0,0,0) thread (8,0,0)", "CUDA_ERROR_LAUNCH_FAILED"}},
		{"cpasync_src_oob", []string{"cp.async source (16 bytes) outside device memory", "past its end", "block (0,0,0) thread (10,0,0)", "CUDA_ERROR_ILLEGAL_ADDRESS"}},
		// Threads 0 and 3 copy to the same bytes: whichever issues second is reported.
		{"cpasync_overlap", []string{"cp.async to 16 bytes that a cp.async of thread (", "still has in flight (two copies to the same bytes are unordered: undefined) at shared window address 0x400,", where, "CUDA_ERROR_LAUNCH_FAILED"}},
		{"cpasync_no_proxy_fence", []string{"was written after the last fence.proxy.async", where, "CUDA_ERROR_LAUNCH_FAILED"}},
	})
}
