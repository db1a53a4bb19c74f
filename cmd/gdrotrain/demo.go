package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/demo"
)

func newDemoCmd() *cobra.Command {
	o := demo.Default()
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the tiny CPU demo: build a model and tokenizer, warm up, train with GRPO + Prompt-GDRO",
		Long: `demo runs the whole pipeline on the CPU with nothing to download:
  1. writes a small Qwen3-style tokenizer and a random tiny Qwen3 model in the
     Hugging Face layout, and loads them back through the normal loaders;
  2. generates a synthetic arithmetic task (six groups from 1-digit addition
     to 2-digit × 1-digit multiplication) with disjoint train and held-out sets;
  3. warms the model up with a short supervised phase on part of the train set;
  4. runs GRPO with Prompt-GDRO (configs/demo.yaml) and reports held-out
     accuracy per group before and after, leaving a run folder with
     metrics.jsonl, validation.jsonl, the config and the trained weights.
Without --resume the GRPO run folder is started afresh (an earlier demo run
there is replaced). A signal (SIGINT, SIGTERM, SIGUSR1) exits with status 3:
during the warm-up nothing is kept; during GRPO the last complete step is
checkpointed, and --resume continues from it (reusing the warmed-up model).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Backend = backend.Open
			return demo.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", o.Out, "output folder")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed for the model, the data and the run")
	f.IntVar(&o.TrainPerGroup, "train-per-group", o.TrainPerGroup, "GRPO training problems per group")
	f.IntVar(&o.ValPerGroup, "val-per-group", o.ValPerGroup, "held-out problems per group")
	f.IntVar(&o.WarmPerGroup, "warmup-per-group", o.WarmPerGroup, "problems per group in the supervised warm-up")
	f.IntVar(&o.WarmEpochs, "warmup-epochs", o.WarmEpochs, "supervised warm-up epochs")
	f.BoolVar(&o.ReuseWarm, "reuse-warmup", false, "reuse OUT/model-warm from an earlier demo with the same seed (skips steps 1 and 3)")
	f.BoolVar(&o.Resume, "resume", false, "continue an interrupted demo: reuse its finished warm-up (same seed and sizes) and resume the GRPO run from its newest checkpoint")
	f.StringArrayVar(&o.Sets, "set", nil, "override a key of configs/demo.yaml (section.key=value)")
	return cmd
}
