package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/inspect"
	"github.com/gdrotrain/gdrotrain/trainer"
)

func newDataCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:          "data",
		Short:        "Dataset tools",
		SilenceUsage: true,
	}
	cmd.AddCommand(newDataInspectCmd())
	return cmd
}

func newDataInspectCmd() *cobra.Command {
	var o inspect.DataOptions
	cmd := &cobra.Command{
		Use:   "inspect FILE...",
		Short: "Show a dataset's schema, row count, prompt lengths in tokens and a rendered prompt",
		Long: `inspect reads Parquet or JSONL datasets (verl rows or {problem, answer} rows),
checks every row and the prompt UIDs, renders every prompt as the trainer will
(chat template with an open assistant turn, or raw) and prints the schema, the
row count, a histogram of prompt lengths in tokens and one rendered prompt.
Several files are inspected as one concatenated dataset (a validation set).`,
		Example: `  gdrotrain data inspect data/testdata/dapo_math_sample.jsonl
  gdrotrain data inspect --tokenizer /models/Qwen3-1.7B-Base --max-prompt-length 3200 train.parquet`,
		Args:         cobra.MinimumNArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Files, o.Stdout, o.Stderr = args, cmd.OutOrStdout(), cmd.ErrOrStderr()
			return inspect.Data(o)
		},
	}
	f := cmd.Flags()
	defaults := trainer.Default() // the training defaults, so inspect sees what train would
	f.StringVar(&o.Tokenizer, "tokenizer", "", "folder with tokenizer.json and tokenizer_config.json (default "+inspect.DefaultTokenizerDir+" when present)")
	f.StringVar(&o.Template, "template", defaults.Data.Template, "prompt template for {problem, answer} rows: auto, none, dapo, math or gpqa")
	f.StringVar(&o.Mode, "mode", defaults.Model.Prompt, "prompt rendering: chat (chat template + open assistant turn) or raw")
	f.BoolVar(&o.SkipBadRows, "skip-bad-rows", false, "skip malformed rows (counted) instead of failing on the first")
	f.IntVar(&o.MaxPromptLength, "max-prompt-length", defaults.Data.MaxPromptLength, "report prompts longer than this many tokens (0: no limit)")
	f.IntVar(&o.Sample, "sample", 0, "index of the prompt to print rendered")
	return cmd
}
