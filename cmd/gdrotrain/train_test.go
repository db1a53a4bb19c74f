package main

import (
	"os"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// TestPrintConfigOfBuiltin: --print-config shows a shipped config before
// model.path and data.train are set (it used to refuse until they were).
func TestPrintConfigOfBuiltin(t *testing.T) {
	out, err := runCmd(t, "", "train", "--config", "paper-grpo-1.7b", "--print-config")
	if err != nil {
		t.Fatalf("--print-config: %v\n%s", err, out)
	}
	for _, want := range []string{"path: \"\"", "benchmarks/math500.jsonl", "method: grpo"} {
		if !strings.Contains(out, want) {
			t.Errorf("printed config lacks %q:\n%s", want, out)
		}
	}
	// Values are still checked.
	if _, err := runCmd(t, "", "train", "--config", "paper-grpo-1.7b", "--print-config", "--set", "optim.lr=.nan"); err == nil || !strings.Contains(err.Error(), "optim.lr") {
		t.Errorf("--print-config with a NaN lr: %v", err)
	}
}

// TestTrainExampleNamesMissingInputs: the README's example run outside the
// repository root (so benchmarks/ is not there) fails before the device
// self-test and the model load, naming the config key; data.train unset is
// named too.
func TestTrainExampleNamesMissingInputs(t *testing.T) {
	task := testfix.TinyTask(t)
	_, err := runCmd(t, "", "train", "--config", "paper-prompt-gdro-1.7b", "--set", "model.path="+task.Model,
		"--set", "data.train=["+task.Train+"]", "--set", "run.out_dir="+task.Dir)
	if err == nil || !strings.Contains(err.Error(), "validation.files[0]: benchmarks/math500.jsonl does not exist") ||
		!strings.Contains(err.Error(), "benchmarks/ folder of the gdrotrain repository: run from its root") || strings.Contains(err.Error(), "NVIDIA") {
		t.Fatalf("missing benchmarks: %v", err)
	}
	_, err = runCmd(t, "", "train", "--config", "paper-prompt-gdro-1.7b", "--set", "model.path="+task.Model)
	if err == nil || !strings.Contains(err.Error(), "data.train must list at least one") {
		t.Fatalf("data.train unset: %v", err)
	}
}

// TestTrainRefusesAnEarlierRun: the CLI's side of the run-folder rules
// (trainer.TestRunFolderNeverMixesRuns has the rest): a second `train`
// without --resume in the same folder is refused with both ways out, and
// --overwrite starts afresh.
func TestTrainRefusesAnEarlierRun(t *testing.T) {
	task := testfix.TinyTask(t)
	args := append([]string{"train", "--config", "demo"}, taskArgs(task, "train.steps=1")...)
	if out, err := runCmd(t, "", args...); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	_, err := runCmd(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "already holds a run") || !strings.Contains(err.Error(), "--resume auto") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("second run without --resume: %v", err)
	}
	if out, err := runCmd(t, "", append(args, "--overwrite")...); err != nil || !strings.Contains(out, "starting afresh (--overwrite): removed") {
		t.Fatalf("--overwrite: %v\n%s", err, out)
	}
	_, err = runCmd(t, "", append(args, "--resume", "auto", "--set", "run.seed=9")...)
	if err == nil || !strings.Contains(err.Error(), "run.seed 1 → 9") {
		t.Fatalf("resume with another seed: %v", err)
	}
	if out, err := runCmd(t, "", append(args, "--resume", "auto", "--set", "run.seed=9", "--allow-config-change")...); err != nil {
		t.Fatalf("--allow-config-change: %v\n%s", err, out)
	}
}

// TestOldConfigKeys: a config file or a --set with a key renamed or
// removed before the first release is refused, naming what replaced it.
func TestOldConfigKeys(t *testing.T) {
	old := t.TempDir() + "/old.yaml"
	if err := os.WriteFile(old, []byte("run: {matmul_precision: tf32}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", old}, "run.matmul_precision is renamed precision.matmul"},
		{[]string{"--config", "demo", "--set", "rollout.temperature=0.7"}, "--set rollout.temperature=0.7: rollout is renamed sampling"},
		{[]string{"--config", "demo", "--set", "gdro.prompt.enabled=true"}, "gdro.prompt.enabled is no longer a key: train.method decides"},
	} {
		out, err := runCmd(t, "", append([]string{"train", "--print-config"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
}
