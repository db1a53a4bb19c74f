package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/reward"
)

// TestTruthLikeTrainer: a file's ground truths are read as the trainer's
// data loader reads them (data.GroundTruth), so a row scores the same in
// both: a numeric truth 27.0 is "27", a list its first element, an integer
// an option letter in gpqa mode.
func TestTruthLikeTrainer(t *testing.T) {
	cases := []struct {
		mode, source, truth, resp string
		correct                   bool
	}{
		{"dapo", "math_dapo", `27.0`, "Answer: 27", true},
		{"dapo", "math_dapo", `27.0`, "Answer: 27.0", false}, // the trainer's truth is "27"
		{"dapo", "math_dapo", `["27", "28"]`, "Answer: 27", true},
		{"dapo", "math_dapo", `["27", "28"]`, "Answer: 28", false},
		{"symbolic", "math_dapo", `[27.0]`, `\boxed{27}`, true},
		{"symbolic", "math_dapo", `"1\\,000"`, "Answer: 1000", true},
		{"gpqa", "Idavidrein/gpqa", `2`, `\boxed{C}`, true},
		{"gpqa", "Idavidrein/gpqa", `2`, `\boxed{B}`, false},
		{"reference", "Idavidrein/gpqa", `2`, `\boxed{C}`, true},
		{"boxed", "HuggingFaceH4/MATH-500", `"\\frac{1}{2}"`, `\boxed{\frac12}`, true},
	}
	dir := t.TempDir()
	for i, c := range cases {
		// What the trainer scores: the loader's ground truth of a verl row.
		row := fmt.Sprintf(`{"data_source": %q, "prompt": "Q", "reward_model": {"ground_truth": %s}, "extra_info": {"index": %d}}`,
			c.source, c.truth, i)
		path := filepath.Join(dir, fmt.Sprintf("row%d.jsonl", i))
		if err := os.WriteFile(path, []byte(row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		ds, err := data.ReadFile(path, data.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mode := reward.Mode(c.mode)
		if c.mode == ModeReference {
			mode, _ = reward.ReferenceMode(c.source)
		}
		s, err := reward.New(mode)
		if err != nil {
			t.Fatal(err)
		}
		trainer := s.Score(c.resp, ds.Prompts[0].GroundTruth)

		// What verify reports for the same truth.
		line, _ := json.Marshal(map[string]any{"response": c.resp, "ground_truth": json.RawMessage(c.truth), "data_source": c.source})
		var got []Verdict
		if _, err := File(context.Background(), strings.NewReader(string(line)+"\n"), "stdin", Options{Mode: c.mode},
			func(v Verdict) error { got = append(got, v); return nil }); err != nil || len(got) != 1 {
			t.Fatalf("%d: %v, %d verdicts", i, err, len(got))
		}
		if got[0].Correct != c.correct || trainer.Correct != c.correct {
			t.Errorf("%d: %s truth %s, response %q: verify correct=%v, trainer correct=%v (truth %q), want %v",
				i, c.mode, c.truth, c.resp, got[0].Correct, trainer.Correct, ds.Prompts[0].GroundTruth, c.correct)
		}
	}
}

// TestFileTally: the shipped examples agree with their labels in symbolic
// mode (the README's figure), and the tally counts what it says.
func TestFileTally(t *testing.T) {
	f, err := os.Open("../testdata/verifier_examples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	s, err := File(context.Background(), f, "examples", Options{Mode: "symbolic"}, func(v Verdict) error {
		lines = append(lines, v.Line())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 83 || s.Labelled != 83 || s.Agreed != 83 || len(s.Disagreements) != 0 || len(lines) != 83 {
		t.Fatalf("summary %+v, %d lines", s, len(lines))
	}
	if s.Counts.Calls != 83 || s.Counts.Correct != 43 || s.Counts.NoAnswer != 2 {
		t.Errorf("counts %+v, want 83 calls, 43 correct, 2 without an answer", s.Counts)
	}
	text := s.Text("symbolic")
	for _, want := range []string{"83 responses (symbolic mode): 43 correct, 40 incorrect; 2 without an answer", "agreement with expected: 83/83 (100.0%)"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary text lacks %q:\n%s", want, text)
		}
	}
}

// TestDisagreementsAndErrors: disagreements are listed with the prediction
// and the truth; a bad line stops the file naming its line; blank lines are
// skipped; ids come from "id" or the line number.
func TestDisagreementsAndErrors(t *testing.T) {
	in := `{"id": "a", "response": "Answer: 5", "ground_truth": "5", "expected": false}

{"response": "Answer: 6", "truth": 6, "expected": false}
{"id": 7, "response": "no answer", "ground_truth": "1"}
`
	var vs []Verdict
	s, err := File(context.Background(), strings.NewReader(in), "f.jsonl", Options{Mode: "dapo"}, func(v Verdict) error {
		vs = append(vs, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows != 3 || s.Skipped != 1 || s.Labelled != 2 || s.Agreed != 0 || len(s.Disagreements) != 2 {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(s.Disagreements[0], `a: got correct, expected incorrect; pred "5"; truth "5"`) {
		t.Errorf("disagreement: %s", s.Disagreements[0])
	}
	if vs[1].ID != "line 3" || vs[2].ID != "7" || vs[2].Status != "no-answer" || vs[2].Pred != "[INVALID]" {
		t.Errorf("verdicts %+v", vs)
	}
	if !strings.Contains(vs[0].Line(), "DISAGREE") {
		t.Errorf("line %q", vs[0].Line())
	}
	for _, c := range []struct{ in, want string }{
		{`{"ground_truth": "1"}`, `f.jsonl:1: missing "response"`},
		{`{"response": "x"}`, `f.jsonl:1: ground_truth: missing "ground_truth"`},
		{`{"response": "x", "ground_truth": "1"` + "\n", "f.jsonl:1: unexpected end"},
		{`{"response": "x", "ground_truth": "1"}` + "\n" + `[1]`, "f.jsonl:2: json: cannot unmarshal array"},
	} {
		if _, err := File(context.Background(), strings.NewReader(c.in), "f.jsonl", Options{Mode: "dapo"}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.in, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := File(ctx, strings.NewReader(in), "f.jsonl", Options{Mode: "dapo"}, nil); err == nil || !strings.Contains(err.Error(), "interrupted at f.jsonl:1") {
		t.Errorf("cancelled: %v", err)
	}
}

// TestReferenceMode: reference mode takes each row's data_source, else
// Options.DataSource, and refuses a row with neither.
func TestReferenceMode(t *testing.T) {
	o := Options{Mode: ModeReference}
	if _, err := One(o, "Answer: 5", "5"); err == nil || !strings.Contains(err.Error(), "needs a data_source") {
		t.Errorf("no data_source: %v", err)
	}
	o.DataSource = "HuggingFaceH4/MATH-500"
	v, err := One(o, `\boxed{5}`, "5")
	if err != nil || v.Mode != "boxed" || !v.Correct || v.Score != 1 {
		t.Errorf("MATH-500: %+v, %v", v, err)
	}
	in := `{"response": "Answer: 5", "ground_truth": "5", "data_source": "math_dapo"}` + "\n"
	var got Verdict
	if _, err := File(context.Background(), strings.NewReader(in), "x", o, func(v Verdict) error { got = v; return nil }); err != nil || got.Mode != "dapo" {
		t.Errorf("row's own data_source: %+v, %v", got, err)
	}
	if err := (Options{Mode: "magic"}).Check(); err == nil {
		t.Error("unknown mode accepted")
	}
	for _, m := range []string{"symbolic", "dapo", "boxed", "gpqa", "reference"} {
		if err := (Options{Mode: m}).Check(); err != nil {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// TestLongAnswer: an answer too long to parse is correct when it equals the
// truth, and otherwise reported with status "budget" and the reason.
func TestLongAnswer(t *testing.T) {
	digits := strings.Repeat("31415926535", 10_000)
	v, err := One(Options{Mode: "symbolic"}, `\boxed{`+digits+`}`, digits)
	if err != nil || !strings.Contains(v.Text(), "verdict:   correct (score +1, ok)") {
		t.Errorf("identical long answer: %v\n%.300s", err, v.Text())
	}
	v, err = One(Options{Mode: "symbolic"}, `\boxed{`+digits+`1}`, digits)
	if err != nil || !strings.Contains(v.Text(), "verdict:   incorrect (score -1, budget)") || !strings.Contains(v.Text(), "parse limit") {
		t.Errorf("different long answer: %v\n%.300s", err, v.Text())
	}
	rows := fmt.Sprintf("{\"response\": \"Answer: %s2\", \"ground_truth\": %q}\n", digits, digits)
	s, err := File(context.Background(), strings.NewReader(rows), "x", Options{Mode: "symbolic"}, nil)
	if err != nil || !strings.Contains(s.Text("symbolic"), "0 without an answer, 1 over budget") {
		t.Errorf("summary: %v\n%s", err, s.Text("symbolic"))
	}
}

func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{{1, "+1"}, {-1, "-1"}, {0, "0"}, {0.5, "0.5"}} {
		if got := ScoreText(c.s); got != c.want {
			t.Errorf("ScoreText(%v) = %q, want %q", c.s, got, c.want)
		}
	}
	if got := Quote("a\nb\t\\frac12", 100); got != `"a\nb\t\frac12"` {
		t.Errorf("Quote: %s", got)
	}
	if got := Quote("αβγδ", 2); got != `"αβ…"` {
		t.Errorf("Quote shortened: %s", got)
	}
}
