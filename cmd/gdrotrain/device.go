package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
)

// addDeviceFlags adds --device and --matmul-precision to a command that runs
// the model outside a training config.
func addDeviceFlags(cmd *cobra.Command, device, matmul *string, defaultPrec string) {
	cmd.Flags().StringVar(device, "device", "cpu", "cpu, cuda, cuda:N or auto (the GPU if one is usable, else the CPU)")
	cmd.Flags().StringVar(matmul, "matmul-precision", defaultPrec, "GPU matrix-product precision: bf16, tf32 or fp32")
}

// loadModel opens the flags' backend and loads the Hugging Face folder dir
// onto it.
func loadModel(cmd *cobra.Command, dir, device, matmul string) (*model.Model, error) {
	b, err := openBackend(cmd, device, matmul)
	if err != nil {
		return nil, err
	}
	return model.Load(b, dir)
}

// openBackend opens the backend the flags name, logging to stderr.
func openBackend(cmd *cobra.Command, device, matmul string) (model.Backend, error) {
	logf := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
	b, err := cuda.SelectBackend(device, matmul, logf)
	if err != nil {
		return nil, fmt.Errorf("--device: %w", err)
	}
	return b, nil
}
