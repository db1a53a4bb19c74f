package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// deviceFlags are --device, --matmul-precision and --skip-self-test of a
// command that runs the model outside a training config.
type deviceFlags struct {
	device, matmul string
	skipSelfTest   bool
}

// addDeviceFlags adds the device flags to cmd.
func addDeviceFlags(cmd *cobra.Command, f *deviceFlags, defaultPrec string) {
	cmd.Flags().StringVar(&f.device, "device", "cpu", "cpu, cuda, cuda:N or auto (the GPU if one is usable, else the CPU)")
	cmd.Flags().StringVar(&f.matmul, "matmul-precision", defaultPrec, "GPU matrix-product precision: bf16, tf32 or fp32")
	addSelfTestFlag(cmd, &f.skipSelfTest)
}

func addSelfTestFlag(cmd *cobra.Command, skip *bool) {
	cmd.Flags().BoolVar(skip, "skip-self-test", false, "on CUDA, do not run the GPU self-test (seconds: every op, a training step and a greedy decode against the CPU) first")
}

// loadModel opens the flags' backend and loads dir onto it: a Hugging Face
// folder, or a PEFT adapter folder (a LoRA checkpoint, its base checked
// against the manifest; an exported adapter folder) over its base, the
// adapters applied on the fly. plan, when set, is checked against the
// device's memory first (memplan.Command). The caller has verified dir
// (model.VerifyModelFolder) before reading any of its files.
func loadModel(cmd *cobra.Command, dir string, f deviceFlags, plan *memplan.Command) (*model.Model, error) {
	b, err := openBackend(cmd, f)
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

// openBackend opens the backend the flags name, after the GPU self-test,
// logging to stderr.
func openBackend(cmd *cobra.Command, f deviceFlags) (model.Backend, error) {
	if err := selftest.ForDevice(f.device, f.matmul, f.skipSelfTest, cmd.ErrOrStderr()); err != nil {
		return nil, err
	}
	b, err := backend.Open(f.device, f.matmul, stderrLog(cmd))
	if err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	return b, nil
}

func stderrLog(cmd *cobra.Command) func(string, ...any) {
	return func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
}
