package main

import (
	"bufio"
	"strings"
	"testing"
)

// TestVerifyCLI: the flags reach package verify (its tests cover the
// scoring): one pair, a file on stdin with --quiet, --json, --strict, and
// the flag mistakes the command refuses.
func TestVerifyCLI(t *testing.T) {
	out, err := runCmd(t, "", "verify", "--response", `so the answer is \boxed{\dfrac{5}{4}} miles.`, "--truth", "1.25")
	if err != nil || !strings.Contains(out, "verdict:   correct (score +1, ok)") || !strings.Contains(out, `extracted: "\dfrac{5}{4}"`) {
		t.Errorf("one pair: %v\n%s", err, out)
	}
	rows := `{"id": "a", "response": "Answer: 5", "ground_truth": "5", "expected": true}
{"id": "b", "response": "Answer: 6", "ground_truth": "5", "expected": true}
`
	out, err = runCmd(t, rows, "verify", "--jsonl", "-", "--quiet", "--mode", "dapo")
	if err != nil || !strings.Contains(out, "2 responses (dapo mode): 1 correct, 1 incorrect") || !strings.Contains(out, "agreement with expected: 1/2") ||
		strings.Contains(out, "DISAGREE") {
		t.Errorf("--quiet: %v\n%s", err, out)
	}
	out, err = runCmd(t, rows, "verify", "--jsonl", "-", "--mode", "dapo")
	if err != nil || !strings.Contains(firstLines(out, 2), "DISAGREE") {
		t.Errorf("table: %v\n%s", err, out)
	}
	out, err = runCmd(t, rows, "verify", "--jsonl", "-", "--json", "--mode", "dapo", "--strict")
	if err == nil || !strings.Contains(err.Error(), "1 verdicts disagree") || strings.Count(out, `"id":`) != 2 {
		t.Errorf("--json --strict: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify"}, "nothing to score"},
		{[]string{"verify", "--response", "x"}, "--response and --truth go together"},
		{[]string{"verify", "--response", "x", "--truth", "1", "--jsonl", "-"}, "not both"},
		{[]string{"verify", "--response", "x", "--truth", "1", "--mode", "magic"}, `unknown mode "magic"`},
		{[]string{"verify", "--jsonl", "/nonexistent.jsonl"}, "no such file"},
	} {
		if _, err := runCmd(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
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
