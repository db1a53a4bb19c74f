package trainer

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// TestRunFolderNeverMixesRuns: a new run refuses a folder that holds one
// (it used to truncate metrics.jsonl and overwrite the older checkpoints,
// leaving the newer ones for a later --resume auto); --overwrite clears it;
// a resume refuses trajectory-changing config keys by name unless
// --allow-config-change; --resume auto refuses when every checkpoint is
// damaged instead of restarting from step 0; --resume DIR refuses when newer
// checkpoints of the run would be left behind.
func TestRunFolderNeverMixesRuns(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Train.Steps = 3
	cfg.Checkpoint.Every, cfg.Checkpoint.Keep = 1, 0
	dir := runFixture(t, cfg)
	metrics := filepath.Join(dir, "metrics.jsonl")
	before, _ := os.ReadFile(metrics)

	// A new run in the same folder: refused, nothing touched.
	_, err := New(cfg, io.Discard, "")
	if err == nil || !strings.Contains(err.Error(), "--resume auto") || !strings.Contains(err.Error(), "--overwrite") || !strings.Contains(err.Error(), "step 3") {
		t.Fatalf("new run over an earlier one: %v", err)
	}
	if after, _ := os.ReadFile(metrics); string(after) != string(before) {
		t.Fatal("the refused start changed metrics.jsonl")
	}

	// A resume whose config changes the trajectory: refused, naming the keys.
	c := cfg
	c.Optim.LR, c.Run.Seed = 2e-3, 7
	_, err = Open(c, io.Discard, Options{Resume: "auto"})
	if err == nil || !strings.Contains(err.Error(), "optim.lr 0.001 → 0.002") || !strings.Contains(err.Error(), "run.seed 1 → 7") || !strings.Contains(err.Error(), "--allow-config-change") {
		t.Fatalf("resume with a changed lr and seed: %v", err)
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); !strings.Contains(string(raw), "seed: 1") {
		t.Fatal("the refused resume rewrote config.yaml")
	}
	// … allowed when asked; keys that do not change the trajectory pass.
	c.Train.Steps, c.Checkpoint.Keep, c.Validation.N = 3, 2, 3
	tr, err := Open(c, io.Discard, Options{Resume: "auto", AllowConfigChange: true})
	if err != nil {
		t.Fatalf("--allow-config-change: %v", err)
	}
	tr.Close()
	c = cfg
	c.Train.Steps, c.Checkpoint.Keep, c.Validation.N, c.Train.LogEvery = 4, 2, 3, 5
	if tr, err = Open(c, io.Discard, Options{Resume: "auto"}); err != nil {
		t.Fatalf("resume with only free keys changed: %v", err)
	}
	tr.Close()

	// --resume DIR of an older checkpoint while newer ones exist: refused.
	_, err = Open(cfg, io.Discard, Options{Resume: filepath.Join(dir, "checkpoints", checkpoint.Name(1))})
	if err == nil || !strings.Contains(err.Error(), checkpoint.Name(3)) || !strings.Contains(err.Error(), "mixing two runs") {
		t.Fatalf("resume from an older checkpoint: %v", err)
	}
	// --overwrite with --resume auto is contradictory.
	if _, err := Open(cfg, io.Discard, Options{Resume: "auto", Overwrite: true}); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("--overwrite --resume auto: %v", err)
	}

	// Every checkpoint damaged: --resume auto refuses and deletes nothing.
	dirs, _ := checkpoint.List(filepath.Join(dir, "checkpoints"))
	for _, d := range dirs {
		os.Truncate(filepath.Join(d, optimizerFile), 10)
	}
	_, err = New(cfg, io.Discard, "auto")
	if err == nil || !strings.Contains(err.Error(), "none of the 3 checkpoints") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("resume auto with every checkpoint damaged: %v", err)
	}
	if after, _ := os.ReadFile(metrics); string(after) != string(before) {
		t.Fatal("the refused resume changed metrics.jsonl")
	}

	// --overwrite clears the earlier run and starts afresh.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
	tr, err = Open(cfg, io.Discard, Options{Overwrite: true})
	if err != nil {
		t.Fatalf("--overwrite: %v", err)
	}
	if dirs, _ := checkpoint.List(filepath.Join(dir, "checkpoints")); len(dirs) != 0 {
		t.Fatalf("--overwrite left checkpoints %v", dirs)
	}
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if lines := readLines(t, metrics); len(lines) != 3 {
		t.Fatalf("%d metrics lines after --overwrite, want 3", len(lines))
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal("--overwrite removed a file the run did not write")
	}
}

// TestEditedManifestRefused: a checkpoint whose manifest was edited (the
// issue's state.step 6 → 4) is not trusted: it fails its own checksum, and
// an old-style manifest without a checksum whose state disagrees with its
// step is refused too.
func TestEditedManifestRefused(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Checkpoint.Every, cfg.Checkpoint.Keep = 1, 0
	dir := runFixture(t, cfg)
	ck := filepath.Join(dir, "checkpoints", checkpoint.Name(2))
	edit := func(f func(m map[string]any)) {
		p := filepath.Join(ck, checkpoint.ManifestName)
		raw, _ := os.ReadFile(p)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		raw, _ = json.MarshalIndent(m, "", "  ")
		os.WriteFile(p, raw, 0o644)
	}
	edit(func(m map[string]any) { m["state"].(map[string]any)["step"] = 1 })
	_, err := New(cfg, io.Discard, ck)
	if err == nil || !strings.Contains(err.Error(), "fails its own checksum") {
		t.Fatalf("edited manifest: %v", err)
	}
	edit(func(m map[string]any) { delete(m, "manifest_sha256") })
	_, err = New(cfg, io.Discard, ck)
	if err == nil || !strings.Contains(err.Error(), "state is for step 1 but the manifest says step 2") {
		t.Fatalf("edited old-style manifest: %v", err)
	}
}

// TestInputsCheckedFirst: a missing input is named by its config key before
// anything is loaded or written (the run folder is not even created).
func TestInputsCheckedFirst(t *testing.T) {
	cfg, dir := fixture(t)
	cfg.Validation.Files = append(cfg.Validation.Files, filepath.Join(dir, "benchmarks", "aime24.parquet"))
	cfg.Data.Train = []string{"no/such/train.jsonl"}
	cfg.Run.Name = "never"
	_, err := New(cfg, io.Discard, "")
	for _, want := range []string{"validation.files[1]: " + filepath.Join(dir, "benchmarks", "aime24.parquet") + " does not exist",
		"data.train[0]: no/such/train.jsonl does not exist", "(relative paths are taken from the current folder"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	if _, err := os.Stat(cfg.RunDir()); err == nil {
		t.Error("the run folder was created before the inputs were checked")
	}
	cfg, _ = fixture(t)
	cfg.Model.Path = dir
	if _, err := New(cfg, io.Discard, ""); err == nil || !strings.Contains(err.Error(), "model.path: "+dir+" has no config.json") {
		t.Errorf("model.path without config.json: %v", err)
	}
}
