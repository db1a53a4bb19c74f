package model_test

import (
	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// The model's internal tests (package model) run on the fast CPU backend,
// which they cannot import: see model.NewTestBackend.
func init() { model.NewTestBackend = func() model.Backend { return cpu.NewBackend() } }
