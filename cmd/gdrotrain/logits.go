package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/infer"
)

func newLogitsCmd() *cobra.Command {
	var o infer.LogitsOptions
	cmd := &cobra.Command{
		Use:   "logits --model DIR --ids 1,2,3",
		Short: "Print the logits of a token sequence as JSON (for comparison with other implementations)",
		Long: `logits runs a Hugging Face Qwen3 folder on the given token ids (CPU, float32)
and prints the final-position logits, or those of every position with --all,
as JSON to stdout or --out.`,
		Example:      "  gdrotrain logits --model /tmp/tiny --ids 1,2,3 --all --out logits.json",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return infer.Logits(o)
		},
	}
	addDeviceFlags(cmd, &o.Device, "fp32")
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "Hugging Face model folder")
	f.StringVar(&o.IDs, "ids", "", "comma-separated token ids")
	f.StringVar(&o.Out, "out", "", "write JSON here instead of stdout")
	f.BoolVar(&o.All, "all", false, "include the logits of every position")
	return cmd
}
