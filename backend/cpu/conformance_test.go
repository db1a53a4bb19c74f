package cpu_test

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
)

// TestCPUConformance runs the backend conformance suite on the backend
// users get (NewBackend: OpenBLAS where installed) and on its Go-kernel
// fallback (model's TestCPUConformance runs it on the reference), and on
// seven workers, whose splits of the multi-tensor ops' concatenated
// elements fall inside tensors (the suite's bitwise checks against the
// per-tensor ops then cover pieces of tensors).
func TestCPUConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) { backendtest.Run(t, cpu.NewBackend(), backendtest.FP32) })
	t.Run("go-kernels", func(t *testing.T) {
		backendtest.Run(t, cpu.NewBackendWith(cpu.Options{NoBLAS: true}), backendtest.FP32)
	})
	t.Run("seven-workers", func(t *testing.T) { backendtest.Run(t, cpu.NewBackendWith(cpu.Options{Workers: 7}), backendtest.FP32) })
}
