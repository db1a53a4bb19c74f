// Package backend opens the model backend a device name asks for: the fast
// CPU backend (backend/cpu), or the CUDA backend on a GPU (cpu, cuda, cuda:N,
// or auto: the GPU when one is usable, else the CPU with a log line). It is
// the one place that links the CUDA bindings; the trainer receives Open as a
// function (trainer.Options.Backend) and builds without cgo.
package backend

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/model"
)

// Open opens the backend name asks for; prec is the matrix-product
// precision on the GPU (bf16, tf32, fp32). logf receives the choice.
func Open(name, prec string, logf func(string, ...any)) (model.Backend, error) {
	kind, gpu, err := device.Parse(name)
	if err != nil {
		return nil, err
	}
	p, err := device.ParsePrecision(prec)
	if err != nil {
		return nil, err
	}
	if kind == device.CPU {
		return cpu.NewBackend(), nil
	}
	d, err := cuda.Open(gpu, logf)
	if err != nil {
		if kind == device.Auto && cuda.IsNoGPU(err) {
			logf("device auto: no GPU usable here (%v); using the CPU backend", err)
			return cpu.NewBackend(), nil
		}
		return nil, fmt.Errorf("device %s: %w", name, err)
	}
	return cuda.NewBackend(d, cuda.Precision(p)), nil
}
