package main

// gdrosim.go: `gdrotrain gdro-sim`, the model-free simulator of the GDRO
// controllers (gdro/sim.go), for tuning controller settings before spending
// GPU hours.

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// gdroConfigFlags are the flags shared by gdro-sim and gdro-replay that
// select the controller configuration.
type gdroConfigFlags struct {
	preset string
	config string
	mode   string
}

func (f *gdroConfigFlags) add(cmd *cobra.Command, defaultPreset string) {
	cmd.Flags().StringVar(&f.preset, "preset", defaultPreset,
		"controller preset: "+strings.Join(gdro.PresetNames(), ", "))
	cmd.Flags().StringVar(&f.config, "config", "",
		"YAML file with gdro settings (classifier/prompt/rollout keys; prompt.enabled and rollout.enabled switch the controllers, prompt.kl_coef is the surrogate_kl β_KL) applied over the preset")
	cmd.Flags().StringVar(&f.mode, "mode", "",
		"override rollout.mode: paper or reference_compat")
}

// resolve builds the configuration: preset, then --config, then --mode.
func (f *gdroConfigFlags) resolve() (gdro.Config, error) {
	cfg, err := gdro.Preset(f.preset)
	if err != nil {
		return cfg, err
	}
	if f.config != "" {
		data, err := os.ReadFile(f.config)
		if err != nil {
			return cfg, err
		}
		if cfg, err = gdro.ParseConfig(data, cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", f.config, err)
		}
	}
	if f.mode != "" {
		cfg.Rollout.Mode = f.mode
	}
	return cfg, cfg.Validate()
}

// createOut opens path for writing; "-" is stdout, "" is nothing.
func createOut(path string, stdout io.Writer) (io.Writer, func() error, error) {
	switch path {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

func newGDROSimCmd() *cobra.Command {
	var (
		cf        gdroConfigFlags
		sc        = gdro.DefaultSimConfig()
		out       string
		tracePath string
		jsonSum   bool
	)
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
			cfg, err := cf.resolve()
			if err != nil {
				return err
			}
			w, closeOut, err := createOut(out, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			tw, closeTrace, err := createOut(tracePath, cmd.OutOrStdout())
			if err != nil {
				_ = closeOut()
				return err
			}
			sum, err := gdro.Simulate(cfg, sc, w, tw)
			if cerr := closeOut(); err == nil {
				err = cerr
			}
			if cerr := closeTrace(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			report := cmd.OutOrStdout()
			if out == "-" || tracePath == "-" {
				report = cmd.ErrOrStderr()
			}
			if jsonSum {
				return writeJSON(report, sum)
			}
			_, err = io.WriteString(report, sum.Format())
			return err
		},
	}
	cf.add(cmd, "rollout-10bins")
	f := cmd.Flags()
	f.IntVar(&sc.Steps, "steps", sc.Steps, "training steps to simulate")
	f.IntVar(&sc.BatchSize, "batch", sc.BatchSize, "prompts per step")
	f.IntVar(&sc.Population, "population", sc.Population, "number of synthetic prompts")
	f.IntVar(&sc.Domains, "domains", sc.Domains, "number of sub-domains")
	f.Uint64Var(&sc.Seed, "seed", sc.Seed, "random seed")
	f.Float64Var(&sc.LR, "lr", sc.LR, "logit step per unit of training pressure")
	f.Float64Var(&sc.Transfer, "transfer", sc.Transfer, "share of a sub-domain's mean update given to all its prompts")
	f.Float64Var(&sc.RatioNoise, "ratio-noise", sc.RatioNoise, "std of the synthetic ratio drift in the surrogate loss signal")
	f.StringVar(&out, "out", "", `per-step JSONL output file ("-" = stdout)`)
	f.StringVar(&tracePath, "trace", "", `also write a gdro-replay trace with n_max outcomes per prompt ("-" = stdout)`)
	f.BoolVar(&jsonSum, "json", false, "print the summary as JSON")
	return cmd
}
