package cpu_test

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
)

// TestCPUConformance runs the backend conformance suite on the backend
// users get (NewBackend: OpenBLAS where installed) and on its Go-kernel
// fallback (model's TestCPUConformance runs it on the reference).
func TestCPUConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) { backendtest.Run(t, cpu.NewBackend(), backendtest.FP32) })
	t.Run("go-kernels", func(t *testing.T) {
		backendtest.Run(t, cpu.NewBackendWith(cpu.Options{NoBLAS: true}), backendtest.FP32)
	})
}
