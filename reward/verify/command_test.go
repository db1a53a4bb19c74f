package verify

import (
	"bufio"
	"context"
	"strings"
	"testing"
)

// run runs the command with stdin and returns what it printed.
func run(stdin string, c Command) (string, error) {
	var out strings.Builder
	if c.Options.Mode == "" {
		c.Options.Mode = "symbolic"
	}
	c.Stdin, c.Stdout = strings.NewReader(stdin), &out
	err := Run(context.Background(), c)
	return out.String(), err
}

func ptr(s string) *string { return &s }

// TestRun: the command's settings reach the scoring (the other tests
// cover it): one pair, a file on stdin with Quiet, JSON, Strict, and the
// flag mistakes the command refuses.
func TestRun(t *testing.T) {
	out, err := run("", Command{Response: ptr(`so the answer is \boxed{\dfrac{5}{4}} miles.`), Truth: ptr("1.25")})
	if err != nil || !strings.Contains(out, "verdict:   correct (score +1, ok)") || !strings.Contains(out, `extracted: "\dfrac{5}{4}"`) {
		t.Errorf("one pair: %v\n%s", err, out)
	}
	rows := `{"id": "a", "response": "Answer: 5", "ground_truth": "5", "expected": true}
{"id": "b", "response": "Answer: 6", "ground_truth": "5", "expected": true}
`
	dapo := Options{Mode: "dapo"}
	out, err = run(rows, Command{JSONL: "-", Quiet: true, Options: dapo})
	if err != nil || !strings.Contains(out, "2 responses (dapo mode): 1 correct, 1 incorrect") || !strings.Contains(out, "agreement with expected: 1/2") ||
		strings.Contains(out, "DISAGREE") {
		t.Errorf("--quiet: %v\n%s", err, out)
	}
	out, err = run(rows, Command{JSONL: "-", Options: dapo})
	if err != nil || !strings.Contains(firstLines(out, 2), "DISAGREE") {
		t.Errorf("table: %v\n%s", err, out)
	}
	out, err = run(rows, Command{JSONL: "-", JSON: true, Strict: true, Options: dapo})
	if err == nil || !strings.Contains(err.Error(), "1 verdicts disagree") || strings.Count(out, `"id":`) != 2 {
		t.Errorf("--json --strict: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		cmd  Command
		want string
	}{
		{"nothing", Command{}, "nothing to score"},
		{"--response x", Command{Response: ptr("x")}, "--response and --truth go together"},
		{"--response x --truth 1 --jsonl -", Command{Response: ptr("x"), Truth: ptr("1"), JSONL: "-"}, "not both"},
		{"--mode magic", Command{Response: ptr("x"), Truth: ptr("1"), Options: Options{Mode: "magic"}}, `unknown mode "magic"`},
		{"--jsonl /nonexistent.jsonl", Command{JSONL: "/nonexistent.jsonl"}, "no such file"},
	} {
		if _, err := run("", c.cmd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
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
