package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda/internal/wheels"
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

// systemCompiler loads a real NVRTC (realNVRTC) from $GDROTRAIN_NVRTC_DIR,
// else the machine's, ignoring GDROTRAIN_CUDA_LIB_DIR (which the emulator
// tests point at a fake one), with the cache off.
func systemCompiler(t *testing.T) (*compiler, *library) {
	t.Helper()
	lib, err := realNVRTC(os.Getenv(nvrtcDirEnv), defaultPlaces("nvrtc", wheels.ForProcess(), wheels.RealEnv))
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

// isEmulatorLib reports whether lib is the CUDA emulator's library
// (internal/testinfra/cudaemu): one file serving as libcuda, libnvrtc and libcublas,
// so its "NVRTC" exports the driver's cuInit, which a real NVRTC never does.
func isEmulatorLib(lib *library) bool {
	_, err := lib.sym("cuInit")
	return err == nil
}

// realNVRTC returns the first NVRTC in dir (if not empty), then in places,
// that is not the emulator's: its libraries may sit in a pip wheel's
// folder (the GPU kit's test lays them out so) or on LD_LIBRARY_PATH, ahead
// of a real NVRTC, and its compiler only checks the source.
func realNVRTC(dir string, places []wheels.Place) (*library, error) {
	if dir != "" {
		places = append([]wheels.Place{{Dir: dir, From: nvrtcDirEnv}}, places...)
	}
	var emulators []string
	for _, p := range places {
		l, err := searchLibrary("nvrtc", "", 0, func() []wheels.Place { return []wheels.Place{p} })
		if err != nil {
			continue
		}
		if !isEmulatorLib(l) {
			return l, nil
		}
		emulators = append(emulators, l.realPath())
		closeAll(l.companions)
		l.close()
	}
	if len(emulators) > 0 {
		return nil, fmt.Errorf("no real NVRTC: the one found (%s) is the CUDA emulator's", strings.Join(emulators, ", "))
	}
	return nil, errors.New("no NVRTC library found")
}

// kernelTestCache is the kernel cache folder of the kernel compilation
// tests: under the repository's .cache, so a second run in the same
// checkout (make test runs the cuda package's tests under several seeds,
// the GPU kit's test again) reuses what the first compiled. Entries are
// keyed as the real cache is, by source, options, NVRTC version and file:
// a changed kernel or another NVRTC compiles afresh.
func kernelTestCache(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".cache", "kernels-nvrtc-test"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKernelsCompile compiles every embedded kernel with the NVRTC found on
// this machine (none needs a GPU), so a syntax error never costs device time:
// for sm_80 and sm_90, or sm_90 alone under -short (tools/kernelreport
// compiles for both as well). It ignores GDROTRAIN_CUDA_LIB_DIR, which the
// emulator tests point at a fake NVRTC. Images come from kernelTestCache
// where this exact compilation has succeeded before, and are checked the
// same way (an ELF CUBIN naming every kernel).
func TestKernelsCompile(t *testing.T) {
	c, _ := systemCompiler(t)
	c.cacheDir = kernelTestCache(t)
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
			if len(img) < 64 || !bytes.HasPrefix(img, []byte("\x7fELF")) {
				t.Errorf("%s sm_%d%d: image of %d bytes, not an ELF CUBIN", name, arch[0], arch[1], len(img))
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

// TestRealNVRTCSkipsEmulator: the kernel tests' NVRTC is never the
// emulator's, even where the emulator's libraries come first in a pip
// wheel's folder (which the plain search takes, as TestCompileErrorCarriesLog
// once did in the GPU kit's test): a real NVRTC further on is taken, and
// with none the error says the emulator's was found.
func TestRealNVRTCSkipsEmulator(t *testing.T) {
	testDevice(t)
	if devKind != "emulator" {
		t.Skip("needs the emulator's libraries")
	}
	root := t.TempDir()
	sp := "venv/lib/python3.12/site-packages"
	wheelDir := filepath.Join(root, sp, "nvidia", "cu13", "lib")
	if err := os.MkdirAll(wheelDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libcuda.so.1", "libnvrtc.so.13", "libcublas.so.13"} {
		if err := os.Symlink(filepath.Join(emuDir, f), filepath.Join(wheelDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	env := fakePyEnv(root, map[string]string{"VIRTUAL_ENV": "venv"}, "", nil, new(int))
	wheel := []wheels.Place{}
	for _, p := range wheels.Places("nvrtc", wheels.Find(env), env) {
		if p.Dir == wheelDir {
			wheel = append(wheel, p)
		}
	}
	if len(wheel) != 1 {
		t.Fatalf("the wheel folder %s is not among the places searched", wheelDir)
	}
	// The plain search takes the emulator's.
	if l, err := searchLibrary("nvrtc", "", 0, func() []wheels.Place { return wheel }); err != nil || !isEmulatorLib(l) {
		t.Fatalf("the wheel folder's NVRTC: %v (emulator %v)", err, err == nil && isEmulatorLib(l))
	}
	if _, err := realNVRTC("", wheel); err == nil || !strings.Contains(err.Error(), "emulator") || !strings.Contains(err.Error(), emuDir) {
		t.Errorf("with only the emulator's NVRTC: %v, want an error naming it", err)
	}
	real := os.Getenv(nvrtcDirEnv)
	if real == "" {
		skipNoNVRTC(t, errors.New("GDROTRAIN_NVRTC_DIR is not set: no real NVRTC to prefer"))
	}
	l, err := realNVRTC("", append(wheel, wheels.Place{Dir: real, From: nvrtcDirEnv}))
	if err != nil || isEmulatorLib(l) || !strings.HasPrefix(l.realPath(), filepath.Clean(real)) {
		t.Fatalf("want the NVRTC of %s after the emulator's: %v", real, err)
	}
}

// TestNVRTC125NewerGPU: the real NVRTC 12.5 lists sm_50 … sm_90 (the list
// the emulator models under GDROTRAIN_EMU_NVRTC_VERSION=12.5), and for an
// sm_100 GPU every kernel compiles to PTX for compute_90, with no
// architecture-specific (wgmma) instruction, NUL-terminated for
// cuModuleLoadData.
func TestNVRTC125NewerGPU(t *testing.T) {
	c, _ := systemCompiler(t)
	if c.version != "12.5" {
		t.Skipf("NVRTC %s here; the test is of 12.5's list (scripts/install_cuda_tools.sh)", c.version)
	}
	if !slices.Equal(c.archs, nvrtc125Archs) {
		t.Fatalf("NVRTC 12.5 lists %v, want %v", c.archs, nvrtc125Archs)
	}
	c.cacheDir = kernelTestCache(t)
	srcs := Sources()
	for _, name := range sortedNames(srcs) {
		img, err := c.compile(name, srcs[name], 10, 0)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		ptx := string(img)
		if !strings.Contains(ptx, ".target sm_90") || strings.Contains(ptx, ".target sm_90a") || !strings.HasSuffix(ptx, "\x00") {
			t.Errorf("%s: not NUL-terminated PTX for compute_90: %.200q", name, ptx)
		}
		if strings.Contains(ptx, "wgmma.") {
			t.Errorf("%s: PTX for compute_90 uses wgmma (sm_90a only)", name)
		}
		for _, k := range KernelNames(srcs[name]) {
			if !strings.Contains(ptx, ".entry "+k) {
				t.Errorf("%s: kernel %s missing from the PTX", name, k)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.cacheDir, "elementwise-*.ptx"))
	if len(files) == 0 {
		t.Errorf("no elementwise-*.ptx in %s", c.cacheDir)
	}
}
