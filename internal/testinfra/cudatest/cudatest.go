// Package cudatest opens the device the tests of the packages built on the
// CUDA backend run on (tools/profile): the GPU, or the CPU emulator
// (internal/testinfra/cudaemu) built once per test binary where there is none, with
// the same rules as the cuda package's own tests (cuda/backend_test.go's
// testDevice, which cannot import this package: it imports cuda).
package cudatest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
)

// DeviceEnv=gpu makes the tests run on the GPU or fail: never on the
// emulator, never skipped for want of a device, and with
// GDROTRAIN_CUDA_LIB_DIR read as the folder of the real libraries (as for
// the cuda package's tests).
const DeviceEnv = "GDROTRAIN_TEST_DEVICE"

var (
	once   sync.Once
	dev    *cuda.Device
	devErr error
	kind   string
	emuDir string
)

// Device opens the GPU, or the emulator where there is none, once per test
// binary, and returns it with where it runs ("gpu" or "emulator"). It skips
// the test where neither can be had (a failure where
// GDROTRAIN_REQUIRE_EMULATOR is set). pkg is the package's path for the
// replay command an emulator failure prints (./tools/profile/).
func Device(t *testing.T, pkg string) (*cuda.Device, string) {
	t.Helper()
	once.Do(func() {
		want := os.Getenv(DeviceEnv)
		if want != "" && want != "gpu" {
			devErr = fmt.Errorf("%s=%q: want gpu or nothing", DeviceEnv, want)
			return
		}
		if os.Getenv(cuda.LibDirEnv) == "" || want == "gpu" {
			d, err := cuda.Open(0, t.Logf)
			if err == nil {
				dev, kind = d, "gpu"
				return
			}
			if !cuda.IsNoGPU(err) || want == "gpu" {
				devErr, kind = err, "gpu"
				return
			}
		}
		if !cudaemu.Available() {
			kind = "none"
			return
		}
		dir, err := os.MkdirTemp("", "gdrotrain-emu-")
		if err != nil {
			devErr = err
			return
		}
		emuDir = dir
		if devErr = cudaemu.Build(dir, cuda.Sources()); devErr != nil {
			return
		}
		os.Setenv(cuda.LibDirEnv, dir)
		os.Setenv(cuda.CacheDirEnv, filepath.Join(dir, "kernel-cache"))
		dev, devErr = cuda.Open(0, t.Logf)
		kind = "emulator"
	})
	if devErr != nil {
		t.Fatalf("open %s: %v", kind, devErr)
	}
	if dev == nil {
		cudaemu.SkipUnavailable(t, "there is no GPU and no g++ for the CPU emulator")
	}
	if kind == "emulator" {
		// The emulator's schedule numbers launches from the scope's start:
		// a test of its own replays alone, under -run, with the seed it
		// prints when it fails.
		os.Setenv(cudaemu.SeedScopeEnv, t.Name())
		t.Cleanup(func() {
			if t.Failed() {
				seed := os.Getenv(cudaemu.SeedEnv)
				if seed == "" {
					seed = "1"
				}
				t.Logf("emulator schedule: %s=%s %s=%q (replays with: %s=%s go test -run '^%s$' %s)",
					cudaemu.SeedEnv, seed, cudaemu.SeedScopeEnv, t.Name(), cudaemu.SeedEnv, seed, t.Name(), pkg)
			}
		})
	}
	return dev, kind
}

// Cleanup removes the emulator Device built; call it from TestMain after
// m.Run.
func Cleanup() {
	if emuDir != "" {
		os.RemoveAll(emuDir)
	}
}
