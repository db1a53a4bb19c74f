package trainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/tools/tbevents"
)

// TestTensorBoardResume: a Prompt+Rollout-GDRO run with log.tensorboard
// writes tb/; the run is then "killed" after step 3 before step 3's
// checkpoint (removed), resumed with --resume auto from step 2 and run to
// step 4. The event files must hold every metrics.jsonl and
// validation.jsonl figure at its step once: steps 1–2 from the first
// attempt, 3–4 from the resumed one (the first attempt's step 3 dropped).
// The files are read back by our reader here and by an independent one,
// scripts/read_tbevents.py (Python's protobuf, protoc, its own CRC-32C),
// which needs /usr/bin/python3 with python3-protobuf and protoc (Debian
// packages; .ci/run installs them): skipped without them unless
// GDROTRAIN_REQUIRE_FIXTURES is set.
func TestTensorBoardResume(t *testing.T) {
	task := testfix.TinyTask(t)
	cfg, err := LoadBytes(nil, "", append(task.Sets(), "run.name=tb", "train.method=prompt_rollout_gdro", "train.steps=3",
		"gdro.rollout.n_min=2", "gdro.rollout.n_max=4", "gdro.rollout.n_mean=3", "gdro.classifier.edges=[0.5]",
		"validation.before_training=true", "checkpoint.every=2", "log.tensorboard=true"))
	if err != nil {
		t.Fatal(err)
	}
	dir := runFixture(t, cfg)
	before := tbSteps(t, dir)
	if fmt.Sprint(before) != "[1 2 3]" {
		t.Fatalf("first attempt: train/ steps %v in tb/, want [1 2 3]", before)
	}
	if err := os.RemoveAll(filepath.Join(dir, "checkpoints", checkpoint.Name(3))); err != nil {
		t.Fatal(err)
	}
	cfg.Train.Steps = 4
	tr, err := New(cfg, io.Discard, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tbSteps(t, dir); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("after the resume: train/ steps %v in tb/, want [1 2 3 4] once each", got)
	}
	files, _ := tbevents.Files(filepath.Join(dir, tbevents.Dir))
	if len(files) != 2 {
		t.Errorf("%d event files, want 2 (one per attempt)", len(files))
	}
	checkPythonReader(t, dir)
}

// tbSteps returns the step of every event carrying train/reward_mean, in
// file order, failing on a damaged file.
func tbSteps(t *testing.T, dir string) []int64 {
	t.Helper()
	files, err := tbevents.Files(filepath.Join(dir, tbevents.Dir))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, f := range files {
		events, err := tbevents.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			for _, v := range e.GetSummary().GetValue() {
				if v.Tag == "train/reward_mean" {
					steps = append(steps, e.Step)
				}
			}
		}
	}
	return steps
}

// checkPythonReader runs scripts/read_tbevents.py on the run folder.
func checkPythonReader(t *testing.T, dir string) {
	t.Helper()
	const python = "/usr/bin/python3"
	_, err := exec.LookPath("protoc")
	if err == nil {
		err = exec.Command(python, "-c", "import google.protobuf").Run()
	}
	if err != nil {
		msg := "the independent event-file reader needs " + python + " with python3-protobuf and protoc (apt-get install python3-protobuf protobuf-compiler): " + err.Error()
		if os.Getenv("GDROTRAIN_REQUIRE_FIXTURES") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	cmd := exec.Command(python, filepath.Join(root, "scripts", "read_tbevents.py"), filepath.Join(root, "tools", "tbevents", "proto"), dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_tbevents.py: %v\n%s", err, stderr.String())
	}
	t.Logf("read_tbevents.py: %s", out)
}

// TestTensorBoardRankZero: in a data-parallel run only rank 0 writes tb/:
// one event file, each step once.
func TestTensorBoardRankZero(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	cfg.Run.Name, cfg.Log.TensorBoard = "tb-dp", true
	for r, err := range runRanks(t, cfg, 2, "", nil, nil) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	files, _ := tbevents.Files(filepath.Join(cfg.RunDir(), tbevents.Dir))
	if len(files) != 1 {
		t.Errorf("%d event files, want 1 (rank 0's)", len(files))
	}
	if got := tbSteps(t, cfg.RunDir()); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("train/ steps %v, want [1 2]", got)
	}
}
