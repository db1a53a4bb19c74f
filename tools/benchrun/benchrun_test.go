package benchrun

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/launch"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// TestBenchTorchFlags: --no-torch leaves the baseline out (the Python
// given is never asked: it does not exist, which would read "cannot import
// torch"); --torch-only is the GPU benchmark's, and the two
// exclude each other, each error naming the flag.
func TestBenchTorchFlags(t *testing.T) {
	py := filepath.Join(t.TempDir(), "no-python")
	var out bytes.Buffer
	cpu := launch.Device{Name: "cpu", MatMul: "bf16"}
	o := Options{Only: "tiny", Device: cpu, CPU: bench.CPUOptions{Python: py, NoTorch: true, Rounds: 1, Threads: 1}, Stdout: &out, Stderr: &out}
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "PyTorch baseline not run (--no-torch)") || strings.Contains(out.String(), "cannot import torch") {
		t.Errorf("--no-torch output:\n%s", out.String())
	}
	gpu := launch.Device{Name: "cuda", MatMul: "bf16"}
	for name, o := range map[string]Options{
		"--torch-only":                          {Device: cpu, TorchOnly: true},
		"--no-torch --torch-only --device cuda": {Device: gpu, TorchOnly: true, CPU: bench.CPUOptions{NoTorch: true}},
		"--torch-only --device cuda --profile":  {Device: gpu, TorchOnly: true, Profile: true},
	} {
		o.Only, o.Stdout, o.Stderr = "tiny", io.Discard, io.Discard
		if err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "--torch-only") {
			t.Errorf("bench %s: %v, want an error naming --torch-only", name, err)
		}
	}
}
