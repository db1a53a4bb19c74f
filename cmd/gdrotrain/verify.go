package main

// gdrotrain verify: score one response, or a JSONL file of them, with any
// verifier mode, and report agreement with expected labels when present
// (the scoring and the tally are package reward/verify's).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/reward/verify"
)

type verifyOptions struct {
	response, truth, jsonl string
	mode, dataSource       string
	asJSON, quiet, strict  bool
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
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
			return runVerify(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.response, "response", "", "one response to score (with --truth)")
	f.StringVar(&o.truth, "truth", "", "the ground truth for --response")
	f.StringVar(&o.jsonl, "jsonl", "", "score every line of this JSONL file (- for stdin)")
	f.StringVar(&o.mode, "mode", string(reward.ModeSymbolic), "scorer: symbolic, dapo, boxed, gpqa or reference")
	f.StringVar(&o.dataSource, "data-source", "", "data_source for --mode reference (a line's own data_source wins)")
	f.BoolVar(&o.asJSON, "json", false, "print one JSON object per verdict")
	f.BoolVar(&o.quiet, "quiet", false, "with --jsonl, print only the summary and the disagreements")
	f.BoolVar(&o.strict, "strict", false, "exit with an error when a verdict disagrees with expected")
	return cmd
}

func runVerify(cmd *cobra.Command, o verifyOptions) error {
	single := cmd.Flags().Changed("response") || cmd.Flags().Changed("truth")
	switch {
	case single && o.jsonl != "":
		return errors.New("verify: give either --response/--truth or --jsonl, not both")
	case !single && o.jsonl == "":
		return errors.New("verify: nothing to score: give --response and --truth, or --jsonl FILE")
	case single && (!cmd.Flags().Changed("response") || !cmd.Flags().Changed("truth")):
		return errors.New("verify: --response and --truth go together")
	}
	vo := verify.Options{Mode: o.mode, DataSource: o.dataSource}
	if err := vo.Check(); err != nil {
		return fmt.Errorf("verify: --mode: %w", err)
	}
	out := cmd.OutOrStdout()
	if single {
		v, err := verify.One(vo, o.response, o.truth)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		if o.asJSON {
			return json.NewEncoder(out).Encode(v)
		}
		_, err = io.WriteString(out, v.Text())
		return err
	}
	in, name := cmd.InOrStdin(), "stdin"
	if o.jsonl != "-" {
		f, err := os.Open(o.jsonl)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		defer f.Close()
		in, name = f, o.jsonl
	}
	enc := json.NewEncoder(out)
	s, err := verify.File(cmd.Context(), in, name, vo, func(v verify.Verdict) error {
		switch {
		case o.asJSON:
			return enc.Encode(v)
		case !o.quiet:
			_, err := fmt.Fprintln(out, v.Line())
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !o.asJSON {
		if !o.quiet {
			fmt.Fprintln(out)
		}
		fmt.Fprint(out, s.Text(o.mode))
	}
	if o.strict && len(s.Disagreements) > 0 {
		return fmt.Errorf("verify: %d verdicts disagree with expected", len(s.Disagreements))
	}
	return nil
}
