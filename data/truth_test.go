package data

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/reward"
)

func TestGroundTruth(t *testing.T) {
	tests := []struct {
		in   any
		mc   bool
		want string
	}{
		{json.Number("27.0"), false, "27"}, {json.Number("-1"), false, "-1"}, {json.Number("0.5"), false, "0.5"},
		{json.Number("1e3"), false, "1000"}, {float64(27), false, "27"}, {2.5, false, "2.5"}, {int64(3), false, "3"},
		{[]any{"a", "b"}, false, "a"}, {[]any{json.Number("27.0")}, false, "27"}, {"025", false, "025"},
		{true, false, "true"},
		// an integer option index, as gpqa_mc.py reads an int truth
		{json.Number("2"), true, "C"}, {int64(0), true, "A"}, {[]any{json.Number("3")}, true, "D"},
		{json.Number("2"), false, "2"}, {"2", true, "2"}, {json.Number("2.0"), true, "2"}, {json.Number("4"), true, "4"},
		{"C", true, "C"},
	}
	for _, tc := range tests {
		got, err := GroundTruth(tc.in, tc.mc)
		if err != nil || got != tc.want {
			t.Errorf("GroundTruth(%#v, %v) = %q, %v; want %q", tc.in, tc.mc, got, err, tc.want)
		}
	}
	for _, bad := range []any{nil, []any{}, []any{nil}, map[string]any{"a": 1}} {
		if got, err := GroundTruth(bad, false); err == nil {
			t.Errorf("GroundTruth(%#v) = %q, want an error", bad, got)
		}
	}
	if _, err := GroundTruth(nil, false); !errors.Is(err, ErrNoGroundTruth) {
		t.Errorf("GroundTruth(nil): err = %v, want ErrNoGroundTruth", err)
	}
}

// TestGroundTruthRows: the loader applies GroundTruth to both row kinds, with
// an integer read as an option index only in multiple-choice rows.
func TestGroundTruthRows(t *testing.T) {
	rows := strings.Join([]string{
		`{"data_source": "Idavidrein/gpqa", "prompt": "Q0", "reward_model": {"ground_truth": 2}, "extra_info": {"index": 0}}`,
		`{"data_source": "math_dapo", "prompt": "Q1", "reward_model": {"ground_truth": 2}, "extra_info": {"index": 1}}`,
		`{"data_source": "math_dapo", "prompt": "Q2", "reward_model": {"ground_truth": [27.0, 28]}, "extra_info": {"index": 2}}`,
	}, "\n")
	ds, err := ReadFile(writeFile(t, "verl.jsonl", rows), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"C", "2", "27"} {
		if got := ds.Prompts[i].GroundTruth; got != want {
			t.Errorf("verl row %d: ground truth %q, want %q", i, got, want)
		}
	}
	simple := strings.Join([]string{
		`{"id": "s0", "problem": "Which?", "choices": ["w", "r", "w2", "w3"], "answer": 1}`,
		`{"id": "s1", "problem": "How many?", "answer": 27.0}`,
	}, "\n")
	ds, err = ReadFile(writeFile(t, "simple.jsonl", simple), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"B", "27"} {
		if got := ds.Prompts[i].GroundTruth; got != want {
			t.Errorf("simple row %d: ground truth %q, want %q", i, got, want)
		}
	}
}

// TestMultipleChoiceAgreesWithReward: data names the GPQA data_source and
// the option letters itself (it does not import reward); both must be
// reward's: MultipleChoice holds for exactly the sources reward scores
// with the GPQA letter scorer, and an option index becomes reward's letter.
func TestMultipleChoiceAgreesWithReward(t *testing.T) {
	for _, ds := range []string{GPQASource, "math-ai/gpqa", "gpqa_diamond", "lighteval/MATH", "math_dapo",
		"HuggingFaceH4/aime_2024", "aime2025", "openai/gsm8k", "unknown", ""} {
		m, err := reward.ReferenceMode(ds)
		if want := err == nil && m == reward.ModeGPQA; MultipleChoice(ds, nil) != want {
			t.Errorf("MultipleChoice(%q) = %v; reward's mode %q (%v)", ds, !want, m, err)
		}
	}
	for i := -1; i <= 5; i++ {
		want, ok := reward.GPQATruth(i)
		if !ok {
			want = strconv.Itoa(i)
		}
		if got, err := GroundTruth(json.Number(strconv.Itoa(i)), true); err != nil || got != want {
			t.Errorf("option index %d: %q, %v; want %q", i, got, err, want)
		}
	}
}
