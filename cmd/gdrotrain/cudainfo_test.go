package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCudaInfo: without a GPU, cuda-info says so in one sentence; with
// NVRTC present, --compile-for fills the kernel cache for an architecture.
func TestCudaInfo(t *testing.T) {
	if _, err := runCmd(t, "", "cuda-info"); err != nil && !strings.Contains(err.Error(), "NVIDIA") && !strings.Contains(err.Error(), "CUDA_ERROR") {
		t.Errorf("cuda-info without a GPU: %v", err)
	}
	cache := t.TempDir()
	t.Setenv("GDROTRAIN_KERNEL_CACHE", cache)
	// The NVRTC that scripts/install_cuda_tools.sh unpacks lives in a folder
	// the dynamic linker does not search: found through the library folder
	// setting, as on a node with a private toolkit.
	t.Setenv("GDROTRAIN_CUDA_LIB_DIR", os.Getenv("GDROTRAIN_NVRTC_DIR"))
	out, err := runCmd(t, "", "cuda-info", "--compile-for", "sm_90")
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
	if _, err := runCmd(t, "", "cuda-info", "--compile-for", "hopper"); err == nil {
		t.Error("a malformed architecture was accepted")
	}
}
