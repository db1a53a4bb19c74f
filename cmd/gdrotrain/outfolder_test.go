package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
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
	ckpt, base := tinyCheckpoint(t, root)
	baseBefore, _ := os.ReadFile(filepath.Join(base, "model.safetensors"))
	for _, f := range []string{"config.yaml", "metrics.jsonl"} {
		os.WriteFile(filepath.Join(run, f), []byte("{}\n"), 0o644)
	}

	refused := []struct {
		args []string
		want string
	}{
		{[]string{"export", "--checkpoint", ckpt, "--out", ckpt}, "is the checkpoint " + ckpt},
		{[]string{"export", "--checkpoint", ckpt, "--out", filepath.Join(ckpt, "hf")}, "is inside the checkpoint " + ckpt},
		{[]string{"export", "--checkpoint", ckpt, "--out", run}, "is the run folder " + run},
		{[]string{"export", "--checkpoint", ckpt, "--out", filepath.Join(run, "hf")}, "is inside the run folder " + run},
		{[]string{"export", "--checkpoint", ckpt, "--out", base}, "is a model folder (" + base + " holds model.safetensors)"},
		{[]string{"init-tiny", "--out", base}, "is a model folder (" + base + " holds model.safetensors)"},
		{[]string{"init-tiny", "--out", filepath.Join(ckpt, "x")}, "is inside the checkpoint"},
		{[]string{"export", "--checkpoint", ckpt, "--out", filepath.Join(root, "a"), "--shard-gb", "-1"}, "--shard-gb -1: want a size in GiB"},
		{[]string{"export", "--checkpoint", ckpt, "--out", filepath.Join(root, "a"), "--shard-gb", "NaN"}, "--shard-gb NaN: want a size in GiB"},
		{[]string{"export", "--checkpoint", ckpt, "--out", filepath.Join(root, "a"), "--shard-gb", "+Inf"}, "--shard-gb +Inf: want a size in GiB"},
	}
	for _, c := range refused {
		_, err := runCmd(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
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
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", filepath.Join(mine, "adapter")); err != nil {
		t.Errorf("export into a folder beside a config and its log: %v", err)
	}

	// A sharded export, then an unsharded one over it with --force: one
	// model, the new one.
	out := filepath.Join(root, "hf")
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", out, "--dtype", "fp32", "--shard-gb", "0.00005"); err != nil {
		t.Fatal(err)
	}
	shards, _ := filepath.Glob(filepath.Join(out, "model-*-of-*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("the sharded export wrote %d shards", len(shards))
	}
	if _, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", out, "--shard-gb", "0"); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("an export over an earlier one without --force: %v", err)
	}
	if msg, err := runCmd(t, "", "export", "--checkpoint", ckpt, "--out", out, "--dtype", "bf16", "--shard-gb", "0", "--force"); err != nil || !strings.Contains(msg, "model.safetensors.index.json") {
		t.Fatalf("export --force: %v\n%s", err, msg)
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
	if _, err := runCmd(t, "", "init-tiny", "--out", base, "--seed", "2", "--force"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(base, "model.safetensors")); string(after) == string(baseBefore) {
		t.Error("init-tiny --force left the old weights")
	}
}

// tinyCheckpoint writes under root an init-tiny model (base) and a
// checkpoint of it, ROOT/run/checkpoints/step_00000008 (a stub tokenizer).
func tinyCheckpoint(t *testing.T, root string) (ckpt, base string) {
	t.Helper()
	base = filepath.Join(root, "base")
	if _, err := runCmd(t, "", "init-tiny", "--out", base, "--seed", "1"); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(cpu.NewBackend(), base)
	if err != nil {
		t.Fatal(err)
	}
	w, err := checkpoint.Begin(filepath.Join(root, "run", "checkpoints"), 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteFolder(w.Dir(), m.Cfg, m.B, m.P, model.F32); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Dir(), "tokenizer.json"), []byte(`{"stub": true}`), 0o644)
	ckpt, err = w.Commit(checkpoint.Manifest{State: json.RawMessage(`{}`), Config: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return ckpt, base
}

// TestModelCommandsVerifyCheckpoints: generate and logits refuse a
// checkpoint that fails its checksums, as export does (they used to load
// it), and load a sound one.
func TestModelCommandsVerifyCheckpoints(t *testing.T) {
	ckpt, _ := tinyCheckpoint(t, t.TempDir())
	if _, err := runCmd(t, "", "logits", "--model", ckpt, "--ids", "1,2"); err != nil {
		t.Fatalf("logits of a sound checkpoint: %v", err)
	}
	flipLastByte(t, filepath.Join(ckpt, "model.safetensors"))
	want := "file model.safetensors fails its checksum"
	for _, args := range [][]string{
		{"logits", "--model", ckpt, "--ids", "1,2"},
		{"generate", "--model", ckpt, "--prompt", "1+1=", "--mode", "raw", "--max-new-tokens", "2"},
		{"export", "--checkpoint", ckpt, "--out", filepath.Join(t.TempDir(), "hf")},
	} {
		if _, err := runCmd(t, "", args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of a corrupted checkpoint: %v, want %q", args[0], err, want)
		}
	}
}
