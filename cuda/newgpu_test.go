package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// newGPUChildEnv, set to the compute capability the emulator reports
// (10.0), makes TestNewerGPUChild run: it is the child process of
// TestNewerGPUThanNVRTC (one process opens one device, once).
const newGPUChildEnv = "GDROTRAIN_TEST_NEWER_GPU"

// TestNewerGPUThanNVRTC: a GPU newer than the NVRTC at hand (a B200,
// sm_100, or an RTX 50, sm_120, with CUDA 12.5's NVRTC, which knows sm_50 …
// sm_90) opens, with its kernels compiled to PTX for compute_90 and
// compiled by the driver; a small op matches the CPU. On the emulator made
// to report compute capability 10.0 and 12.0 and to model NVRTC 12.5,
// whose cuModuleLoadData refuses the sm_90 CUBIN on either.
func TestNewerGPUThanNVRTC(t *testing.T) {
	testDevice(t)
	if devKind != "emulator" {
		t.Skip("needs the emulator, made to report a compute capability its NVRTC does not know")
	}
	for _, cc := range []string{"10.0", "12.0"} {
		t.Run(cc, func(t *testing.T) {
			cache := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestNewerGPUChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), newGPUChildEnv+"="+cc, "GDROTRAIN_EMU_CC="+cc, "GDROTRAIN_EMU_NVRTC_VERSION=12.5",
				LibDirEnv+"="+emuDir, CacheDirEnv+"="+cache,
				// The parent's device has checked these very sources with g++.
				"GDROTRAIN_EMU_NVRTC_CHECK=0")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestNewerGPUChild") {
				t.Fatalf("child on compute capability %s: %v\n%s", cc, err, out)
			}
			ptx, _ := filepath.Glob(filepath.Join(cache, "*.ptx"))
			cubin, _ := filepath.Glob(filepath.Join(cache, "*.cubin"))
			if len(ptx) != len(Sources()) || len(cubin) != 0 {
				t.Errorf("kernel cache holds %d PTX and %d CUBIN files, want %d PTX", len(ptx), len(cubin), len(Sources()))
			}
			t.Logf("%s", tailLines(string(out), 4))
		})
	}
}

// TestNewerGPUChild opens the device TestNewerGPUThanNVRTC describes.
func TestNewerGPUChild(t *testing.T) {
	cc := os.Getenv(newGPUChildEnv)
	if cc == "" {
		t.Skip("skipped: runs as the child process of TestNewerGPUThanNVRTC")
	}
	var ptxLines int
	d, err := Open(0, func(format string, a ...any) {
		line := fmt.Sprintf(format, a...)
		if strings.Contains(line, "kernels compiled to PTX") {
			ptxLines++
		}
		t.Log(line)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%d.%d", d.Info.Major, d.Info.Minor); got != cc {
		t.Fatalf("device reports %s, want %s", got, cc)
	}
	if !d.Info.KernelsPTX || d.Info.KernelTarget != "compute_90 (PTX)" || d.Info.HasWGMMA() {
		t.Errorf("kernels for %q (PTX %v, wgmma %v), want compute_90 PTX without wgmma", d.Info.KernelTarget, d.Info.KernelsPTX, d.Info.HasWGMMA())
	}
	if ptxLines != 1 {
		t.Errorf("%d log lines about PTX, want one", ptxLines)
	}
	// RMSNorm on the kernels the driver loaded from PTX, against the CPU.
	const rows, n = 5, 96
	rng := rand.New(rand.NewPCG(1, 2))
	x, w := make([]float32, rows*n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range w {
		w[i] = float32(1 + 0.1*rng.NormFloat64())
	}
	run := func(b model.Backend) []float32 {
		X, W := b.New(rows, n), b.New(n)
		b.Upload(X, x)
		b.Upload(W, w)
		out, rstd := b.New(rows, n), b.New(rows)
		b.RMSNorm(out, rstd, X, W, 1e-6)
		got := make([]float32, rows*n)
		b.Download(out, got)
		return got
	}
	got, want := run(NewBackend(d, FP32)), run(model.NewReferenceCPU())
	// Accumulation order differs from the float64 reference: fp32 rounding.
	if _, err := numcheck.Compare(got, want, numcheck.Tol{Atol: 1e-5, Rtol: 1e-5}); err != nil {
		t.Errorf("rmsnorm on compute capability %s: %v", cc, err)
	}
}
