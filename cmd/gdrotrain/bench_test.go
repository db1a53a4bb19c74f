package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchTorchFlags: --no-torch leaves the baseline out (the Python
// given is never asked: it does not exist, which would read "cannot import
// torch"); --torch-only is the GPU benchmark's, and the two
// exclude each other, each error naming the flag.
func TestBenchTorchFlags(t *testing.T) {
	py := filepath.Join(t.TempDir(), "no-python")
	out, err := runCmd(t, "", "bench", "--only", "tiny", "--rounds", "1", "--threads", "1", "--no-torch", "--torch-python", py)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "PyTorch baseline not run (--no-torch)") || strings.Contains(out, "cannot import torch") {
		t.Errorf("--no-torch output:\n%s", out)
	}
	for _, args := range [][]string{{"--torch-only"}, {"--no-torch", "--torch-only", "--device", "cuda"}, {"--torch-only", "--device", "cuda", "--profile"}} {
		_, err := runCmd(t, "", append([]string{"bench", "--only", "tiny"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--torch-only") {
			t.Errorf("bench %v: %v, want an error naming --torch-only", args, err)
		}
	}
}
