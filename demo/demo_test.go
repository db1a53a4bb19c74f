package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// tiny is a demo that finishes in seconds: 2 problems per group, one
// warm-up epoch, one GRPO step of 4 prompts, one validation sample.
func tiny(t *testing.T) Options {
	o := Default()
	o.Out = filepath.Join(t.TempDir(), "demo")
	o.TrainPerGroup, o.ValPerGroup, o.WarmPerGroup, o.WarmEpochs = 2, 1, 2, 1
	o.Sets = []string{"train.steps=1", "train.prompts_per_step=4", "train.mini_batch_prompts=4", "validation.n=1"}
	return o
}

func nolog(string, ...any) {}

// TestTask: the task files hold the asked sizes, and no held-out problem is
// one the model trains on (warm-up or GRPO).
func TestTask(t *testing.T) {
	o := tiny(t)
	o.TrainPerGroup, o.WarmPerGroup, o.ValPerGroup = 3, 5, 4
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	pool, trainPath, valPath, err := Task(o, nolog)
	if err != nil {
		t.Fatal(err)
	}
	groups := len(synth.Groups)
	if len(pool) != 5*groups {
		t.Errorf("pool has %d problems, want %d", len(pool), 5*groups)
	}
	lines := func(p string) []string {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(raw)), "\n")
	}
	if n := len(lines(trainPath)); n != 3*groups {
		t.Errorf("train.jsonl has %d rows, want %d", n, 3*groups)
	}
	seen := synth.Texts(pool)
	for _, l := range lines(valPath) {
		var p synth.Problem
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if seen[p.Problem] {
			t.Errorf("held-out problem %q is also a training problem", p.Problem)
		}
	}
}

// TestWarmReusable: a finished warm-up is reused only for the same seed and
// sizes.
func TestWarmReusable(t *testing.T) {
	o := tiny(t)
	dir := filepath.Join(o.Out, "model-warm")
	if ok, why := warmReusable(o, dir); ok || !strings.Contains(why, "no finished warm-up") {
		t.Errorf("empty folder: %v %q", ok, why)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp, _ := json.Marshal(stampOf(o))
	if err := os.WriteFile(filepath.Join(dir, warmStampFile), stamp, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, _ := warmReusable(o, dir); !ok {
		t.Error("the same demo's warm-up is not reused")
	}
	o.Seed++
	if ok, why := warmReusable(o, dir); ok || !strings.Contains(why, "other --seed or sizes") {
		t.Errorf("another seed: %v %q", ok, why)
	}
}

// TestReport prints the first and the last validation per group.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "validation.jsonl")
	var buf bytes.Buffer
	for _, r := range []trainer.ValResult{
		{Step: 0, N: 4, Prompts: 12, MeanAcc: 0.25, WorstAcc: 0.1, Benchmarks: map[string]*trainer.BenchResult{"synth/b": {MeanAcc: 0.4}, "synth/a": {MeanAcc: 0.1}}},
		{Step: 5, N: 4, Prompts: 12, MeanAcc: 0.5},
		{Step: 10, N: 4, Prompts: 12, MeanAcc: 0.75, WorstAcc: 0.5, Benchmarks: map[string]*trainer.BenchResult{"synth/b": {MeanAcc: 1}, "synth/a": {MeanAcc: 0.5}}},
	} {
		line, _ := json.Marshal(r)
		buf.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Report(&out, path, dir); err != nil {
		t.Fatal(err)
	}
	want := `
held-out accuracy (mean@4 over 12 problems never trained on)
group                step 0    step 10
synth/a               0.100      0.500
synth/b               0.400      1.000
all                   0.250      0.750
worst group           0.100      0.500
run folder: ` + dir + "\n"
	if out.String() != want {
		t.Errorf("report:\n%s\nwant:\n%s", out.String(), want)
	}
	if err := os.WriteFile(path, buf.Bytes()[:bytes.IndexByte(buf.Bytes(), '\n')+1], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Report(&out, path, dir); err == nil || !strings.Contains(err.Error(), "before and after") {
		t.Errorf("one validation: %v", err)
	}
}

// TestConfig: the demo's files and seed fill configs/demo.yaml, and Sets
// override it.
func TestConfig(t *testing.T) {
	o := tiny(t)
	o.Seed = 7
	cfg, err := Config(o, "w", "a b.jsonl", "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Model.Path != "w" || cfg.Data.Train[0] != "a b.jsonl" || cfg.Validation.Files[0] != "v.jsonl" || cfg.Run.OutDir != o.Out ||
		cfg.Run.Seed != 7 || cfg.Train.Steps != 1 || cfg.Train.Method != trainer.MethodPromptGDRO || cfg.Run.Device != "cpu" {
		t.Errorf("config: %+v", cfg)
	}
}

// TestRun: a tiny demo runs end to end and reports; --resume reuses its
// warm-up; a cancelled context during the warm-up is Stopped (exit 3).
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	o := tiny(t)
	var out, log bytes.Buffer
	if err := Run(context.Background(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(out.String(), "held-out accuracy (mean@1 over 6 problems never trained on)") || !strings.Contains(out.String(), "worst group") {
		t.Errorf("report:\n%s", out.String())
	}
	for _, f := range []string{"train.jsonl", "heldout.jsonl", "model-init/config.json", "model-warm/" + warmStampFile, "grpo-prompt-gdro/metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(o.Out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	o.Resume = true
	log.Reset()
	if err := Run(context.Background(), o, &out, &log); err != nil || !strings.Contains(log.String(), "reusing the finished warm-up") {
		t.Errorf("--resume: %v\n%s", err, log.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.Resume, o.Seed = false, 2
	err := Run(ctx, o, &out, &log)
	var stopped Stopped
	if !errors.As(err, &stopped) || !errors.Is(err, trainer.ErrStopped) || !strings.Contains(err.Error(), "during the warm-up") {
		t.Errorf("cancelled warm-up: %v", err)
	}
}
