package cudainfo

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
)

// cudaInfo runs Run as cuda-info with o's settings (on cuda, bf16 for the
// self-test) and returns what it printed.
func cudaInfo(o Options) (string, error) {
	var out strings.Builder
	if o.Device == "" {
		o.Device = "cuda"
	}
	if o.MatMul == "" {
		o.MatMul = "bf16"
	}
	o.Stdout, o.Stderr = &out, io.Discard
	err := Run(o)
	return out.String(), err
}

// TestCudaInfo: without a GPU, cuda-info says so in one sentence, and a
// malformed --compile-for is refused naming the flag. (Filling the kernel
// cache is TestCompileForNewerGPU's: one compile of every kernel, not two.
// The CUBIN path of the same cuda.Precompile, at sm_80 and sm_90, is the
// kernel report's: tools/kernelreport.)
func TestCudaInfo(t *testing.T) {
	if _, err := cudaInfo(Options{}); err != nil && !strings.Contains(err.Error(), "NVIDIA") && !strings.Contains(err.Error(), "CUDA_ERROR") {
		t.Errorf("cuda-info without a GPU: %v", err)
	}
	for _, arch := range []string{"hopper", "sm_", "sm_9x"} {
		if _, err := cudaInfo(Options{CompileFor: arch}); err == nil || !strings.Contains(err.Error(), "--compile-for") {
			t.Errorf("--compile-for %s: %v, want an error naming the flag", arch, err)
		}
	}
}

// TestCompileForNewerGPU: --compile-for fills the kernel cache for an
// architecture, with the NVRTC found through the library folder setting
// (the one scripts/install_cuda_tools.sh unpacks lives where the dynamic
// linker does not search, as on a node with a private toolkit); sm_100 is
// compute capability 10.0 (it was read as sm_10), and with an NVRTC that
// does not know it (12.5's, sm_50 … sm_90) the kernels are prepared as PTX
// for compute_90, which the GPU's driver compiles, instead of failing.
func TestCompileForNewerGPU(t *testing.T) {
	dir := os.Getenv("GDROTRAIN_NVRTC_DIR")
	if dir == "" {
		if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
			t.Fatal("GDROTRAIN_REQUIRE_NVRTC is set but GDROTRAIN_NVRTC_DIR is not")
		}
		t.Skip("skipped: needs NVRTC 12.5 (GDROTRAIN_NVRTC_DIR; scripts/install_cuda_tools.sh)")
	}
	cache := t.TempDir()
	t.Setenv("GDROTRAIN_KERNEL_CACHE", cache)
	t.Setenv("GDROTRAIN_CUDA_LIB_DIR", dir)
	out, err := cudaInfo(Options{CompileFor: "sm_100"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "NVRTC 12.") {
		t.Skipf("skipped: the NVRTC in %s is not 12.x: %s", dir, out)
	}
	ptx, _ := filepath.Glob(filepath.Join(cache, "*.ptx"))
	cubin, _ := filepath.Glob(filepath.Join(cache, "*.cubin"))
	if len(ptx) != len(cuda.Sources()) || len(cubin) != 0 || !strings.Contains(out, "sm_100 as compute_90 (PTX)") {
		t.Fatalf("cache holds %d PTX and %d CUBIN files after %q; want %d PTX", len(ptx), len(cubin), out, len(cuda.Sources()))
	}
}
