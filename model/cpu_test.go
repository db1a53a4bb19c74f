package model_test

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
)

// TestCPUConformance runs the backend conformance suite on the backend
// users get (NewCPU: OpenBLAS where installed), on its Go-kernel fallback
// and on the reference.
func TestCPUConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) { backendtest.Run(t, model.NewCPU(), backendtest.FP32) })
	t.Run("go-kernels", func(t *testing.T) {
		backendtest.Run(t, model.NewCPUWith(model.CPUOptions{NoBLAS: true}), backendtest.FP32)
	})
	t.Run("reference", func(t *testing.T) { backendtest.Run(t, model.NewReferenceCPU(), backendtest.FP32) })
}
