package main

// gdrosim.go: `gdrotrain gdro-sim`, the model-free simulator of the GDRO
// controllers (gdro/sim.go, tools/gdrosim), for tuning controller settings
// before spending GPU hours.

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/tools/gdrosim"
)

// addGDROConfigFlags adds the flags shared by gdro-sim and gdro-replay
// that select the controller configuration.
func addGDROConfigFlags(cmd *cobra.Command, c *gdrosim.ConfigSource, defaultPreset string) {
	cmd.Flags().StringVar(&c.Preset, "preset", defaultPreset,
		"controller preset: "+strings.Join(gdro.PresetNames(), ", "))
	cmd.Flags().StringVar(&c.File, "config", "",
		"YAML file with gdro settings (classifier/prompt/rollout keys; prompt.enabled and rollout.enabled switch the controllers, prompt.kl_coef is the surrogate_kl β_KL) applied over the preset")
	cmd.Flags().StringVar(&c.Mode, "mode", "",
		"override rollout.mode: paper or reference_compat")
}

func newGDROSimCmd() *cobra.Command {
	o := gdrosim.SimOptions{Sim: gdro.DefaultSimConfig()}
	sc := &o.Sim
	cmd := &cobra.Command{
		Use:   "gdro-sim",
		Short: "Simulate the GDRO controllers on a synthetic prompt population (no model)",
		Long: `gdro-sim drives the difficulty classifier, Prompt-GDRO and Rollout-GDRO
without a model: a synthetic population of prompts with latent solve
probabilities (heavy-tailed, several sub-domains), a simulated policy whose
solve probabilities rise with the training pressure each prompt receives, and
Bernoulli rollouts. It writes one JSON object per step (--out; the schema is in
the gdro package documentation) and prints a summary: the weighted
standard-error proxy (WSE) against the uniform allocation, the mean bin index
trend, μ and the arm probabilities. Runs are seeded and deterministic.`,
		Example: `  gdrotrain gdro-sim --preset rollout-10bins --out sim.jsonl
  gdrotrain gdro-sim --preset rollout-10bins --mode reference_compat
  gdrotrain gdro-sim --preset prompt-10bins --config my-gdro.yaml --steps 500`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return gdrosim.Simulate(o)
		},
	}
	addGDROConfigFlags(cmd, &o.Config, "rollout-10bins")
	f := cmd.Flags()
	f.IntVar(&sc.Steps, "steps", sc.Steps, "training steps to simulate")
	f.IntVar(&sc.BatchSize, "batch", sc.BatchSize, "prompts per step")
	f.IntVar(&sc.Population, "population", sc.Population, "number of synthetic prompts")
	f.IntVar(&sc.Domains, "domains", sc.Domains, "number of sub-domains")
	f.Uint64Var(&sc.Seed, "seed", sc.Seed, "random seed")
	f.Float64Var(&sc.LR, "lr", sc.LR, "logit step per unit of training pressure")
	f.Float64Var(&sc.Transfer, "transfer", sc.Transfer, "share of a sub-domain's mean update given to all its prompts")
	f.Float64Var(&sc.RatioNoise, "ratio-noise", sc.RatioNoise, "std of the synthetic ratio drift in the surrogate loss signal")
	f.StringVar(&o.Out, "out", "", `per-step JSONL output file ("-" = stdout)`)
	f.StringVar(&o.Trace, "trace", "", `also write a gdro-replay trace with n_max outcomes per prompt ("-" = stdout)`)
	f.BoolVar(&o.JSON, "json", false, "print the summary as JSON")
	return cmd
}
