package main

// gdroreplay.go: `gdrotrain gdro-replay`, the GDRO controllers driven by a
// logged JSONL trace (format in gdro/replay.go and the gdro package doc).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/gdro"
)

func newGDROReplayCmd() *cobra.Command {
	var (
		cf    gdroConfigFlags
		trace string
		out   string
	)
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
			if trace == "" {
				return fmt.Errorf("gdro-replay: --trace FILE is required")
			}
			cfg, err := cf.resolve()
			if err != nil {
				return err
			}
			var in io.Reader = cmd.InOrStdin()
			if trace != "-" {
				f, err := os.Open(trace)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			if out == "" {
				out = "-"
			}
			w, closeOut, err := createOut(out, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			sum, err := gdro.Replay(cfg, in, w)
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", trace, err)
			}
			msg := fmt.Sprintf("gdro-replay: %d steps, %d prompts, %d rows replayed (method %s", sum.Steps, sum.Prompts, sum.Rows, sum.Method)
			if cfg.Rollout.Enabled {
				msg += fmt.Sprintf(", final mu %.4f", sum.MuFinal)
			}
			_, err = fmt.Fprintln(cmd.ErrOrStderr(), msg+")")
			return err
		},
	}
	cf.add(cmd, "rollout-10bins")
	cmd.Flags().StringVar(&trace, "trace", "", `JSONL trace to replay ("-" = stdin)`)
	cmd.Flags().StringVar(&out, "out", "-", `decisions JSONL output ("-" = stdout)`)
	return cmd
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
