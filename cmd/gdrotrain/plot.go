package main

// plot.go: `gdrotrain plot`, figures and an offline index.html from a run's
// metrics.jsonl and validation.jsonl (report package), or several runs
// overlaid.

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/report"
)

func newPlotCmd() *cobra.Command {
	var o report.PlotOptions
	cmd := &cobra.Command{
		Use:   "plot (--run DIR | --compare RUN_A RUN_B …) [--out DIR]",
		Short: "Render a run's curriculum, training and validation figures (PNG, SVG, index.html)",
		Long: `plot reads a run folder (metrics.jsonl, and validation.jsonl and config.yaml
when present) or a gdro-sim --out file and writes PNG and SVG figures and an
index.html that shows them with the run's config, readable offline:

  curriculum heatmaps over steps × accuracy bins (bin 0 = hardest): prompt
    share, Prompt-GDRO weights, realized accuracy, Rollout-GDRO rollouts per
    prompt;
  dynamics: mean bin index, mass in bins ≥ 3 and ≥ 8, weight entropy,
    the shadow price's change against the mean bin (correlation), the
    per-step WSE proxy, μ(t);
  the paper's measurements (docs/algorithm.md §8.1): lead–lag Δμ =
    μ_weight − μ_data, WSE with σ̂ estimated once per run against uniform,
    Figure 1's tail averages (steps ≥ the 60th percentile) of the
    Prompt-GDRO probabilities and Rollout-GDRO rollouts per prompt, the
    high-bin budget share; their key numbers are printed and tabled;
  snapshots at the start, early (a quarter), mid (half way) and late (the
    last step): prompt share next to the weight and the rollout budget share;
  training curves and validation mean@n / pass@k per benchmark, accuracy per
    difficulty bin of the initial model (worst bin), AIME 24/25 averaged and
    the peak checkpoint.

Figures whose fields the run does not log (no Rollout-GDRO in a Prompt-GDRO
run, no training fields in a gdro-sim file) are skipped with a note in
index.html. --compare overlays the scalar curves of several runs, one line
per run (named by folder).`,
		Example: `  gdrotrain plot --run runs/qwen3-1.7b-prompt-gdro
  gdrotrain gdro-sim --preset rollout-10bins --out sim.jsonl && gdrotrain plot --run sim.jsonl --out sim-plots
  gdrotrain plot --compare runs/grpo runs/prompt-gdro runs/rollout-gdro --out plots/compare`,
		Args:         cobra.ArbitraryArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args, o.Stdout = args, cmd.OutOrStdout()
			return report.Plot(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "run folder (metrics.jsonl, validation.jsonl, config.yaml) or a gdro-sim --out JSONL file")
	f.StringSliceVar(&o.Compare, "compare", nil, "runs to overlay (folders or metrics files; also comma-separated)")
	f.StringVar(&o.Out, "out", "", "output folder (default: RUN/plots, or NAME-plots beside a metrics file)")
	return cmd
}
