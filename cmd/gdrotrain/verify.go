package main

// gdrotrain verify: score one response, or a JSONL file of them, with any
// verifier mode, and report agreement with expected labels when present
// (package reward/verify: the scoring, the tally and the command, Run).

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/reward/verify"
)

func newVerifyCmd() *cobra.Command {
	var c verify.Command
	var response, truth string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Score responses against ground truths with the math verifier",
		Long: `verify scores a model response against a ground-truth answer.

Modes: symbolic (parses and compares values; the default), dapo (verl's
math_dapo: last "Answer:" line in the final 300 characters, ±1), boxed
(Hendrycks MATH: last \boxed{}, 1/0), gpqa (multiple-choice letter, 1/0), and
reference (dapo, boxed or gpqa chosen from the data_source, as the reference
implementation dispatches).

With --jsonl, each line is {"response": …, "ground_truth": …} with optional
"expected" (bool), "id", "data_source" and "choices"; verify prints one
verdict per line and the agreement with "expected". The ground truth is read
as the trainer reads a dataset's (data.GroundTruth): a number loses a
trailing ".0", a list gives its first element, and an integer 0–3 is an
option letter in multiple-choice rows and in gpqa mode.

Status "budget" means the verifier's work budget ran out, or that the answer
or the truth is too long to parse and not equal to the other as a string;
the note says which.`,
		Example: `  gdrotrain verify --response 'so the answer is \boxed{0.5}' --truth '\frac12'
  gdrotrain verify --mode dapo --response 'Answer: 1,000' --truth 1000
  gdrotrain verify --jsonl examples.jsonl --quiet`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.Response, c.Truth = nil, nil
			if cmd.Flags().Changed("response") {
				c.Response = &response
			}
			if cmd.Flags().Changed("truth") {
				c.Truth = &truth
			}
			c.Stdin, c.Stdout = cmd.InOrStdin(), cmd.OutOrStdout()
			return verify.Run(cmd.Context(), c)
		},
	}
	f := cmd.Flags()
	f.StringVar(&response, "response", "", "one response to score (with --truth)")
	f.StringVar(&truth, "truth", "", "the ground truth for --response")
	f.StringVar(&c.JSONL, "jsonl", "", "score every line of this JSONL file (- for stdin)")
	f.StringVar(&c.Options.Mode, "mode", string(reward.ModeSymbolic), "scorer: symbolic, dapo, boxed, gpqa or reference")
	f.StringVar(&c.Options.DataSource, "data-source", "", "data_source for --mode reference (a line's own data_source wins)")
	f.BoolVar(&c.JSON, "json", false, "print one JSON object per verdict")
	f.BoolVar(&c.Quiet, "quiet", false, "with --jsonl, print only the summary and the disagreements")
	f.BoolVar(&c.Strict, "strict", false, "exit with an error when a verdict disagrees with expected")
	return cmd
}
