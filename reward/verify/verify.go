// Package verify scores responses against ground truths outside training,
// as `gdrotrain verify` does: one pair, or a JSONL file of rows
// {"response", "ground_truth", "expected"?, "id"?, "data_source"?,
// "choices"?}, with any verifier mode, and tallies the agreement with the
// expected labels. Ground truths are read exactly as the trainer reads a
// dataset's (data.GroundTruth), so a row scores here as it would in
// training.
package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/reward"
)

// ModeReference picks dapo, boxed or gpqa from each row's data_source, as
// the reference implementation dispatches (reward.ReferenceMode).
const ModeReference = "reference"

// Options select the scorer.
type Options struct {
	// Mode is a reward.Mode (symbolic, dapo, boxed, gpqa) or ModeReference.
	Mode string
	// DataSource is the data_source of rows that name none (ModeReference).
	DataSource string
}

// Check refuses an unknown mode.
func (o Options) Check() error {
	if o.Mode == ModeReference {
		return nil
	}
	if _, err := reward.New(reward.Mode(o.Mode)); err != nil {
		return fmt.Errorf("unknown mode %q: want symbolic, dapo, boxed, gpqa or reference", o.Mode)
	}
	return nil
}

// modeFor resolves the mode of one row: reference mode picks it from the
// data_source.
func (o Options) modeFor(dataSource string) (reward.Mode, error) {
	if o.Mode != ModeReference {
		return reward.Mode(o.Mode), nil
	}
	if dataSource == "" {
		return "", errors.New("--mode reference needs a data_source (on the line or --data-source)")
	}
	return reward.ReferenceMode(dataSource)
}

// Verdict is one scored row (one JSON object per line with --json).
type Verdict struct {
	ID       string  `json:"id"`
	Mode     string  `json:"mode"`
	Score    float64 `json:"score"`
	Correct  bool    `json:"correct"`
	Pred     string  `json:"pred"`
	Status   string  `json:"status"`
	Expected *bool   `json:"expected,omitempty"`
	Agree    *bool   `json:"agree,omitempty"`
	Error    string  `json:"error,omitempty"`

	truth  string
	status reward.Status
}

// One scores a single response against a ground truth given as text.
func One(o Options, response, truth string) (Verdict, error) {
	mode, err := o.modeFor(o.DataSource)
	if err != nil {
		return Verdict{}, err
	}
	v, err := score(mode, response, truth)
	v.ID = "response"
	return v, err
}

// score runs the scorer of mode on one pair.
func score(mode reward.Mode, response, truth string) (Verdict, error) {
	s, err := reward.New(mode)
	if err != nil {
		return Verdict{}, err
	}
	r := s.Score(response, truth)
	v := Verdict{Mode: string(mode), Score: r.Score, Correct: r.Correct, Pred: r.Pred, Status: r.Status.String(),
		truth: truth, status: r.Status}
	if r.Err != nil {
		v.Error = firstLine(r.Err.Error())
	}
	return v, nil
}

// Summary tallies a file.
type Summary struct {
	Rows    int                    // rows scored
	Skipped int                    // blank lines
	Counts  reward.MetricsSnapshot // correct, no-answer, over-budget and panic counts
	// Labelled rows carry "expected"; Agreed of them got the expected verdict.
	Labelled, Agreed int
	// Disagreements describe each labelled row whose verdict differs.
	Disagreements []string
}

// row is one input line.
type row struct {
	ID          json.RawMessage `json:"id"`
	Response    *string         `json:"response"`
	GroundTruth json.RawMessage `json:"ground_truth"`
	Truth       json.RawMessage `json:"truth"`
	Expected    *bool           `json:"expected"`
	DataSource  string          `json:"data_source"`
	Choices     []string        `json:"choices"`
}

// File scores every line of a JSONL stream (name labels errors), calling
// emit with each verdict in order, and returns the tally. A malformed line
// stops it with an error naming name:line; so does a cancelled ctx.
func File(ctx context.Context, r io.Reader, name string, o Options, emit func(Verdict) error) (Summary, error) {
	var (
		s  Summary
		m  reward.Metrics
		sc = bufio.NewScanner(r)
	)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for lineNo := 1; sc.Scan(); lineNo++ {
		if ctx != nil && ctx.Err() != nil {
			return s, fmt.Errorf("interrupted at %s:%d: %w", name, lineNo, ctx.Err())
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			s.Skipped++
			continue
		}
		v, err := scoreLine(text, o, lineNo)
		if err != nil {
			return s, fmt.Errorf("%s:%d: %w", name, lineNo, err)
		}
		s.Rows++
		m.Observe(reward.Result{Correct: v.Correct, Status: v.status})
		if v.Expected != nil {
			s.Labelled++
			if *v.Agree {
				s.Agreed++
			} else {
				s.Disagreements = append(s.Disagreements, fmt.Sprintf("%s: got %s, expected %s; pred %s; truth %s",
					v.ID, word(v.Correct), word(*v.Expected), Quote(v.Pred, 80), Quote(v.truth, 80)))
			}
		}
		if emit != nil {
			if err := emit(v); err != nil {
				return s, err
			}
		}
	}
	s.Counts = m.Snapshot()
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading %s: %w", name, err)
	}
	return s, nil
}

// scoreLine decodes and scores one JSONL line.
func scoreLine(text string, o Options, lineNo int) (Verdict, error) {
	var r row
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return Verdict{}, err
	}
	if r.Response == nil {
		return Verdict{}, errors.New(`missing "response"`)
	}
	raw := r.GroundTruth
	if len(raw) == 0 {
		raw = r.Truth
	}
	ds := r.DataSource
	if ds == "" {
		ds = o.DataSource
	}
	mode, err := o.modeFor(ds)
	if err != nil {
		return Verdict{}, err
	}
	truth, err := TruthText(raw, mode == reward.ModeGPQA || data.MultipleChoice(ds, r.Choices))
	if err != nil {
		return Verdict{}, fmt.Errorf("ground_truth: %w", err)
	}
	v, err := score(mode, *r.Response, truth)
	if err != nil {
		return Verdict{}, err
	}
	v.ID = idText(r.ID, lineNo)
	if r.Expected != nil {
		agree := v.Correct == *r.Expected
		v.Expected, v.Agree = r.Expected, &agree
	}
	return v, nil
}

// TruthText reads a JSON ground truth as the trainer reads a dataset's:
// decoded with UseNumber, as data.ReadFile decodes JSONL, then
// data.GroundTruth (a number loses a trailing ".0", a list gives its first
// element, an integer 0–3 is an option letter when multipleChoice).
func TruthText(raw json.RawMessage, multipleChoice bool) (string, error) {
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

// idText is a row's id: its "id" (a string, or any JSON value as written),
// else "line N".
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

// Text is the verdict of a single pair, as `verify --response` prints it.
func (v Verdict) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode:      %s\n", v.Mode)
	fmt.Fprintf(&b, "extracted: %s\n", Quote(v.Pred, 200))
	fmt.Fprintf(&b, "verdict:   %s (score %s, %s)\n", word(v.Correct), ScoreText(v.Score), v.Status)
	if v.Error != "" {
		fmt.Fprintf(&b, "note:      %s\n", v.Error)
	}
	return b.String()
}

// Line is one row of a file's table.
func (v Verdict) Line() string {
	agree := ""
	if v.Agree != nil {
		agree = map[bool]string{true: "agree", false: "DISAGREE"}[*v.Agree]
	}
	return fmt.Sprintf("%-26s %-9s %2s  %-9s %-8s %s", v.ID, word(v.Correct), ScoreText(v.Score), v.Status, agree, Quote(v.Pred, 60))
}

// Text is the summary of a file scored in mode.
func (s Summary) Text(mode string) string {
	var b strings.Builder
	c := s.Counts
	fmt.Fprintf(&b, "%d responses (%s mode): %d correct, %d incorrect; %d without an answer, %d over budget, %d panics\n",
		s.Rows, mode, c.Correct, c.Calls-c.Correct, c.NoAnswer, c.Budget, c.Panics)
	if s.Labelled > 0 {
		fmt.Fprintf(&b, "agreement with expected: %d/%d (%.1f%%)\n", s.Agreed, s.Labelled, 100*float64(s.Agreed)/float64(s.Labelled))
		for _, d := range s.Disagreements {
			fmt.Fprintf(&b, "  disagrees: %s\n", d)
		}
	}
	return b.String()
}

// ScoreText prints +1, -1, 1 or 0 as the modes define them.
func ScoreText(s float64) string {
	if s == 1 {
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

// Quote quotes s on one line, shortened to n runes. LaTeX backslashes are
// kept as they are; newlines and tabs are escaped.
func Quote(s string, n int) string {
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
