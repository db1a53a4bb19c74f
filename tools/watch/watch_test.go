package watch

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestFollowerResets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	f := &follower{path: path}
	if lines, reset, err := f.poll(); len(lines) != 0 || reset || err != nil {
		t.Fatalf("missing file: %v %v %v", lines, reset, err)
	}
	os.WriteFile(path, []byte(`{"step":1}`+"\n"+`{"step":2}`+"\n"+`{"step":`), 0o644)
	lines, _, _ := f.poll()
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (the third is not ended)", len(lines))
	}
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString("3}\n")
	fh.Close()
	if lines, reset, _ := f.poll(); len(lines) != 1 || lines[0]["step"] != 3.0 || reset {
		t.Fatalf("after the line ended: %v reset %v", lines, reset)
	}
	// Rewritten and renamed into place, shorter (a resume).
	os.WriteFile(path+".tmp", []byte(`{"step":1}`+"\n"), 0o644)
	os.Rename(path+".tmp", path)
	if lines, reset, _ := f.poll(); len(lines) != 1 || !reset {
		t.Fatalf("after the rewrite: %v reset %v", lines, reset)
	}
}

func TestSpark(t *testing.T) {
	if got := spark([]float64{0, 1, 2, math.NaN(), 7}, 10); got != "▁▂▃ █" {
		t.Errorf("spark = %q", got)
	}
	if got := spark([]float64{5, 5, 1, 2, math.NaN(), math.NaN()}, 3); got != "█▁ " {
		t.Errorf("squeezed = %q (cells: 5, 1.5, absent)", got)
	}
	if got := spark([]float64{3, 3}, 4); got != "▅▅" {
		t.Errorf("flat = %q", got)
	}
}

// TestFrameAndETA: the frame of a 2-step run of 10, 30 s a step.
func TestFrameAndETA(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("train: {steps: 10, method: rollout_gdro}\n"), 0o644)
	var lines string
	for s := 1; s <= 2; s++ {
		lines += fmt.Sprintf(`{"step":%d,"reward_mean":0.%d,"time_step_s":30,"bin_labels":["accbin_0","accbin_1","accbin_excl"],"bin_share":[0.5,0.4,0.1],"bin_n_mean":[6,3,0]}`+"\n", s, s)
	}
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(lines), 0o644)
	var out bytes.Buffer
	err := Run(context.Background(), Options{Dir: dir, Out: &out, TTY: true, Once: true,
		Size: func() (int, int, error) { return 80, 30, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"step 2/10 (20%)", "~4m00s to the end", "b0 hardest", "b1 easiest", "excl", "rollouts/prompt", "\x1b[?25h"} {
		if !strings.Contains(s, want) {
			t.Errorf("frame lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "GDRO weight") {
		t.Errorf("a run without Prompt-GDRO weights shows a weight column:\n%s", s)
	}
	esc := regexp.MustCompile(`\x1b\[[?0-9;]*[a-zA-Z]`)
	for _, l := range strings.Split(s, "\r\n") {
		if n := len([]rune(esc.ReplaceAllString(l, ""))); n > 80 {
			t.Errorf("line of %d runes exceeds the width: %q", n, l)
		}
	}
}

// TestPlainAfterResume: read again from its start after a resume,
// metrics.jsonl's unchanged steps are not printed twice; the redone ones
// (new times) are.
func TestPlainAfterResume(t *testing.T) {
	line := func(step int, secs float64) map[string]any {
		return map[string]any{"step": float64(step), "time_step_s": secs}
	}
	s := &state{total: 10}
	var out bytes.Buffer
	first := []map[string]any{line(1, 2), line(2, 2), line(3, 2)}
	s.add(first)
	s.printLines(&out, first, []map[string]any{{"step": 2.0, "n": 4.0}})
	again := []map[string]any{line(1, 2), line(2, 2), line(3, 2.5)}
	s.steps = nil
	s.add(again)
	s.printLines(&out, again, []map[string]any{{"step": 2.0, "n": 4.0}})
	got := out.String()
	if n := strings.Count(got, "step 3/10"); n != 2 || strings.Count(got, "step 1/10") != 1 || strings.Count(got, "validation step 2") != 1 {
		t.Errorf("after the resume:\n%s", got)
	}
	if i, j := strings.Index(got, "step 2/10"), strings.Index(got, "validation step 2"); i > j {
		t.Errorf("the validation of step 2 comes before its step:\n%s", got)
	}
}

// TestWaitingMessage: a folder without steps says what the view waits for,
// in a batch log (plain) and on a terminal, naming the file.
func TestWaitingMessage(t *testing.T) {
	for _, c := range []struct {
		name            string
		config, metrics string // file contents; "-" for no file
		want            string
	}{
		{"empty folder", "-", "-", "no metrics.jsonl or config.yaml yet (the run has not started here"},
		{"config only", "train: {steps: 4}\n", "-", "metrics.jsonl does not exist yet (the run is starting"},
		{"empty metrics", "train: {steps: 4}\n", "", "the file has no complete line yet"},
		{"a line not ended", "train: {steps: 4}\n", `{"step":1,`, "the file has no complete line yet"},
	} {
		dir := t.TempDir()
		for name, body := range map[string]string{"config.yaml": c.config, "metrics.jsonl": c.metrics} {
			if body != "-" {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, tty := range []bool{false, true} {
			var out bytes.Buffer
			if err := Run(context.Background(), Options{Dir: dir, Out: &out, TTY: tty, Once: true}); err != nil {
				t.Fatal(err)
			}
			want := "waiting for"
			got := out.String()
			if tty { // wrapped to the terminal's width
				got = strings.Join(strings.Fields(regexp.MustCompile(`\x1b\[[?0-9;]*[a-zA-Z]`).ReplaceAllString(got, " ")), " ")
			}
			if !strings.Contains(got, want) || !strings.Contains(got, c.want) ||
				!strings.Contains(got, filepath.Join(dir, "metrics.jsonl")) {
				t.Errorf("%s (tty %v): output lacks %q, %q or the file's path:\n%q", c.name, tty, want, c.want, got)
			}
		}
	}
}
