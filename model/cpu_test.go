package model_test

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
)

// TestCPUConformance runs the backend conformance suite on the reference
// (backend/cpu's TestCPUConformance runs it on the fast CPU backend users
// get).
func TestCPUConformance(t *testing.T) {
	t.Run("reference", func(t *testing.T) { backendtest.Run(t, model.NewReferenceCPU(), backendtest.FP32) })
}
