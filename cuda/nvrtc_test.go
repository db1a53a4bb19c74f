package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skipNoNVRTC skips (or, where GDROTRAIN_REQUIRE_NVRTC is set, as in CI, fails)
// when no NVRTC library can be loaded.
func skipNoNVRTC(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("GDROTRAIN_REQUIRE_NVRTC") != "" {
		t.Fatalf("GDROTRAIN_REQUIRE_NVRTC is set but NVRTC cannot be loaded: %v", err)
	}
	t.Skipf("skipped: kernels not compiled, no NVRTC here (%v); scripts/install_cuda_tools.sh fetches NVRTC 12.5 (make cuda-tools)", err)
}

// nvrtcDirEnv names the folder of the NVRTC the kernel tests use
// (.cache/cuda-tools/usr/lib/x86_64-linux-gnu after make cuda-tools; the
// Makefile sets it when that folder exists).
const nvrtcDirEnv = "GDROTRAIN_NVRTC_DIR"

// systemCompiler loads NVRTC from $GDROTRAIN_NVRTC_DIR, else the machine's,
// ignoring GDROTRAIN_CUDA_LIB_DIR (which the emulator tests point at a fake
// one), with the cache off.
func systemCompiler(t *testing.T) (*compiler, *library) {
	t.Helper()
	lib, err := findLibrary("nvrtc", os.Getenv(nvrtcDirEnv))
	if err != nil {
		skipNoNVRTC(t, err)
	}
	nv, err := loadNVRTC(lib)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCompiler(nv, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	c.cacheDir = ""
	t.Logf("NVRTC %s from %s", c.version, lib.path)
	return c, lib
}

// TestKernelsCompile compiles every embedded kernel with the NVRTC found on
// this machine (none needs a GPU), so a syntax error never costs device time:
// for sm_80 and sm_90, or sm_90 alone under -short (cuda/internal/kernelreport
// compiles for both as well). It ignores GDROTRAIN_CUDA_LIB_DIR, which the
// emulator tests point at a fake NVRTC.
func TestKernelsCompile(t *testing.T) {
	c, _ := systemCompiler(t)
	srcs := Sources()
	archs := [][2]int{{8, 0}, {9, 0}}
	if testing.Short() {
		archs = archs[1:]
	}
	for _, arch := range archs {
		for _, name := range sortedNames(srcs) {
			img, err := c.compile(name, srcs[name], arch[0], arch[1])
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			if len(img) < 64 {
				t.Errorf("%s sm_%d%d: image of %d bytes", name, arch[0], arch[1], len(img))
			}
			// A CUBIN names each kernel in its symbol table.
			for _, k := range KernelNames(srcs[name]) {
				if !strings.Contains(string(img), k) {
					t.Errorf("%s sm_%d%d: kernel %s missing from the image", name, arch[0], arch[1], k)
				}
			}
		}
	}
}

// TestCompileErrorCarriesLog checks that a broken kernel reports NVRTC's log
// with the file and line.
func TestCompileErrorCarriesLog(t *testing.T) {
	c, _ := systemCompiler(t)
	c.cacheDir = t.TempDir()
	_, err := c.compile("broken.cu", "extern \"C\" __global__ void f(float* x) { x[0] = undefined_name; }\n", 9, 0)
	if err == nil || !strings.Contains(err.Error(), "undefined_name") || !strings.Contains(err.Error(), "broken.cu") {
		t.Fatalf("want an error quoting NVRTC's log, got %v", err)
	}
}

// TestKernelCache: a compiled kernel file is written under the cache folder
// keyed by source, options, architecture and NVRTC version, and read back
// instead of recompiling; another architecture is another entry.
func TestKernelCache(t *testing.T) {
	c, _ := systemCompiler(t)
	c.cacheDir = t.TempDir()
	src := Sources()["elementwise.cu"]
	if _, err := c.compile("elementwise.cu", src, 9, 0); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(c.cacheDir, "elementwise-*.cubin"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one elementwise entry", files)
	}
	os.WriteFile(files[0], []byte("cached image"), 0o644)
	img, err := c.compile("elementwise.cu", src, 9, 0)
	if err != nil || string(img) != "cached image" {
		t.Fatalf("second compile did not use the cache: %q, %v", img, err)
	}
	if _, err := c.compile("elementwise.cu", src, 8, 0); err != nil {
		t.Fatal(err)
	}
	if files, _ = filepath.Glob(filepath.Join(c.cacheDir, "elementwise-*.cubin")); len(files) != 2 {
		t.Fatalf("sm_80 did not get its own entry: %v", files)
	}
}
