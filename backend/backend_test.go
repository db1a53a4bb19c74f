package backend

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
)

// TestOpen: cpu opens the CPU backend, bad names are refused before any
// library is loaded, and where no GPU is usable auto falls back to the CPU
// (saying so) while cuda fails with cuda's no-GPU error.
func TestOpen(t *testing.T) {
	logf := func(string, ...any) {}
	if b, err := Open("cpu", "bf16", logf); err != nil || b.Name() != "cpu" {
		t.Fatalf("cpu: %v, %v", b, err)
	}
	for _, c := range [][2]string{{"gpu", "bf16"}, {"cpu", "fp16"}, {"cuda:-1", "fp32"}} {
		if _, err := Open(c[0], c[1], logf); err == nil {
			t.Errorf("Open(%q, %q) accepted", c[0], c[1])
		}
	}
	if _, err := cuda.Open(0, logf); err == nil || !cuda.IsNoGPU(err) {
		t.Skipf("a GPU driver is present here (%v): the no-GPU fallback is not testable", err)
	}
	var logged []string
	b, err := Open("auto", "bf16", func(f string, a ...any) { logged = append(logged, f) })
	if err != nil || b.Name() != "cpu" || len(logged) == 0 || !strings.Contains(logged[0], "using the CPU") {
		t.Errorf("auto without a GPU: backend %v, err %v, log %q", b, err, logged)
	}
	if _, err := Open("cuda", "bf16", logf); err == nil || !cuda.IsNoGPU(err) {
		t.Errorf("cuda without a GPU: %v", err)
	}
}
