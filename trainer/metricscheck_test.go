package trainer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// TestResumeChecksMetrics: a resume keeps metrics.jsonl whole or says why
// not. A garbage line, a deleted file, a gap or a repeated step is refused,
// naming the file and line (before, the lines after a garbage one were
// dropped in silence, and a deleted file or a gap resumed as if whole); a
// last line cut short by a kill is dropped with a log line; --repair-metrics
// keeps the valid lines and logs what it dropped and which steps have none.
func TestResumeChecksMetrics(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Train.Steps = 3
	cfg.Checkpoint.Every, cfg.Checkpoint.Keep = 1, 0
	dir := runFixture(t, cfg)
	path := filepath.Join(dir, "metrics.jsonl")
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(whole), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("the run wrote %d metrics lines, want 3", len(lines))
	}
	cases := []struct {
		name    string
		content *string // nil: the file deleted
		want    string  // in the error; "" resumes
		log     string  // in the log of a resume
	}{
		{"garbage at line 2", ptr(lines[0] + "{\"step\": 2, oops\n" + lines[2]), path + " line 2 is not a step's JSON object", ""},
		{"a gap", ptr(lines[0] + lines[2]), path + " line 2 has step 3, but there is no line for step 2", ""},
		{"a repeated step", ptr(lines[0] + lines[1] + lines[1] + lines[2]), path + " line 3 has step 2 after step 2", ""},
		{"the tail deleted", ptr(lines[0]), path + " ends before step 3: there is no line for steps 2–3", ""},
		{"deleted", nil, path + " is missing, so there would be no metrics line for steps 1–3", ""},
		{"a line cut short past the checkpoint", ptr(string(whole) + `{"step": 4, "acc`), "", ""},
		{"garbage past the checkpoint", ptr(string(whole) + "garbage\n" + lines[2]), "", ""},
	}
	for _, c := range cases {
		os.Remove(path)
		if c.content != nil {
			os.WriteFile(path, []byte(*c.content), 0o644)
		}
		var log bytes.Buffer
		tr, err := Open(cfg, &log, Options{Resume: "auto"})
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--repair-metrics") {
				t.Errorf("%s: %v, want %q and the way out", c.name, err, c.want)
			}
			if raw, _ := os.ReadFile(path); c.content != nil && string(raw) != *c.content {
				t.Errorf("%s: the refused resume changed metrics.jsonl", c.name)
			}
			if err == nil {
				tr.Close()
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tr.Close()
		if raw, _ := os.ReadFile(path); string(raw) != string(whole) || !strings.Contains(log.String(), c.log) {
			t.Errorf("%s: metrics.jsonl %q, log:\n%s", c.name, raw, log.String())
		}
	}

	// A run started from a checkpoint of another run folder begins its
	// lines one past that step, and resumes so.
	b := cfg
	b.Run.Name = "branch"
	runTo := func(steps int, o Options) {
		t.Helper()
		b.Train.Steps = steps
		tr, err := Open(b, io.Discard, o)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(path, whole, 0o644)
	runTo(3, Options{Resume: filepath.Join(dir, "checkpoints", checkpoint.Name(2))})
	runTo(4, Options{Resume: "auto"})
	var branch []string
	for _, m := range readLines(t, filepath.Join(b.RunDir(), "metrics.jsonl")) {
		branch = append(branch, fmt.Sprint(m["step"]))
	}
	if got := strings.Join(branch, ","); got != "3,4" {
		t.Errorf("the branched run's metrics.jsonl holds steps %s, want 3,4", got)
	}

	// --repair-metrics: the garbage line dropped, said so, and the run goes on.
	os.WriteFile(path, []byte(lines[0]+"garbage\n"+lines[2]), 0o644)
	var log bytes.Buffer
	c := cfg
	c.Train.Steps = 4
	tr, err := Open(c, &log, Options{Resume: "auto", RepairMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--repair-metrics: dropping line 2 of " + path, "--repair-metrics: " + path + " has no line for step 2 (line 3 has step 3)"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, log.String())
		}
	}
	var steps []string
	for _, m := range readLines(t, path) {
		steps = append(steps, fmt.Sprint(m["step"]))
	}
	if got := strings.Join(steps, ","); got != "1,3,4" {
		t.Errorf("repaired metrics.jsonl holds steps %s, want 1,3,4", got)
	}
}

func ptr(s string) *string { return &s }
