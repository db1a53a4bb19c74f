package reward

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestNew(t *testing.T) {
	for _, m := range Modes {
		s, err := New(m)
		if err != nil || s.Mode() != m {
			t.Errorf("New(%q) = %v, %v", m, s, err)
		}
	}
	if _, err := New("sympy"); err == nil || !strings.Contains(err.Error(), "symbolic, dapo, boxed, gpqa") {
		t.Errorf("New(sympy): err = %v", err)
	}
	if _, err := ForDataSource("openai/gsm8k"); !errors.Is(err, ErrUnsupportedSource) {
		t.Errorf("ForDataSource(gsm8k): err = %v", err)
	}
}

func TestStatusString(t *testing.T) {
	want := map[Status]string{StatusOK: "ok", StatusNoAnswer: "no-answer", StatusBudget: "budget", StatusPanic: "panic", 9: "status(9)"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("Status(%d).String() = %q, want %q", s, s.String(), w)
		}
	}
}

// TestRewardValues pins each mode's reward values and statuses.
func TestRewardValues(t *testing.T) {
	cases := []struct {
		mode        Mode
		resp, truth string
		score       float64
		correct     bool
		status      Status
	}{
		{ModeSymbolic, "Answer: 4", "4", 1, true, StatusOK},
		{ModeSymbolic, "Answer: 5", "4", -1, false, StatusOK},
		{ModeSymbolic, "no answer here", "4", -1, false, StatusNoAnswer},
		{ModeDAPO, "Answer: 4", "4", 1, true, StatusOK},
		{ModeDAPO, "Answer: 5", "4", -1, false, StatusOK},
		{ModeDAPO, "no answer here", "4", -1, false, StatusNoAnswer},
		{ModeBoxed, `\boxed{4}`, "4", 1, true, StatusOK},
		{ModeBoxed, `\boxed{5}`, "4", 0, false, StatusOK},
		{ModeBoxed, "no answer here", "4", 0, false, StatusNoAnswer},
		{ModeGPQA, `\boxed{A}`, "A", 1, true, StatusOK},
		{ModeGPQA, `\boxed{B}`, "A", 0, false, StatusOK},
		{ModeGPQA, "no answer here", "A", 0, false, StatusNoAnswer},
	}
	for _, c := range cases {
		s, _ := New(c.mode)
		r := s.Score(c.resp, c.truth)
		if r.Score != c.score || r.Correct != c.correct || r.Status != c.status {
			t.Errorf("%s.Score(%q, %q) = %+v, want score %v correct %v status %v", c.mode, c.resp, c.truth, r, c.score, c.correct, c.status)
		}
	}
	s := NewSymbolic(DefaultBudget())
	s.CorrectScore, s.IncorrectScore = 1, 0
	if r := s.Score("Answer: 5", "4"); r.Score != 0 {
		t.Errorf("custom IncorrectScore: got %v", r.Score)
	}
}

// TestConcurrentScoring: scorers are safe for concurrent use (run with
// -race) and give the same verdicts as sequential calls.
func TestConcurrentScoring(t *testing.T) {
	exs := loadExamples(t)
	scorers := []Scorer{NewSymbolic(stepsOnly()), DAPO{}, Boxed{}, GPQA{}}
	want := make([][]Result, len(scorers))
	for i, s := range scorers {
		for _, ex := range exs {
			want[i] = append(want[i], s.Score(ex.Response, ex.GroundTruth))
		}
	}
	var m Metrics
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i, s := range scorers {
				c := Counted{s, &m}
				for j := range exs {
					k := (j + g*11) % len(exs)
					r := c.Score(exs[k].Response, exs[k].GroundTruth)
					if r.Correct != want[i][k].Correct || r.Pred != want[i][k].Pred {
						t.Errorf("goroutine %d %s %s: %+v, sequential %+v", g, s.Mode(), exs[k].ID, r, want[i][k])
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if got := m.Snapshot().Calls; got != int64(8*len(scorers)*len(exs)) {
		t.Errorf("metrics counted %d calls", got)
	}
}

// TestLongAnswer: an answer far over MaxAnswerBytes (a million digits) is
// correct when it equals the truth as a string, in every extraction style,
// and otherwise an explicit over-budget verdict (StatusBudget, counted by
// Metrics, with the reason in Err), never "no answer".
func TestLongAnswer(t *testing.T) {
	digits := strings.Repeat("1234567890", 100_000)
	other := digits[:len(digits)-1] + "1"
	var m Metrics
	s := Counted{NewSymbolic(DefaultBudget()), &m}
	for _, resp := range []string{
		"Work.\n\nAnswer: " + digits,
		`Therefore, the final answer is $\boxed{` + digits + `}$.`,
		"Final Answer: The final answer is $" + digits + "$. I hope it is correct.",
		"Answer: \\boxed{" + digits + "}\n",
	} {
		r := s.Score(resp, digits)
		if !r.Correct || r.Status != StatusOK || r.Pred != digits {
			t.Errorf("identical long answer (%.40q…): got correct=%v status=%v err=%v, len(pred)=%d", resp, r.Correct, r.Status, r.Err, len(r.Pred))
		}
	}
	for _, c := range []struct{ resp, truth string }{
		{`\boxed{` + other + `}`, digits},
		{"Answer: " + other, digits},
		{"Answer: 42", digits},
		{"Answer: " + digits, "42"},
	} {
		r := s.Score(c.resp, c.truth)
		if r.Correct || r.Status != StatusBudget || r.Err == nil || !strings.Contains(r.Err.Error(), "parse limit") {
			t.Errorf("different long answer (%.40q… vs %.20q…): got correct=%v status=%v err=%v", c.resp, c.truth, r.Correct, r.Status, r.Err)
		}
	}
	if snap := m.Snapshot(); snap.Calls != 8 || snap.Correct != 4 || snap.Budget != 4 || snap.NoAnswer != 0 {
		t.Errorf("metrics: %+v", snap)
	}
	// Just over the limit is over budget too, not silently incorrect.
	long := strings.Repeat("x+", 2100) + "1"
	if r := s.Score("Answer: "+long, "1"); r.Status != StatusBudget {
		t.Errorf("4201-byte answer: got status %v", r.Status)
	}
}
