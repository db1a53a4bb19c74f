package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/reward"
)

// TestVerifyTruthLikeTrainer: `verify --jsonl` reads each ground truth as the
// trainer's data loader does (data.GroundTruth), so a row scores the same in
// both: a numeric truth 27.0 is "27", a list its first element, an integer
// an option letter in gpqa mode.
func TestVerifyTruthLikeTrainer(t *testing.T) {
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
		if c.mode == "reference" {
			mode, _ = reward.ReferenceMode(c.source)
		}
		s, err := reward.New(mode)
		if err != nil {
			t.Fatal(err)
		}
		trainer := s.Score(c.resp, ds.Prompts[0].GroundTruth)

		// What verify reports for the same truth.
		line, _ := json.Marshal(map[string]any{"response": c.resp, "ground_truth": json.RawMessage(c.truth), "data_source": c.source})
		out, err := runCmd(t, string(line)+"\n", "verify", "--jsonl", "-", "--json", "--mode", c.mode)
		if err != nil {
			t.Fatalf("%d: verify: %v\n%s", i, err, out)
		}
		var v verdict
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%d: %v in %q", i, err, out)
		}
		if v.Correct != c.correct || trainer.Correct != c.correct {
			t.Errorf("%d: %s truth %s, response %q: verify correct=%v, trainer correct=%v (truth %q), want %v",
				i, c.mode, c.truth, c.resp, v.Correct, trainer.Correct, ds.Prompts[0].GroundTruth, c.correct)
		}
	}
}

// TestVerifyLongAnswer: an answer too long to parse is correct when it equals
// the truth, and otherwise reported with status "budget" and the reason.
func TestVerifyLongAnswer(t *testing.T) {
	digits := strings.Repeat("31415926535", 10_000)
	out, err := runCmd(t, "", "verify", "--response", `\boxed{`+digits+`}`, "--truth", digits)
	if err != nil || !strings.Contains(out, "verdict:   correct (score +1, ok)") {
		t.Errorf("identical long answer: %v\n%.300s", err, out)
	}
	out, err = runCmd(t, "", "verify", "--response", `\boxed{`+digits+`1}`, "--truth", digits)
	if err != nil || !strings.Contains(out, "verdict:   incorrect (score -1, budget)") || !strings.Contains(out, "parse limit") {
		t.Errorf("different long answer: %v\n%.300s", err, out)
	}
	rows := fmt.Sprintf("{\"response\": \"Answer: %s2\", \"ground_truth\": %q}\n", digits, digits)
	out, err = runCmd(t, rows, "verify", "--jsonl", "-", "--quiet")
	if err != nil || !strings.Contains(out, "0 without an answer, 1 over budget") {
		t.Errorf("summary: %v\n%s", err, firstLines(out, 3))
	}
}

func firstLines(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	var out []string
	for len(out) < n && sc.Scan() {
		l := sc.Text()
		if len(l) > 200 {
			l = l[:200] + "…"
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
