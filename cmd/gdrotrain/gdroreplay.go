package main

// gdroreplay.go: `gdrotrain gdro-replay`, the GDRO controllers driven by a
// logged JSONL trace (format in gdro/replay.go and the gdro package doc).

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/gdrosim"
)

func newGDROReplayCmd() *cobra.Command {
	var o gdrosim.ReplayOptions
	cmd := &cobra.Command{
		Use:   "gdro-replay --trace FILE",
		Short: "Replay a logged trace through the GDRO controllers and write their decisions",
		Long: `gdro-replay reads a JSONL trace (one line per step: the step's prompts with
their UID and up to n_max recorded rollouts — correct or reward, and the
per-row loss signal) and writes, per step, the controllers' decisions: bins,
Prompt-GDRO weights and multipliers, Rollout-GDRO allocations n_i, μ and arm
probabilities. Prompt i uses its first n_i recorded rollouts. Use it to replay
a logged run under other settings, or to compare the controllers with another
implementation on the same trace.

Trace line:
  {"step": 1, "prompts": [{"uid": "ds:train:17", "correct": [true, false, …],
    "reward": [1, -1, …], "loss": [0.01, …], "kl": [0.0004, …]}, …]}
uid and correct (or reward; correct = reward > 0.5) are required; loss when
the configuration reads it (surrogate signals, loss utilities); kl for the
surrogate_kl signal.`,
		Example: `  gdrotrain gdro-sim --steps 50 --trace trace.jsonl
  gdrotrain gdro-replay --trace trace.jsonl --preset rollout-10bins --out decisions.jsonl`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Stdin, o.Stdout, o.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			return gdrosim.Replay(o)
		},
	}
	addGDROConfigFlags(cmd, &o.Config, "rollout-10bins")
	cmd.Flags().StringVar(&o.Trace, "trace", "", `JSONL trace to replay ("-" = stdin)`)
	cmd.Flags().StringVar(&o.Out, "out", "-", `decisions JSONL output ("-" = stdout)`)
	return cmd
}
