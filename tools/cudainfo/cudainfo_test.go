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

// TestCudaInfo: without a GPU, cuda-info says so in one sentence; with
// NVRTC present, --compile-for fills the kernel cache for an architecture.
func TestCudaInfo(t *testing.T) {
	if _, err := cudaInfo(Options{}); err != nil && !strings.Contains(err.Error(), "NVIDIA") && !strings.Contains(err.Error(), "CUDA_ERROR") {
		t.Errorf("cuda-info without a GPU: %v", err)
	}
	cache := t.TempDir()
	t.Setenv("GDROTRAIN_KERNEL_CACHE", cache)
	// The NVRTC that scripts/install_cuda_tools.sh unpacks lives in a folder
	// the dynamic linker does not search: found through the library folder
	// setting, as on a node with a private toolkit.
	t.Setenv("GDROTRAIN_CUDA_LIB_DIR", os.Getenv("GDROTRAIN_NVRTC_DIR"))
	out, err := cudaInfo(Options{CompileFor: "sm_90"})
	if err != nil {
		if strings.Contains(err.Error(), "no NVRTC library") && os.Getenv("GDROTRAIN_REQUIRE_NVRTC") == "" {
			t.Skipf("skipped: no NVRTC here (%v)", err)
		}
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.cubin"))
	if len(files) < 5 || !strings.Contains(out, "sm_90") {
		t.Fatalf("cache holds %d files after %q", len(files), out)
	}
	if _, err := cudaInfo(Options{CompileFor: "hopper"}); err == nil || !strings.Contains(err.Error(), "--compile-for") {
		t.Errorf("a malformed architecture: %v, want an error naming the flag", err)
	}
}

// TestCompileForNewerGPU: --compile-for sm_100 is compute capability 10.0
// (it was read as sm_10), and with an NVRTC that does not know it (12.5's,
// sm_50 … sm_90) the kernels are prepared as PTX for compute_90, which the
// GPU's driver compiles, instead of failing.
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
