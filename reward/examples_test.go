package reward

import (
	"bufio"
	"encoding/json"
	"os"
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
