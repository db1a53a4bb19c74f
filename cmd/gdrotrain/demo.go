package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/tools/demo"
)

func newDemoCmd() *cobra.Command {
	o := demo.Default()
	var rlPerGroup, heldoutPerGroup, warmPerGroup, warmEpochs int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the tiny CPU demo: build a model and tokenizer, warm up, train with GRPO + Prompt-GDRO",
		Long: `demo runs the whole pipeline on the CPU with nothing to download:
  1. writes a small Qwen3-style tokenizer and a random tiny Qwen3 model in the
     Hugging Face layout, and loads them back through the normal loaders;
  2. generates a synthetic arithmetic task (six groups from n×10 to
     2-digit × 1-digit multiplication) with disjoint warm-up, GRPO and
     held-out sets;
  3. warms the model up with a short supervised phase on the warm-up set;
  4. runs GRPO with Prompt-GDRO on the GRPO set and reports held-out
     accuracy per group before and after, with paired standard errors,
     leaving a run folder with metrics.jsonl, validation.jsonl, the config
     and the trained weights.
Every hyperparameter is in configs/demo.yaml (its demo: section sizes the
model, the task and the warm-up); --set overrides any key, demo.* included.
Without --resume the GRPO run folder is started afresh (an earlier demo run
there is replaced). A signal (SIGINT, SIGTERM, SIGUSR1, SIGHUP) exits with status 3:
during the warm-up nothing is kept; during GRPO the last complete step is
checkpointed, and --resume continues from it (reusing the warmed-up model).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// the size flags are shortcuts for --set demo.…, applied before the --set list
			var sets []string
			for _, f := range []struct {
				flag, key string
				v         int
			}{
				{"train-per-group", "task.rl_per_group", rlPerGroup},
				{"val-per-group", "task.heldout_per_group", heldoutPerGroup},
				{"warmup-per-group", "task.warmup_per_group", warmPerGroup},
				{"warmup-epochs", "warmup.epochs", warmEpochs},
			} {
				if cmd.Flags().Changed(f.flag) {
					sets = append(sets, fmt.Sprintf("demo.%s=%d", f.key, f.v))
				}
			}
			o.Sets = append(sets, o.Sets...)
			o.Backend = backend.Open
			return demo.Run(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", o.Out, "output folder")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed for the model, the data and the run")
	f.IntVar(&rlPerGroup, "train-per-group", 0, "GRPO training problems per group (--set demo.task.rl_per_group; default from configs/demo.yaml)")
	f.IntVar(&heldoutPerGroup, "val-per-group", 0, "held-out problems per group (--set demo.task.heldout_per_group)")
	f.IntVar(&warmPerGroup, "warmup-per-group", 0, "problems per group in the supervised warm-up (--set demo.task.warmup_per_group)")
	f.IntVar(&warmEpochs, "warmup-epochs", 0, "supervised warm-up epochs (--set demo.warmup.epochs)")
	f.BoolVar(&o.ReuseWarm, "reuse-warmup", false, "reuse OUT/model-warm from an earlier demo with the same seed (skips steps 1 and 3)")
	f.BoolVar(&o.Resume, "resume", false, "continue an interrupted demo: reuse its finished warm-up (same seed and settings) and resume the GRPO run from its newest checkpoint")
	f.StringArrayVar(&o.Sets, "set", nil, "override a key of configs/demo.yaml (section.key=value, e.g. optim.lr=1e-3 or demo.warmup.epochs=8)")
	return cmd
}
