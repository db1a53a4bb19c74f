package launch

// device.go: a command that runs a model outside a training config
// (generate, logits, bench) opens its device here, as a training rank
// does in Run: the GPU self-test first, then the backend.

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// Device is where a model command runs: the flags --device,
// --matmul-precision and --skip-self-test.
type Device struct {
	// Name is cpu, cuda, cuda:N or auto (the GPU if one is usable, else
	// the CPU).
	Name string
	// MatMul is the GPU's matrix-product precision: bf16, tf32 or fp32.
	MatMul string
	// SkipSelfTest skips the GPU self-test on CUDA.
	SkipSelfTest bool
}

// Open opens the device's backend, after the GPU self-test, logging to
// log.
func (d Device) Open(log io.Writer) (model.Backend, error) {
	if err := selftest.ForDevice(d.Name, d.MatMul, false, d.SkipSelfTest, log); err != nil {
		return nil, err
	}
	b, err := backend.Open(d.Name, d.MatMul, func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) })
	if err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	return b, nil
}

// LoadModel opens the device's backend and loads dir onto it: a Hugging
// Face folder, or a PEFT adapter folder (a LoRA checkpoint, its base
// checked against the manifest; an exported adapter folder) over its base,
// the adapters applied on the fly. plan, when set, is checked against the
// device's memory first. The caller has verified dir
// (model.VerifyModelFolder) before reading any of its files.
func (d Device) LoadModel(dir string, plan *memplan.Command, log io.Writer) (*model.Model, error) {
	b, err := d.Open(log)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		// Against the device's memory, before the weights are read.
		avail, name := memplan.DeviceMemory(b)
		if err := plan.Check(avail, name); err != nil {
			return nil, err
		}
	}
	var m *model.Model
	if model.IsAdapterFolder(dir) {
		m, err = model.LoadAdapterFolder(b, dir)
	} else {
		m, err = model.Load(b, dir)
	}
	if err != nil {
		return nil, err
	}
	// Under bf16 products, the matrices' bf16 copies halve what a decode
	// step reads.
	if _, err := m.ShadowWeights(); err != nil {
		return nil, err
	}
	return m, nil
}
