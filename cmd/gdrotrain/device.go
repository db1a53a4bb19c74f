package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/launch"
)

// addDeviceFlags adds --device, --matmul-precision and --skip-self-test,
// of a command that runs the model outside a training config, to cmd.
func addDeviceFlags(cmd *cobra.Command, d *launch.Device, defaultPrec string) {
	cmd.Flags().StringVar(&d.Name, "device", "cpu", "cpu, cuda, cuda:N or auto (the GPU if one is usable, else the CPU)")
	cmd.Flags().StringVar(&d.MatMul, "matmul-precision", defaultPrec, "GPU matrix-product precision: bf16, tf32 or fp32")
	addSelfTestFlag(cmd, &d.SkipSelfTest)
}

func addSelfTestFlag(cmd *cobra.Command, skip *bool) {
	cmd.Flags().BoolVar(skip, "skip-self-test", false, "on CUDA, do not run the GPU self-test (seconds: every op, a training step and a greedy decode against the CPU) first")
}
