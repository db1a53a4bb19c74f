package main

// gdrotrain verify: score one response, or a JSONL file of them, with any
// verifier mode, and report agreement with expected labels when present.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/spf13/cobra"
)

func init() { register(newVerifyCmd) }

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

// verdict is one scored row, as printed with --json.
type verdict struct {
	ID       string  `json:"id"`
	Mode     string  `json:"mode"`
	Score    float64 `json:"score"`
	Correct  bool    `json:"correct"`
	Pred     string  `json:"pred"`
	Status   string  `json:"status"`
	Expected *bool   `json:"expected,omitempty"`
	Agree    *bool   `json:"agree,omitempty"`
	Error    string  `json:"error,omitempty"`
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
	if o.mode != "reference" {
		if _, err := reward.New(reward.Mode(o.mode)); err != nil {
			return fmt.Errorf("verify: unknown --mode %q: want symbolic, dapo, boxed, gpqa or reference", o.mode)
		}
	}
	out := cmd.OutOrStdout()
	if single {
		mode, err := scoreMode(o, "")
		if err != nil {
			return err
		}
		v, err := score(mode, o.response, o.truth)
		if err != nil {
			return err
		}
		v.ID = "response"
		if o.asJSON {
			return json.NewEncoder(out).Encode(v)
		}
		fmt.Fprintf(out, "mode:      %s\n", v.Mode)
		fmt.Fprintf(out, "extracted: %s\n", display(v.Pred, 200))
		fmt.Fprintf(out, "verdict:   %s (score %s, %s)\n", word(v.Correct), scoreText(v.Score), v.Status)
		if v.Error != "" {
			fmt.Fprintf(out, "note:      %s\n", v.Error)
		}
		return nil
	}
	return verifyFile(cmd, o, out)
}

// jsonlRow is one input line.
type jsonlRow struct {
	ID          json.RawMessage `json:"id"`
	Response    *string         `json:"response"`
	GroundTruth json.RawMessage `json:"ground_truth"`
	Truth       json.RawMessage `json:"truth"`
	Expected    *bool           `json:"expected"`
	DataSource  string          `json:"data_source"`
	Choices     []string        `json:"choices"`
}

func verifyFile(cmd *cobra.Command, o verifyOptions, out io.Writer) error {
	var in io.Reader
	name := o.jsonl
	if name == "-" {
		in, name = cmd.InOrStdin(), "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var (
		m                     reward.Metrics
		labelled, agreed      int
		disagreements         []string
		enc                   = json.NewEncoder(out)
		ctx                   = cmd.Context()
		lineNo, rows, skipped int
	)
	for sc.Scan() {
		lineNo++
		if ctx != nil && ctx.Err() != nil {
			return fmt.Errorf("verify: interrupted at %s:%d: %w", name, lineNo, ctx.Err())
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			skipped++
			continue
		}
		var row jsonlRow
		if err := json.Unmarshal([]byte(text), &row); err != nil {
			return fmt.Errorf("verify: %s:%d: %w", name, lineNo, err)
		}
		if row.Response == nil {
			return fmt.Errorf("verify: %s:%d: missing \"response\"", name, lineNo)
		}
		raw := row.GroundTruth
		if len(raw) == 0 {
			raw = row.Truth
		}
		ds := row.DataSource
		if ds == "" {
			ds = o.dataSource
		}
		mode, err := scoreMode(o, ds)
		if err != nil {
			return fmt.Errorf("verify: %s:%d: %w", name, lineNo, err)
		}
		truth, err := truthText(raw, mode == reward.ModeGPQA || data.MultipleChoice(ds, row.Choices))
		if err != nil {
			return fmt.Errorf("verify: %s:%d: ground_truth: %w", name, lineNo, err)
		}
		v, err := score(mode, *row.Response, truth)
		if err != nil {
			return fmt.Errorf("verify: %s:%d: %w", name, lineNo, err)
		}
		rows++
		v.ID = idText(row.ID, lineNo)
		m.Observe(reward.Result{Correct: v.Correct, Status: statusOf(v.Status)})
		if row.Expected != nil {
			labelled++
			agree := v.Correct == *row.Expected
			v.Expected, v.Agree = row.Expected, &agree
			if agree {
				agreed++
			} else {
				disagreements = append(disagreements, fmt.Sprintf("%s: got %s, expected %s; pred %s; truth %s",
					v.ID, word(v.Correct), word(*row.Expected), display(v.Pred, 80), display(truth, 80)))
			}
		}
		if o.asJSON {
			if err := enc.Encode(v); err != nil {
				return err
			}
			continue
		}
		if o.quiet {
			continue
		}
		agreeText := ""
		if v.Agree != nil {
			agreeText = map[bool]string{true: "agree", false: "DISAGREE"}[*v.Agree]
		}
		fmt.Fprintf(out, "%-26s %-9s %2s  %-9s %-8s %s\n", v.ID, word(v.Correct), scoreText(v.Score), v.Status, agreeText, display(v.Pred, 60))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("verify: reading %s: %w", name, err)
	}
	if o.asJSON {
		return strictErr(o, disagreements)
	}
	s := m.Snapshot()
	if !o.quiet {
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%d responses (%s mode): %d correct, %d incorrect; %d without an answer, %d over budget, %d panics\n",
		rows, o.mode, s.Correct, s.Calls-s.Correct, s.NoAnswer, s.Budget, s.Panics)
	if labelled > 0 {
		fmt.Fprintf(out, "agreement with expected: %d/%d (%.1f%%)\n", agreed, labelled, 100*float64(agreed)/float64(labelled))
		for _, d := range disagreements {
			fmt.Fprintf(out, "  disagrees: %s\n", d)
		}
	}
	return strictErr(o, disagreements)
}

func strictErr(o verifyOptions, disagreements []string) error {
	if o.strict && len(disagreements) > 0 {
		return fmt.Errorf("verify: %d verdicts disagree with expected", len(disagreements))
	}
	return nil
}

// scoreMode resolves --mode for one row: "reference" picks the mode from
// the data_source.
func scoreMode(o verifyOptions, dataSource string) (reward.Mode, error) {
	if o.mode != "reference" {
		return reward.Mode(o.mode), nil
	}
	if dataSource == "" {
		return "", errors.New("--mode reference needs a data_source (on the line or --data-source)")
	}
	return reward.ReferenceMode(dataSource)
}

// score runs the scorer of mode on one pair.
func score(mode reward.Mode, response, truth string) (verdict, error) {
	s, err := reward.New(mode)
	if err != nil {
		return verdict{}, err
	}
	r := s.Score(response, truth)
	v := verdict{Mode: string(mode), Score: r.Score, Correct: r.Correct, Pred: r.Pred, Status: r.Status.String()}
	if r.Err != nil {
		v.Error = firstLine(r.Err.Error())
	}
	return v, nil
}

// truthText reads a line's ground truth as the trainer reads a dataset's:
// decoded with UseNumber, as data.ReadFile decodes JSONL, then
// data.GroundTruth.
func truthText(raw json.RawMessage, multipleChoice bool) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New(`missing "ground_truth"`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	return data.GroundTruth(v, multipleChoice)
}

func idText(raw json.RawMessage, line int) string {
	var s string
	if len(raw) > 0 && json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	if len(raw) > 0 && string(raw) != "null" {
		return string(raw)
	}
	return "line " + strconv.Itoa(line)
}

func statusOf(s string) reward.Status {
	for _, st := range []reward.Status{reward.StatusOK, reward.StatusNoAnswer, reward.StatusBudget, reward.StatusPanic} {
		if st.String() == s {
			return st
		}
	}
	return reward.StatusOK
}

// scoreText prints +1, -1, 1 or 0 as the modes define them.
func scoreText(s float64) string {
	if s > 0 && s == 1 {
		return "+1"
	}
	return strconv.FormatFloat(s, 'g', -1, 64)
}

func word(correct bool) string {
	if correct {
		return "correct"
	}
	return "incorrect"
}

// display quotes a prediction on one line, shortened to n runes. LaTeX
// backslashes are kept as they are; newlines and tabs are escaped.
func display(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		s = string(r[:n]) + "…"
	}
	return `"` + oneLine.Replace(s) + `"`
}

var oneLine = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
