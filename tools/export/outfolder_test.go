package export

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestExportProtectsFolders: export and init-tiny refuse an --out that is,
// or is inside, a checkpoint, a run folder or a model folder (before, export
// --out the checkpoint wrote bf16 files over it and --resume auto then
// skipped it as damaged; --out the base model overwrote it), unless --force;
// an unsharded export over a sharded one removes the stale shards and index
// (before, our own loader then read the old model); a bad --shard-gb is
// refused naming the flag.
func TestExportProtectsFolders(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "run")
	ckpt, base := testfix.TinyCheckpoint(t, root)
	baseBefore, _ := os.ReadFile(filepath.Join(base, "model.safetensors"))
	for _, f := range []string{"config.yaml", "metrics.jsonl"} {
		os.WriteFile(filepath.Join(run, f), []byte("{}\n"), 0o644)
	}

	exp := func(out string, shardGB float64) Options {
		return quiet(Options{Checkpoint: ckpt, Out: out, DType: "bf16", ShardGB: shardGB})
	}
	tiny := func(out string) error {
		return InitTiny(TinyOptions{Model: model.DefaultTiny(), Out: out, DType: "float32", Stdout: io.Discard, Stderr: io.Discard})
	}
	refused := []struct {
		name string
		err  error
		want string
	}{
		{"export --out the checkpoint", Run(exp(ckpt, 5)), "is the checkpoint " + ckpt},
		{"export --out inside the checkpoint", Run(exp(filepath.Join(ckpt, "hf"), 5)), "is inside the checkpoint " + ckpt},
		{"export --out the run", Run(exp(run, 5)), "is the run folder " + run},
		{"export --out inside the run", Run(exp(filepath.Join(run, "hf"), 5)), "is inside the run folder " + run},
		{"export --out the base", Run(exp(base, 5)), "is a model folder (" + base + " holds model.safetensors)"},
		{"init-tiny --out the base", tiny(base), "is a model folder (" + base + " holds model.safetensors)"},
		{"init-tiny --out inside the checkpoint", tiny(filepath.Join(ckpt, "x")), "is inside the checkpoint"},
		{"--shard-gb -1", Run(exp(filepath.Join(root, "a"), -1)), "--shard-gb -1: want a size in GiB"},
		{"--shard-gb NaN", Run(exp(filepath.Join(root, "a"), math.NaN())), "--shard-gb NaN: want a size in GiB"},
		{"--shard-gb +Inf", Run(exp(filepath.Join(root, "a"), math.Inf(1))), "--shard-gb +Inf: want a size in GiB"},
	}
	for _, c := range refused {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, c.err, c.want)
		}
	}
	if _, err := checkpoint.Verify(ckpt); err != nil {
		t.Errorf("after the refused exports: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(base, "model.safetensors")); string(after) != string(baseBefore) {
		t.Error("a refused init-tiny or export changed the base model")
	}
	if left, _ := filepath.Glob(filepath.Join(root, ".*.partial")); len(left) > 0 {
		t.Errorf("temporary folders left behind: %v", left)
	}

	// A user's folder holding a config and the log of a run whose out_dir
	// is below it (check_references.sh's layout) is no run folder.
	mine := filepath.Join(root, "mine")
	os.MkdirAll(mine, 0o755)
	for _, f := range []string{"config.yaml", "train.log"} {
		os.WriteFile(filepath.Join(mine, f), []byte("x\n"), 0o644)
	}
	if err := Run(exp(filepath.Join(mine, "adapter"), 5)); err != nil {
		t.Errorf("export into a folder beside a config and its log: %v", err)
	}

	// A sharded export, then an unsharded one over it with --force: one
	// model, the new one.
	out := filepath.Join(root, "hf")
	sharded := exp(out, 0.00005)
	sharded.DType = "fp32"
	if err := Run(sharded); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(out, "model-*-of-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("the sharded export wrote %d shards", len(shards))
	}
	if err := Run(exp(out, 0)); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("an export over an earlier one without --force: %v", err)
	}
	var msg strings.Builder
	forced := exp(out, 0)
	forced.Force, forced.Stderr = true, &msg
	if err := Run(forced); err != nil || !strings.Contains(msg.String(), "model.safetensors.index.json") {
		t.Fatalf("export --force: %v\n%s", err, msg.String())
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		if isWeightFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if strings.Join(names, ",") != "model.safetensors" {
		t.Errorf("after the unsharded export over a sharded one: weight files %v, want model.safetensors only", names)
	}
	if got, err := model.Load(cpu.NewBackend(), out); err != nil || got.Cfg.Dtype() != "bfloat16" {
		t.Errorf("the loader reads the old model: %v", err)
	}

	// init-tiny --force replaces the base.
	if err := InitTiny(TinyOptions{Model: model.DefaultTiny(), Out: base, DType: "float32", Seed: 2, Force: true, Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(base, "model.safetensors")); string(after) == string(baseBefore) {
		t.Error("init-tiny --force left the old weights")
	}
}
