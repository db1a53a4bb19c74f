package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSonameMajor(t *testing.T) {
	for _, c := range []struct {
		path string
		want int
	}{
		{"/usr/lib/x86_64-linux-gnu/libcublas.so.12.5.3.2", 12},
		{"libnvrtc.so.13", 13},
		{"/opt/cuda/lib64/libnvrtc.so.11.2", 11},
		{"libcublas.so", 0},
		{"/x/libcuda.so.1", 1},
	} {
		if got := sonameMajor(c.path); got != c.want {
			t.Errorf("sonameMajor(%q) = %d, want %d", c.path, got, c.want)
		}
	}
	if got := maxCudaMajor(12040); got != 12 {
		t.Errorf("driver 12040 supports CUDA %d, want 12", got)
	}
}

// TestLibraryTooNewForDriver: the emulator's libraries are CUDA 13; a
// driver that supports CUDA ≤ 12 must reject them and say which it found
// and what to do, rather than load them and fail at the first call.
func TestLibraryTooNewForDriver(t *testing.T) {
	testDevice(t)
	if devKind != "emulator" {
		t.Skip("needs the emulator's CUDA 13 libraries")
	}
	for _, kind := range []string{"cublas", "nvrtc"} {
		l, err := findLibraryFor(kind, emuDir, 12)
		if err == nil {
			// A machine with real CUDA 12 libraries finds those instead.
			if strings.HasPrefix(l.realPath(), emuDir) || l.major > 12 {
				t.Errorf("%s: driver ≤ 12 accepted %s (CUDA %d)", kind, l.realPath(), l.major)
			}
			continue
		}
		var le *LibraryError
		if !errors.As(err, &le) || len(le.Rejected) == 0 {
			t.Fatalf("%s: want a LibraryError listing the rejected library, got %v", kind, err)
		}
		msg := err.Error()
		for _, want := range []string{emuDir, "CUDA 13", "driver supports CUDA ≤ 12", "580", LibDirEnv} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message lacks %q: %s", kind, want, msg)
			}
		}
		t.Logf("%s: %v", kind, err)
	}
	if l, err := findLibraryFor("cublas", emuDir, 13); err != nil || !strings.HasPrefix(l.path, emuDir) {
		t.Errorf("driver 13 rejected the emulator's CUDA 13 cuBLAS: %v", err)
	}
}

// TestNVRTCBuiltinsFromFolder: NVRTC loaded by path from a folder the
// dynamic linker does not search brings its builtins library along, so it
// compiles (the real NVRTC fails with "failed to open
// libnvrtc-builtins.so.X.Y" otherwise). Needs the NVRTC that
// scripts/install_cuda_tools.sh unpacks, found through GDROTRAIN_NVRTC_DIR.
func TestNVRTCBuiltinsFromFolder(t *testing.T) {
	dir := os.Getenv(nvrtcDirEnv)
	if dir == "" {
		skipNoNVRTC(t, errors.New("GDROTRAIN_NVRTC_DIR is not set"))
	}
	if strings.Contains(os.Getenv("LD_LIBRARY_PATH"), dir) {
		t.Skip("LD_LIBRARY_PATH already holds the folder; the test would prove nothing")
	}
	lib, err := findLibrary("nvrtc", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lib.realPath(), dir) && !strings.HasPrefix(lib.realPath(), filepath.Clean(dir)) {
		t.Skipf("NVRTC came from %s, not from %s", lib.realPath(), dir)
	}
	if len(lib.companions) == 0 {
		t.Fatalf("no libnvrtc-builtins loaded from %s", filepath.Dir(lib.realPath()))
	}
	nv, err := loadNVRTC(lib)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := nv.Compile(`extern "C" __global__ void k(float* x) { x[threadIdx.x] = expf(x[threadIdx.x]); }`, "k.cu",
		compileOptions(target{arch: "sm_90a"}), true); err != nil {
		t.Fatalf("compile with %s and %s: %v", lib.realPath(), lib.companions[0].realPath(), err)
	}
	t.Logf("NVRTC %s with %s", lib.realPath(), lib.companions[0].realPath())
}
