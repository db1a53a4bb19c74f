// Package cudaemu builds a CPU emulator of the CUDA driver API, cuBLAS and NVRTC,
// so that the CUDA backend (bindings, kernel launches with real void**
// argument packing, cuBLAS calls and the arithmetic of our CUDA C kernels)
// can be tested on machines without a GPU.
//
// Build compiles, with g++, one shared library from the emulator's C++
// sources (csrc/) and the kernel sources, and installs it in a folder under
// the file names the backend looks for: libcuda.so.1, with libcublas.so.13,
// libnvrtc.so.13 and libnccl.so.2 symlinked to it, so that the dynamic loader
// maps one copy and the four share state. Point the backend at the folder with
// GDROTRAIN_CUDA_LIB_DIR. The folder also gets emu-build/, the generated
// sources and objects, which the fake NVRTC uses to check programs.
//
// How the emulator behaves. Where CUDA leaves behaviour undefined, it takes
// the worst choice CUDA allows and fails loudly, so that a kernel or a
// call sequence relying on luck fails here rather than on a GPU:
//
//   - Device pointers are host pointers (256-byte aligned). Fresh
//     allocations are filled with 0xFF bytes (NaN as float). Copies,
//     memsets, cuMemFree and cuBLAS operands are checked against the table of
//     live allocations (CUDA_ERROR_INVALID_VALUE, or
//     CUBLAS_STATUS_EXECUTION_FAILED). Device memory is
//     GDROTRAIN_EMU_MEM_BYTES (default 8 GiB) for accounting.
//   - Guard zones: each cuMemAlloc is a mapping of its own whose end (the
//     size rounded up to 256 bytes) abuts an inaccessible page, with
//     another in front. A kernel touching a guard page faults; the fault
//     ends the launch with CUDA_ERROR_ILLEGAL_ADDRESS and a report on
//     stderr naming the kernel, block, thread, address (relative to the
//     allocation it missed) and seed. The bytes between the end and the
//     256-byte boundary, and between the front guard and the start, hold a
//     canary checked after each launch for the allocations its pointer
//     arguments point into (and at cuMemFree): a kernel that wrote there
//     fails the same way. Kernel errors are sticky, as on a GPU: every
//     later call that needs the context returns the error (cuBLAS calls
//     CUBLAS_STATUS_EXECUTION_FAILED) until the primary context's last
//     reference goes. A fault outside kernel code goes to the signal
//     handler that was there before (the Go runtime's).
//   - Calls that need a context fail with CUDA_ERROR_INVALID_CONTEXT on a
//     host thread with none current; releasing the primary context's last
//     reference frees everything allocated in it.
//   - Stream capture (cuStreamBeginCapture_v2 … cuGraphLaunch): while a
//     stream captures, its launches (argument values copied), async copies
//     and memsets and cuBLAS products on it are recorded, not run; each
//     launch of the instantiated graph runs them in order, a host-to-device
//     copy reading its (pinned) source then. Allocation, freeing and
//     synchronisation that a capture forbids the calling thread fail with
//     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate it, by the
//     capture's mode and the thread's (cuThreadExchangeStreamCaptureMode:
//     a global capture forbids them to every thread in the global mode, a
//     thread-local one to its own thread, a relaxed one to none);
//     cuStreamEndCapture then returns
//     CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. A capture that is not relaxed
//     must end on the OS thread that began it: from another,
//     cuStreamEndCapture fails with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
//     and leaves the capture under way and invalidated (CUDA does not say
//     what becomes of it), so the stream is unusable until its own thread
//     ends it.
//   - Virtual memory management (cuMemAddressReserve … cuMemUnmap) maps for
//     real: a reservation is an mmap with no access, a cuMemCreate
//     allocation a memfd (filled with 0xFF like cuMemAlloc's), cuMemMap an
//     mmap of it over the range (MAP_FIXED | MAP_SHARED), cuMemSetAccess an
//     mprotect, cuMemUnmap an inaccessible mapping back. The granularity
//     is 2 MiB as on current GPUs, or GDROTRAIN_EMU_VMM_GRANULARITY bytes
//     (a multiple of the host page; read per call, kept per reservation).
//     Copies and memsets touching an unmapped page of a reserved range fail
//     with CUDA_ERROR_ILLEGAL_ADDRESS (cuBLAS and NCCL calls with their own
//     errors); a kernel touching one fails like one touching a guard page.
//   - GDROTRAIN_EMU_NO_DEVICE=1 makes cuInit fail with CUDA_ERROR_NO_DEVICE.
//   - GDROTRAIN_EMU_COUNT_ONLY=1 (read at every call) checks launches and
//     GEMMs but computes nothing, leaves fresh memory unfilled and makes
//     memsets and device-to-device copies no-ops, and downloads zeros: the
//     CUDA backend's step
//     profile counts a full-size model's step this way (results are
//     garbage; pages never written are never touched, guard canaries
//     included).
//   - Kernels: every extern "C" __global__ function defined in the sources
//     is launchable by name, from any module. Launches are synchronous.
//     Blocks run in parallel on a few host threads (one per CPU, at most 8;
//     GDROTRAIN_EMU_WORKERS), so atomics are real; each __shared__ variable
//     is a thread_local static, one copy per host thread. The threads of a
//     block are fibers on one host thread, switched at __syncthreads, at
//     warp operations (shuffles, votes, __syncwarp, mma), which complete
//     when every live thread of the block, or every live lane of the mask,
//     has reached them, and at preemption points (atomics one time in four,
//     fences); threads that return leave the barriers, as on the GPU.
//     Threads waiting at different barriers are a deadlock, reported on
//     stderr before the process aborts. Fiber stacks are
//     GDROTRAIN_EMU_STACK_KB (default 256) KiB.
//   - Adversarial schedule: each step runs one thread to its next switch,
//     a random lane of a random warp; per block the worker keeps to the
//     same warp never, half the time, 15 times in 16 or always, so warps
//     run interleaved or several segments (or a whole barrier interval)
//     ahead of each other, and their warp operations complete in any
//     order. A missing __syncthreads, even with a shuffle or an mma
//     between the write and the read, gives wrong results under most
//     seeds. The schedule is seeded: GDROTRAIN_EMU_SEED (default 1, read
//     at every launch) mixed with the launch's number since
//     GDROTRAIN_EMU_SEED_SCOPE last changed and the block's index, so a
//     run replays exactly; the cuda tests set the scope to the test's
//     name, so a failing test (which prints the seed) replays alone under
//     -run, and make test runs them under several seeds.
//   - Shared memory is poisoned at every block's start: each kernel's
//     __shared__ variables (found in its object code, with those of the
//     functions it calls; shared.go) are filled with 0xff or 0x7f bytes,
//     drawn per block (NaN, or a huge float that fmaxf does not hide). A
//     kernel with more than 48 KiB of them fails the build, as ptxas
//     fails; dynamic shared memory may use the rest of 48 KiB, or up to
//     the opt-in limit less the static bytes once
//     cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
//     allows it (CUDA_ERROR_INVALID_VALUE otherwise).
//   - Warp operations: a shuffle reading a lane that has exited, does not
//     exist (a partial warp) or is not in the mask returns the block's
//     poison (undefined in CUDA); one whose source lies outside its
//     segment of width lanes returns the caller's own value, as PTX
//     defines. Exited lanes are not waited for, as PTX says; a live lane
//     of the mask that never arrives is a deadlock. Lanes meeting with the
//     same mask at different operations, a mask leaving out its caller, a
//     width that is not a power of two and an mma.sync without all 32
//     lanes abort the process with a message naming the kernel.
//     __activemask returns the caller's lane only: the lanes run one at a
//     time.
//   - Warpgroup MMA (Hopper's wgmma, which kernels call as emu_wgmma_* of
//     csrc/emu_abi.h where they use inline PTX; bf16 to fp32, m64nNk16,
//     A from registers or shared memory, every swizzle mode) is modelled
//     adversarially: an MMA completes only at the wgmma.wait_group that
//     retires its commit group, its accumulators read as NaN until then,
//     and writing them, changing its A registers or the shared memory it
//     reads before then, issuing without a wgmma.fence since the kernel's
//     start or the last wait, writing its registers between the fence and
//     the MMA, reading shared memory written after the last
//     fence.proxy.async, warps of a warpgroup issuing different operations,
//     lanes missing, bad descriptors or operands outside the kernel's
//     __shared__ variables fail the launch (CUDA_ERROR_LAUNCH_FAILED or
//     CUDA_ERROR_ILLEGAL_ADDRESS) with a report naming the kernel, block,
//     thread and warp. __cvta_generic_to_shared returns addresses in a
//     window of the kernel's __shared__ variables (each 1024-aligned, from
//     1024). The arithmetic is mma.sync's, k step by k step.
//   - Asynchronous copies (Ampere's cp.async.cg.shared.global of 16 bytes
//     with a source size, commit_group and wait_group, which kernels call
//     as emu_cp_async* of csrc/emu_abi.h) are modelled adversarially too:
//     per thread, a copy completes only at the wait_group that retires its
//     group (uncommitted copies are in no group: wait_group leaves them in
//     flight), its 16 destination bytes read as a NaN poison until then,
//     and writing them or the source before then, a thread exiting with
//     copies in flight, two copies in flight to the same bytes, a
//     destination outside the kernel's __shared__ variables, misaligned
//     addresses, a source size over 16 and a source outside device memory
//     fail the launch. A wait completes its copies only when no other
//     thread of the block can run, so a thread that reads others' copies
//     without a __syncthreads after their waits reads poison on every
//     schedule. The landing is a generic-proxy write (as the PTX ISA
//     says): a wgmma reading it needs a fence.proxy.async after the wait.
//   - Misaligned accesses: kernels are compiled with g++'s
//     -fsanitize=alignment, whose handler (in the runtime, no libubsan) ends
//     the launch with CUDA_ERROR_MISALIGNED_ADDRESS (sticky), reporting the
//     kernel, the source line and the type, as a GPU faults on a float4
//     load from an address not 16-byte aligned (x86 would not).
//   - The device is compute capability 9.0, or GDROTRAIN_EMU_CC (10.0,
//     12.0, …; read at every call; a malformed value makes cuInit fail with
//     CUDA_ERROR_INVALID_VALUE).
//   - NVRTC keeps the source: PTX and CUBIN are the source text after a
//     line naming the target (sm_90a, compute_90). It models NVRTC 13.0, or
//     GDROTRAIN_EMU_NVRTC_VERSION=12.5 (read at every call): that release's
//     version and architecture list (nvrtcGetSupportedArchs, sm_50 … sm_90
//     for 12.5), and --gpu-architecture values outside the list fail with
//     NVRTC_ERROR_INVALID_OPTION as NVRTC's do. The CUBIN of a virtual
//     architecture (compute_XY) is empty, as NVRTC's is. cuModuleLoadData
//     loads an image only where the device can run it: a CUBIN for sm_XY on
//     X.Z with Z ≥ Y, PTX for compute_XY on any X.Y or newer (the driver's
//     JIT), an sm_90a or compute_90a one on 9.0 only; otherwise
//     CUDA_ERROR_NO_BINARY_FOR_GPU. A warpgroup MMA in a kernel of a module
//     not compiled for sm_90a (PTX for compute_90, say) fails the launch
//     with CUDA_ERROR_LAUNCH_FAILED, as wgmma.cuh's other builds trap. A program
//     with an #error directive, or one g++ rejects (checked with emu.h, the
//     program's headers and its -D/-U/-I options;
//     GDROTRAIN_EMU_NVRTC_CHECK=0 skips that), fails with
//     NVRTC_ERROR_COMPILATION and a log.
//   - cuBLAS GEMMs accumulate in float32, as cuBLAS does for
//     CUBLAS_COMPUTE_32F and its FAST variants: each C element is one
//     running fp32 sum over k in order (sum = a·b + sum, fused with FMA on,
//     two roundings otherwise), then alpha·sum + beta·C as CUTLASS's
//     epilogue does it (alpha·sum + (beta·C), the first product fused with
//     FMA on). CUBLAS_COMPUTE_32F_FAST_TF32 (and CUBLAS_COMPUTE_32F under
//     CUBLAS_TF32_TENSOR_OP_MATH) round A and B to tf32 (nearest even)
//     first; CUBLAS_COMPUTE_32F_FAST_16BF rounds them to bf16, or to tf32
//     with GDROTRAIN_EMU_FAST16BF=tf32 (NVIDIA's header allows either; the
//     variable is read at every call, and values other than bf16 and tf32
//     make the call fail with CUBLAS_STATUS_INVALID_VALUE). A bf16 C is
//     rounded to nearest even from the fp32 result. With
//     GDROTRAIN_EMU_GEMM_ORDER=shape (read at every call; the default, in,
//     keeps the order above) the K sum depends on the shape as a GPU's
//     choice of cuBLAS algorithm makes it: K is split into slices, 8 when
//     the product has at most 64 elements (m·n), 4 up to 1024, 2 up to
//     16384, 1 above (at most one per 32 k), each summed in order and the
//     partials added last to first. So a row's bits depend on how many
//     rows share the product, and a test of exact mode's batch-invariant
//     products (cuda.TestExactMatMulBatchInvariant) fails if a product is
//     left on cuBLAS; other values fail the call with
//     CUBLAS_STATUS_INVALID_VALUE.
//   - NCCL (csrc/emu_nccl.cc) runs between the processes of one machine, one
//     rank each, through a POSIX shared-memory segment named in the unique
//     id. Collectives (all-reduce, reduce-scatter, all-gather, broadcast)
//     run synchronously in the call, in chunks of one slot per rank
//     (GDROTRAIN_EMU_NCCL_SLOT_BYTES, default 4 MiB); reductions add rank 0 +
//     rank 1 + … in order, so results are bitwise reproducible. A rank that
//     does not arrive within GDROTRAIN_EMU_NCCL_TIMEOUT_MS (default 60000)
//     fails the others' call with ncclSystemError, a rank whose process has
//     exited with ncclRemoteError, and ncclCommAbort from another thread
//     ends a waiting call at once; ncclGetLastError names the missing ranks.
//     Ranks whose calls differ (collective, count, type, op, root) fail with
//     ncclInvalidUsage. fp16/bf16/fp8 reductions and ncclAvg are refused.
//   - Fused multiply-add: nvcc and NVRTC contract a*b+c into one FMA by
//     default (--fmad=true), g++ at -O1 on x86-64 never does. With
//     GDROTRAIN_EMU_FMA=1, Build adds FMAFlags (-mfma -ffp-contract=fast
//     -fexpensive-optimizations -DGDROTRAIN_EMU_FMA=1), so kernels contract
//     where g++ finds a*b+c (not always where nvcc would) and each GEMM step
//     is an explicit fmaf. It works on x86-64 CPUs with FMA only; Build fails
//     with a message elsewhere, and the library aborts at load on a CPU
//     without it. Like GDROTRAIN_EMU_CXXFLAGS, the flags are part of the
//     object cache key. __fadd_rn, __fmul_rn and friends never contract.
//   - Fault injection for tests of the tests: GDROTRAIN_EMU_FAULT=name[,name...]
//     lists kernels that cuLaunchKernel checks as usual but does not run,
//     returning CUDA_SUCCESS, so their outputs keep whatever the buffers held
//     (as a broken kernel on a GPU would give). The name gemm makes every
//     cuBLAS GEMM (cublasGemmEx, and each matrix of
//     cublasGemmStridedBatchedEx) compute correctly and then add 1 + |C(0,0)|
//     to its element C(0,0): off by at least 1 and by at least 100%. The
//     variable is read at every launch and call, so a test can set it (with
//     os.Setenv) after the device is open. The first fault of each name
//     prints a line on stderr.
//
// Tests that need the emulator skip where g++ is missing, unless
// GDROTRAIN_REQUIRE_EMULATOR is set (CI sets it): then they fail. make test
// runs the whole CUDA package in the default mode (seed 1); the tests that
// launch every kernel under seed 3; the kernel, bf16 and rounding-sensitive
// tests with GDROTRAIN_EMU_FMA=1 (seed 2); and the bf16 tests with
// GDROTRAIN_EMU_FAST16BF=tf32 (seed 3). The Makefile says which and why.
//
// make emulator (cmd/build-emulator) builds the emulator with the real
// kernels into .cache/cuda-emu, for running the binary without a GPU; give
// it a kernel cache of its own (GDROTRAIN_KERNEL_CACHE), since its "CUBINs"
// are source text under NVRTC version 13.0.
//
// Kernel sources see csrc/emu.h before their own text: it maps __global__,
// __device__, __shared__, threadIdx and friends, warp operations, atomics
// and the math intrinsics onto g++, and leaves out what NVRTC does not have
// built in (M_PI, INFINITY...). Each source is a translation unit of its
// own, wrapped in an anonymous namespace, so helpers may repeat across
// files; kernel names may not. Sources whose names end in .h, .cuh, .hpp or
// .inc are not compiled on their own; the others can #include them.
package cudaemu

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The file names Build installs.
const (
	LibCUDA   = "libcuda.so.1"
	LibCUBLAS = "libcublas.so.13"
	LibNVRTC  = "libnvrtc.so.13"
	LibNCCL   = "libnccl.so.2"
)

// CacheEnv, when set, names a folder where compiled objects are kept across
// processes (keyed by a hash of everything that goes into them).
const CacheEnv = "GDROTRAIN_EMU_CACHE"

// FlagsEnv adds g++ flags to every compilation (for example -O2 or -g).
const FlagsEnv = "GDROTRAIN_EMU_CXXFLAGS"

// FMAEnv, set to 1, builds with fused multiply-add (see the package doc).
const FMAEnv = "GDROTRAIN_EMU_FMA"

// FMAFlags are the g++ flags FMAEnv=1 adds: FMA instructions, contraction of
// a*b+c wherever g++ finds it (GCC forms FMAs only with
// -fexpensive-optimizations, which -O1 leaves off), and the macro that
// switches the cuBLAS GEMM to explicit fused steps.
var FMAFlags = []string{"-mfma", "-ffp-contract=fast", "-fexpensive-optimizations", "-DGDROTRAIN_EMU_FMA=1"}

// Fast16BFEnv picks what CUBLAS_COMPUTE_32F_FAST_16BF rounds its inputs to:
// bf16 (the default) or tf32. It is read at every GEMM call.
const Fast16BFEnv = "GDROTRAIN_EMU_FAST16BF"

// GemmOrderEnv, set to shape, makes the order of a cuBLAS GEMM's K sum
// depend on the product's shape (split-K slices by m·n, see the package
// doc), as a GPU's algorithm choice does; in (the default) keeps one
// running sum in order. It is read at every GEMM call.
const GemmOrderEnv = "GDROTRAIN_EMU_GEMM_ORDER"

// FaultEnv lists, comma-separated, kernels that are not run when launched,
// and "gemm" to perturb every cuBLAS GEMM. It is read at every launch and
// GEMM call, so a test may set it after the device is open.
const FaultEnv = "GDROTRAIN_EMU_FAULT"

// SeedEnv seeds the adversarial schedule (default 1); SeedScopeEnv names a
// scope: launches are numbered from 0 again whenever it changes. Both are
// read at every launch (see the package doc).
const (
	SeedEnv      = "GDROTRAIN_EMU_SEED"
	SeedScopeEnv = "GDROTRAIN_EMU_SEED_SCOPE"
)

// RequireEnv, when set (as CI does), turns the tests' "no emulator" skips
// into failures.
const RequireEnv = "GDROTRAIN_REQUIRE_EMULATOR"

//go:embed csrc/emu.h csrc/emu_abi.h csrc/emu_internal.h csrc/emu_runtime.cc csrc/emu_driver.cc csrc/emu_cublas.cc csrc/emu_nvrtc.cc csrc/emu_nccl.cc
var csrc embed.FS

// runtimeUnits are the emulator's own translation units.
var runtimeUnits = []string{"emu_runtime.cc", "emu_driver.cc", "emu_cublas.cc", "emu_nvrtc.cc", "emu_nccl.cc"}

// kernelFlags are added for kernel units: each function's code in a section
// of its own (so that its relocations tell which __shared__ variables it
// uses; shared.go), and g++'s alignment check, whose handler (in the
// runtime) turns a misaligned access into CUDA_ERROR_MISALIGNED_ADDRESS.
var kernelFlags = []string{"-ffunction-sections", "-fsanitize=alignment", "-fno-sanitize-recover=alignment"}

var baseFlags = func() []string {
	f := []string{"-std=c++17", "-O1", "-fPIC", "-pthread", "-fvisibility=hidden", "-fno-strict-aliasing"}
	if runtime.GOARCH == "amd64" {
		// The fibers switch stacks, which a CET shadow stack would not allow.
		f = append(f, "-fcf-protection=none")
	}
	return f
}()

// Available reports whether g++ is on PATH.
func Available() bool {
	_, err := exec.LookPath("g++")
	return err == nil
}

// SkipUnavailable is for tests that need the emulator where it cannot be
// built (why says why): it skips them, or fails them where RequireEnv is set.
func SkipUnavailable(t interface {
	Helper()
	Skip(...any)
	Fatal(...any)
}, why string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatal(RequireEnv + " is set, but " + why)
	}
	t.Skip("skipped: " + why)
}

// FMA reports whether FMAEnv asks for fused multiply-add, and an error when
// its value is not 0 or 1 or when this machine cannot run FMA code.
func FMA() (bool, error) {
	switch v := os.Getenv(FMAEnv); v {
	case "", "0":
		return false, nil
	case "1":
	default:
		return false, fmt.Errorf("emu: %s=%q: want 0 or 1", FMAEnv, v)
	}
	if runtime.GOARCH != "amd64" {
		return false, fmt.Errorf("emu: %s=1 needs an x86-64 host with FMA (this one is %s); unset it", FMAEnv, runtime.GOARCH)
	}
	if !cpuHasFMA() {
		return false, fmt.Errorf("emu: %s=1 needs a CPU with FMA (not in the flags of /proc/cpuinfo); unset it", FMAEnv)
	}
	return true, nil
}

// cpuHasFMA looks for the fma flag in /proc/cpuinfo.
func cpuHasFMA() bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(name) == "flags" {
			return slices.Contains(strings.Fields(val), "fma")
		}
	}
	return false
}

// isHeader tells whether a source is only for #include.
func isHeader(name string) bool {
	switch path.Ext(name) {
	case ".h", ".cuh", ".hpp", ".inc":
		return true
	}
	return false
}

// Build compiles the emulator with the kernels of sources (file name →
// CUDA C++ text) into dir: dir/libcuda.so.1, and dir/libcublas.so.13,
// dir/libnvrtc.so.13 and dir/libnccl.so.2 as symlinks to it. A compile error is returned with
// g++'s output.
func Build(dir string, sources map[string]string) error {
	if !Available() {
		return errors.New("emu: g++ not found on PATH")
	}
	names := make([]string, 0, len(sources))
	for n := range sources {
		if !filepath.IsLocal(n) || strings.ContainsAny(n, "\"\\\n") {
			return fmt.Errorf("emu: bad source name %q", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)

	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	work := filepath.Join(abs, "emu-build")
	srcDir := filepath.Join(work, "src")
	objDir := filepath.Join(work, "obj")
	for _, d := range []string{srcDir, objDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}

	// The emulator's sources, and the kernel sources (for #include).
	var headerKey bytes.Buffer // everything a unit may #include
	files, err := csrc.ReadDir("csrc")
	if err != nil {
		return err
	}
	emuText := map[string][]byte{}
	for _, f := range files {
		b, err := csrc.ReadFile("csrc/" + f.Name())
		if err != nil {
			return err
		}
		emuText[f.Name()] = b
		if err := os.WriteFile(filepath.Join(work, f.Name()), b, 0o644); err != nil {
			return err
		}
		if strings.HasSuffix(f.Name(), ".h") {
			fmt.Fprintf(&headerKey, "%s\x00%d\x00%s\x00", f.Name(), len(b), b)
		}
	}
	for _, n := range names {
		p := filepath.Join(srcDir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(sources[n]), 0o644); err != nil {
			return err
		}
		if isHeader(n) {
			fmt.Fprintf(&headerKey, "%s\x00%d\x00%s\x00", n, len(sources[n]), sources[n])
		}
	}

	tool, err := toolID()
	if err != nil {
		return err
	}
	fma, err := FMA()
	if err != nil {
		return err
	}
	flags := append([]string{}, baseFlags...)
	if fma {
		flags = append(flags, FMAFlags...)
	}
	flags = append(flags, strings.Fields(os.Getenv(FlagsEnv))...)
	// The key has every flag but the -I folders, which differ between builds.
	keyPrefix := tool + "\x00" + strings.Join(flags, " ") + "\x00" + headerKey.String()
	kflags := append(append([]string{}, flags...), kernelFlags...)
	kkeyPrefix := tool + "\x00" + strings.Join(kflags, " ") + "\x00" + headerKey.String()
	flags = append(flags, "-I", work, "-I", srcDir)
	kflags = append(kflags, "-I", work, "-I", srcDir)

	sem := make(chan struct{}, max(2, runtime.NumCPU()))
	type result struct {
		obj     string
		kernels []kernelDecl
		shared  map[string][]sharedVar
		err     error
	}
	units := append([]string{}, runtimeUnits...)
	for _, n := range names {
		if !isHeader(n) {
			units = append(units, n)
		}
	}
	results := make([]result, len(units))
	var wg sync.WaitGroup
	for idx, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[idx]
			obj := filepath.Join(objDir, fmt.Sprintf("u%03d.o", idx))
			if idx < len(runtimeUnits) {
				r.obj = obj
				r.err = compileCached(filepath.Join(work, u), emuText[u], obj, flags, keyPrefix, u)
				return
			}
			r.kernels, r.err = kernelsOf(filepath.Join(srcDir, filepath.FromSlash(u)), u, flags)
			if r.err != nil {
				return
			}
			text := wrapper(u, sources[u], r.kernels, anchorName(idx))
			cc := filepath.Join(work, fmt.Sprintf("kernels%03d.cc", idx))
			if r.err = os.WriteFile(cc, text, 0o644); r.err != nil {
				return
			}
			r.obj = obj
			if r.err = compileCached(cc, text, obj, kflags, kkeyPrefix, u); r.err != nil {
				return
			}
			if r.shared, r.err = sharedVars(obj, r.kernels, anchorName(idx)); r.err != nil {
				r.err = fmt.Errorf("emu: %s: %v", u, r.err)
				return
			}
			r.err = checkShared(u, r.shared)
		}()
	}
	wg.Wait()

	var errs []error
	defined := map[string]string{}
	var objs []string
	shared := map[int]map[string][]sharedVar{}
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		objs = append(objs, r.obj)
		shared[i] = r.shared
		for _, k := range r.kernels {
			if prev, ok := defined[k.Name]; ok {
				errs = append(errs, fmt.Errorf("emu: kernel %s is defined in both %s and %s", k.Name, prev, units[i]))
			}
			defined[k.Name] = units[i]
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	table := sharedTable(shared)
	tableCC := filepath.Join(work, "shared_table.cc")
	if err := os.WriteFile(tableCC, table, 0o644); err != nil {
		return err
	}
	tableObj := filepath.Join(objDir, "shared_table.o")
	if err := compileCached(tableCC, table, tableObj, flags, keyPrefix, "the table of __shared__ variables"); err != nil {
		return err
	}
	objs = append(objs, tableObj)

	// Link into a temporary name and rename, so that a library already
	// loaded from dir is never overwritten in place.
	script := filepath.Join(work, "exports.map")
	if err := os.WriteFile(script, []byte("{\n  global: cu*; cublas*; nvrtc*; nccl*;\n  local: *;\n};\n"), 0o644); err != nil {
		return err
	}
	tmp := filepath.Join(abs, "."+LibCUDA+".tmp")
	args := append(append([]string{"-shared", "-pthread", "-o", tmp}, objs...),
		"-Wl,-soname,"+LibCUDA, "-Wl,-z,defs", "-Wl,--version-script="+script)
	args = append(args, strings.Fields(os.Getenv(FlagsEnv))...)
	if out, err := exec.Command("g++", args...).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("emu: linking %s: %v\n%s", LibCUDA, err, out)
	}
	if err := os.Rename(tmp, filepath.Join(abs, LibCUDA)); err != nil {
		return err
	}
	for _, l := range []string{LibCUBLAS, LibNVRTC, LibNCCL} {
		p := filepath.Join(abs, l)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Symlink(LibCUDA, p); err != nil {
			return err
		}
	}
	return nil
}

// wrapper is the translation unit for one kernel source: emu.h, the
// anchor of its __shared__ variables (shared.go), the source in an
// anonymous namespace, and the registration of its kernels.
func wrapper(name, src string, kernels []kernelDecl, anchor string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Generated by gdrotrain internal/testinfra/cudaemu for %s.\n#include \"emu.h\"\n", name)
	fmt.Fprintf(&b, "extern \"C\" {\n__attribute__((visibility(\"hidden\"))) __thread char %s;\n}\n", anchor)
	fmt.Fprintf(&b, "namespace {\n#line 1 \"%s\"\n", name)
	b.WriteString(src)
	b.WriteString("\n}  // namespace\n#line 1 \"<emu trampolines>\"\n")
	if len(kernels) > 0 {
		b.WriteString("namespace {\nconst emu_kernel_desc emu_kernels_[] = {\n")
		for _, k := range kernels {
			fmt.Fprintf(&b, "\tEMU_KERNEL_DESC(%q, %s),\n", k.Name, k.Qualified())
		}
		b.WriteString("};\nstruct emu_registrar_ {\n\temu_registrar_() {\n" +
			"\t\tfor (const emu_kernel_desc& k : emu_kernels_) emu_register_kernel(&k);\n\t}\n} emu_registrar_instance_;\n}  // namespace\n")
	}
	return b.Bytes()
}

// kernelsOf preprocesses a source (so that kernels made by macros count)
// and lists its kernels.
func kernelsOf(file, name string, flags []string) ([]kernelDecl, error) {
	args := append(append([]string{}, flags...), "-E", "-P", "-x", "c++",
		"-D__CUDACC__=1", "-D__CUDACC_RTC__=1", "-D__CUDA_ARCH__=900", "-DGDROTRAIN_CUDA_EMULATOR=1", file)
	cmd := exec.Command("g++", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("emu: preprocessing %s: %v\n%s", name, err, stderr.Bytes())
	}
	ks, err := findKernels(string(out))
	if err != nil {
		return nil, fmt.Errorf("emu: %s: finding kernels: %v", name, err)
	}
	return ks, nil
}

var (
	toolOnce sync.Once
	toolStr  string
	toolErr  error

	objMu    sync.Mutex
	objMemo  = map[string]string{} // key → an object file built earlier in this process
	errNoHit = errors.New("no cached object")
)

// toolID identifies the compiler, for cache keys.
func toolID() (string, error) {
	toolOnce.Do(func() {
		p, err := exec.LookPath("g++")
		if err != nil {
			toolErr = err
			return
		}
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			toolErr = fmt.Errorf("emu: g++ --version: %v", err)
			return
		}
		toolStr = p + "\x00" + string(out)
	})
	return toolStr, toolErr
}

// compileCached compiles src (whose text is text) into obj, unless an
// identical compilation is cached in this process or in $GDROTRAIN_EMU_CACHE.
func compileCached(src string, text []byte, obj string, flags []string, keyPrefix, name string) error {
	h := sha256.New()
	io.WriteString(h, keyPrefix)
	h.Write([]byte{0})
	h.Write(text)
	key := hex.EncodeToString(h.Sum(nil))

	objMu.Lock()
	prev := objMemo[key]
	objMu.Unlock()
	if prev != "" && copyFile(prev, obj) == nil {
		return nil
	}
	cacheDir := os.Getenv(CacheEnv)
	if cacheDir != "" && copyFile(filepath.Join(cacheDir, key+".o"), obj) == nil {
		objMu.Lock()
		objMemo[key] = obj
		objMu.Unlock()
		return nil
	}

	args := append(append([]string{}, flags...), "-c", src, "-o", obj)
	if out, err := exec.Command("g++", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("emu: compiling %s: %v\n%s", name, err, out)
	}
	objMu.Lock()
	objMemo[key] = obj
	objMu.Unlock()
	if cacheDir != "" {
		if os.MkdirAll(cacheDir, 0o755) == nil {
			copyFile(obj, filepath.Join(cacheDir, key+".o"))
		}
	}
	return nil
}

// copyFile copies src to dst through a temporary file and a rename.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return errNoHit
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".copy-*")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
