package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/device"
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
// device's memory first (memplan.go). The caller has verified dir
// (verifyModelFolder) before reading any of its files.
func loadModel(cmd *cobra.Command, dir string, f deviceFlags, plan *memPlan) (*model.Model, error) {
	b, err := openBackend(cmd, f)
	if err != nil {
		return nil, err
	}
	if plan != nil {
		// Against the device's memory, before the weights are read.
		avail, name := deviceMemory(b)
		if err := plan.check(avail, name); err != nil {
			return nil, err
		}
	}
	var m *model.Model
	if model.IsAdapterFolder(dir) {
		m, err = loadAdapterFolder(b, dir)
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
	if err := selfTestDevice(cmd, f.device, f.matmul, f.skipSelfTest); err != nil {
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

// selfTestDevice runs the GPU self-test when name names a GPU (or is
// auto and a GPU is usable), once per process and precision. Without a GPU
// it does nothing: opening the backend then says why.
func selfTestDevice(cmd *cobra.Command, name, matmul string, skip bool) error {
	kind, gpu, err := device.Parse(name)
	if err != nil || kind == device.CPU || skip {
		return nil // a bad name is reported by the backend's selection
	}
	prec, err := cuda.ParsePrecision(matmul)
	if err != nil {
		return nil
	}
	d, err := cuda.Open(gpu, stderrLog(cmd))
	if err != nil {
		return nil
	}
	if selfTested[prec] {
		return nil
	}
	r, err := selftest.Run(d, prec, nil)
	if err != nil {
		return fmt.Errorf("%w\n(--skip-self-test runs anyway, at your own risk)", err)
	}
	selfTested[prec] = true
	fmt.Fprintln(cmd.ErrOrStderr(), r.Summary())
	return nil
}

// selfTested records the precisions this process has self-tested.
var selfTested = map[cuda.Precision]bool{}
