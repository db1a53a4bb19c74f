package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// HeadersEnv names the folder holding NVIDIA's cuda.h, nvrtc.h and
// cublas_v2.h (and nccl.h); scripts/install_cuda_tools.sh unpacks them under
// .cache/cuda-tools and the Makefile exports it.
const HeadersEnv = "GDROTRAIN_CUDA_INCLUDE"

// cudaHeaders returns the include folder, or skips (fails where CI requires
// the CUDA tools).
func cudaHeaders(t *testing.T) string {
	t.Helper()
	dirs := []string{os.Getenv(HeadersEnv), filepath.Join("..", ".cache", "cuda-tools", "usr", "include")}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "cuda.h")); err == nil {
			return d
		}
	}
	if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
		t.Fatalf("GDROTRAIN_REQUIRE_NVRTC is set but no cuda.h in %q (scripts/install_cuda_tools.sh fetches it)", dirs)
	}
	t.Skipf("skipped: no CUDA headers (set %s; scripts/install_cuda_tools.sh fetches them)", HeadersEnv)
	return ""
}

// shimChecks builds a C file that includes NVIDIA's headers and then
// shim.h in checking mode, and asserts for each of our prototypes that the
// real function converts to it, for each constant that it equals the
// header's, and for each (real, abi) type pair that the sizes agree.
func shimChecks(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("shim.h")
	if err != nil {
		t.Fatal(err)
	}
	shim := string(raw)
	var b strings.Builder
	b.WriteString("#include <cuda.h>\n#include <nvrtc.h>\n#include <cublas_v2.h>\n#include <nccl.h>\n")
	b.WriteString("#define GD_CHECK_HEADERS 1\n#include \"shim.h\"\n\n")
	// Prototypes shared by several entry points.
	shared := map[string][]string{
		"nvrtcGetSize":       {"nvrtcGetProgramLogSize", "nvrtcGetPTXSize", "nvrtcGetCUBINSize"},
		"nvrtcGetText":       {"nvrtcGetProgramLog", "nvrtcGetPTX", "nvrtcGetCUBIN"},
		"cuEventSynchronize": {"cuEventSynchronize", "cuEventDestroy_v2"},
		"cuGetErrorName":     {"cuGetErrorName", "cuGetErrorString"},
		"cuDriverGetVersion": {"cuDriverGetVersion", "cuDeviceGetCount"},
		"ncclCommDestroy":    {"ncclCommDestroy", "ncclCommAbort"},
	}
	protos := regexp.MustCompile(`\(\*pf_(\w+)\)`).FindAllStringSubmatch(shim, -1)
	if len(protos) < 40 {
		t.Fatalf("found %d prototypes in shim.h, expected the full list", len(protos))
	}
	n := 0
	for _, m := range protos {
		names, ok := shared[m[1]]
		if !ok {
			names = []string{m[1]}
		}
		for _, fn := range names {
			fmt.Fprintf(&b, "static pf_%s check_%d __attribute__((unused)) = %s;\n", m[1], n, fn)
			n++
		}
	}
	// The CUDA 12.8+ name of the event timer, when the header has it.
	fmt.Fprintf(&b, "#if CUDA_VERSION >= 12080\nstatic pf_cuEventElapsedTime check_v2 __attribute__((unused)) = cuEventElapsedTime_v2;\n#endif\n")
	consts := regexp.MustCompile(`\bGD_(\w+) = `).FindAllStringSubmatch(shim, -1)
	for _, m := range consts {
		fmt.Fprintf(&b, "_Static_assert((long long)GD_%s == (long long)%s, \"shim.h: %s differs from the header\");\n", m[1], m[1], m[1])
	}
	pairs := map[string]bool{}
	for _, m := range regexp.MustCompile(`GD_T\((\w+), (\w+)\)`).FindAllStringSubmatch(shim, -1) {
		if m[1] != "real" {
			pairs[m[1]+"\x00"+m[2]] = true
		}
	}
	keys := make([]string, 0, len(pairs))
	for k := range pairs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := strings.Split(k, "\x00")
		fmt.Fprintf(&b, "_Static_assert(sizeof(%s) == sizeof(%s) && _Alignof(%s) == _Alignof(%s), \"%s is not ABI-compatible with %s\");\n",
			p[0], p[1], p[0], p[1], p[0], p[1])
	}
	t.Logf("%d prototypes, %d constants, %d type pairs checked", n, len(consts), len(keys))
	return b.String()
}

// compileC runs gcc -fsyntax-only on src with warnings as errors.
func compileC(t *testing.T, include, src string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "check.c")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	cmd := exec.Command("gcc", "-std=c11", "-fsyntax-only", "-Wall", "-Werror", "-I", wd, "-I", include, f)
	return cmd.CombinedOutput()
}

// TestShimMatchesHeaders compiles shim.h's prototypes and constants against
// NVIDIA's real CUDA 12.5 headers, so a signature or enum drift fails CI.
func TestShimMatchesHeaders(t *testing.T) {
	inc := cudaHeaders(t)
	if _, err := os.Stat(filepath.Join(inc, "nccl.h")); err != nil {
		t.Fatalf("no nccl.h beside cuda.h in %s: re-run scripts/install_cuda_tools.sh", inc)
	}
	src := shimChecks(t)
	if out, err := compileC(t, inc, src); err != nil {
		t.Fatalf("shim.h disagrees with the headers in %s: %v\n%s", inc, err, out)
	}
	// The check must be able to fail: a prototype with one wrong parameter
	// type and a wrong constant are both rejected.
	for name, bad := range map[string]string{
		"drifted prototype": "typedef GD_RESULT (*pf_bad)(GD_DEVPTR* p, int bytes);\nstatic pf_bad bad __attribute__((unused)) = cuMemAlloc_v2;\n",
		"drifted constant":  "_Static_assert(GD_CUBLAS_COMPUTE_32F_FAST_16BF == CUBLAS_COMPUTE_32F_FAST_TF32, \"x\");\n",
		"drifted NCCL prototype": "typedef GD_NCCL_RESULT (*pf_bad2)(const void* s, void* r, int count, GD_NCCL_TYPE t, GD_NCCL_OP op, GD_NCCL_COMM c, GD_CUDART_STREAM st);\n" +
			"static pf_bad2 bad2 __attribute__((unused)) = ncclAllReduce;\n",
	} {
		if out, err := compileC(t, inc, src+bad); err == nil {
			t.Errorf("%s compiled; the header check cannot fail (%s)", name, out)
		}
	}
}

// TestNCCLHeader: the NCCL header the multi-GPU work compiles against is
// present and self-contained.
func TestNCCLHeader(t *testing.T) {
	inc := cudaHeaders(t)
	if _, err := os.Stat(filepath.Join(inc, "nccl.h")); err != nil {
		if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
			t.Fatalf("no nccl.h in %s", inc)
		}
		t.Skipf("no nccl.h in %s", inc)
	}
	src := "#include <nccl.h>\n_Static_assert(sizeof(ncclUniqueId) == 128, \"ncclUniqueId is 128 bytes\");\n"
	if out, err := compileC(t, inc, src); err != nil {
		t.Fatalf("nccl.h: %v\n%s", err, out)
	}
}
