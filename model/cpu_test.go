package model_test

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
)

// TestCPUConformance runs the backend conformance suite on the CPU reference.
func TestCPUConformance(t *testing.T) {
	backendtest.Run(t, model.NewCPU(), backendtest.FP32)
}
