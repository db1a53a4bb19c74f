package gdrosim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// small is a simulation of 6 steps of 16 prompts from 64.
func small() gdro.SimConfig {
	sc := gdro.DefaultSimConfig()
	sc.Steps, sc.BatchSize, sc.Population = 6, 16, 64
	return sc
}

// TestSimulateThenReplay: gdro-sim writes a step per line and a trace,
// and its summary goes to stderr when a file is stdout; gdro-replay of the
// trace under the same preset replays every step, and says so on stderr.
func TestSimulateThenReplay(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	var out, errs strings.Builder
	src := ConfigSource{Preset: "rollout-10bins"}
	err := Simulate(SimOptions{Config: src, Sim: small(), Out: "-", Trace: trace, JSON: true, Stdout: &out, Stderr: &errs})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Errorf("--out -: %d lines, want 6 (one per step)", n)
	}
	var sum gdro.SimSummary
	if err := json.Unmarshal([]byte(errs.String()), &sum); err != nil || sum.Steps != 6 {
		t.Fatalf("--json summary on stderr (--out -): %v\n%s", err, errs.String())
	}

	out.Reset()
	errs.Reset()
	if err := Replay(ReplayOptions{Config: src, Trace: trace, Stdout: &out, Stderr: &errs}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Errorf("replay: %d decision lines, want 6", n)
	}
	if !strings.HasPrefix(errs.String(), "gdro-replay: 6 steps, 96 prompts") || !strings.Contains(errs.String(), "final mu") {
		t.Errorf("replay summary: %q", errs.String())
	}
}

// TestConfigSource: the preset, then the file, then the mode; an unknown
// preset, a bad file (named) or mode is an error, and --trace is required.
func TestConfigSource(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("no_such_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigSource{Preset: "rollout-10bins", Mode: "reference_compat"}.Resolve()
	if err != nil || cfg.Rollout.Mode != "reference_compat" {
		t.Errorf("--mode reference_compat: %v, mode %q", err, cfg.Rollout.Mode)
	}
	for _, c := range []struct {
		src  ConfigSource
		want string
	}{
		{ConfigSource{Preset: "no-such-preset"}, "no-such-preset"},
		{ConfigSource{Preset: "rollout-10bins", File: bad}, bad},
		{ConfigSource{Preset: "rollout-10bins", File: filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{ConfigSource{Preset: "rollout-10bins", Mode: "sideways"}, "sideways"},
	} {
		if _, err := c.src.Resolve(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.src, err, c.want)
		}
	}
	if err := Replay(ReplayOptions{Config: ConfigSource{Preset: "rollout-10bins"}}); err == nil || !strings.Contains(err.Error(), "--trace FILE is required") {
		t.Errorf("no --trace: %v", err)
	}
}
