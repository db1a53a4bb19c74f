package reward

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// verifierExample is one line of testdata/verifier_examples.jsonl, the
// project's public answer-checker cases (copied from shared/data; labels are
// a careful human grader's verdict on the response's final answer).
type verifierExample struct {
	ID          string `json:"id"`
	GroundTruth string `json:"ground_truth"`
	Response    string `json:"response"`
	Expected    bool   `json:"expected"`
	Why         string `json:"why"`
}

func loadExamples(t testing.TB) []verifierExample {
	t.Helper()
	f, err := os.Open("testdata/verifier_examples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []verifierExample
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		var ex verifierExample
		if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
			t.Fatalf("verifier_examples.jsonl:%d: %v", line, err)
		}
		out = append(out, ex)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSharedExamples requires 100% agreement of the symbolic mode with the
// human labels.
func TestSharedExamples(t *testing.T) {
	s := NewSymbolic(DefaultBudget())
	exs := loadExamples(t)
	if len(exs) != 83 {
		t.Fatalf("got %d examples, want 83", len(exs))
	}
	for _, ex := range exs {
		r := s.Score(ex.Response, ex.GroundTruth)
		if r.Correct != ex.Expected || r.Status == StatusBudget || r.Status == StatusPanic {
			t.Errorf("%s (%s): got correct=%v status=%v pred=%q, want %v; truth %q", ex.ID, ex.Why, r.Correct, r.Status, r.Pred, ex.Expected, ex.GroundTruth)
		}
	}
}

// TestAnswerForms requires 100% agreement on testdata/answer_forms.jsonl:
// our own responses, in the four final-answer styles, for the answer forms
// of issue 18 — equations whose left side is an expression or a tuple of
// names, thousands separators written with LaTeX or Unicode spacing, text
// answers after an article or a short phrase, chained and one-sided
// inequalities for intervals — each class with correct answers and with
// wrong ones in the same form (wrong values, a right value on the left of
// `=`, wrong endpoints or brackets, badly grouped digits, negated words);
// and answers too long to parse (4200 digits), correct when equal to the
// truth and otherwise over budget (StatusBudget), never "no answer".
// The rows are written by hand in testdata/answer_forms.py, which only wraps
// each final answer in a response style (regenerate: python3
// reward/testdata/answer_forms.py); the "why" field says what each row tests.
func TestAnswerForms(t *testing.T) {
	f, err := os.Open("testdata/answer_forms.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := NewSymbolic(DefaultBudget())
	count := map[string][2]int{} // class → (correct rows, wrong rows)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		var ex verifierExample
		if err := json.Unmarshal(sc.Bytes(), &ex); err != nil {
			t.Fatalf("answer_forms.jsonl:%d: %v", line, err)
		}
		class, _, _ := strings.Cut(ex.ID, "-")
		c := count[class]
		if ex.Expected {
			c[0]++
		} else {
			c[1]++
		}
		count[class] = c
		r := s.Score(ex.Response, ex.GroundTruth)
		status := StatusOK
		if class == "long" && !ex.Expected {
			status = StatusBudget
		}
		if r.Correct != ex.Expected || r.Status != status {
			t.Errorf("%s (%s): got correct=%v status=%v pred=%.80q, want %v (%v); truth %.80q", ex.ID, ex.Why, r.Correct, r.Status, r.Pred, ex.Expected, status, ex.GroundTruth)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"equation", "thousands", "article", "interval"} {
		if c := count[class]; c[0] < 5 || c[1] < 5 {
			t.Errorf("class %s: %d correct and %d wrong rows, want at least 5 of each", class, c[0], c[1])
		}
	}
}
