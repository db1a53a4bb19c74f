// Package testfix writes the small training fixture shared by the trainer's
// tests and the CUDA backend's end-to-end tests: a random tiny Qwen3 with the
// tiny tokenizer, and a synthetic arithmetic task.
package testfix

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/synth"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// Task is a fixture on disk.
type Task struct {
	Dir, Model, Train, Val string
}

// TinyTask writes the fixture under a test temporary folder: the model in
// Model (float32, seed 3, std 0.1), 4 training and 2 validation problems.
func TinyTask(t testing.TB) Task {
	t.Helper()
	dir := t.TempDir()
	task := Task{Dir: dir, Model: filepath.Join(dir, "model"), Train: filepath.Join(dir, "train.jsonl"), Val: filepath.Join(dir, "val.jsonl")}
	if err := tokenizer.WriteTiny(task.Model, 300); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(task.Model)
	if err != nil {
		t.Fatal(err)
	}
	o := model.DefaultTiny()
	o.Vocab = tok.VocabSize()
	o.EOS = append(o.EOS, tok.StopIDs()...)
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	if err := model.WriteFolder(task.Model, mc, b, model.RandomParams(b, mc, 3, 0.1, 0), model.F32); err != nil {
		t.Fatal(err)
	}
	train := synth.Generate(4, 1, nil)
	val := synth.Generate(1, 2, synth.Texts(train))
	if err := synth.WriteJSONL(task.Train, train); err != nil {
		t.Fatal(err)
	}
	if err := synth.WriteJSONL(task.Val, val); err != nil {
		t.Fatal(err)
	}
	return task
}

// Sets are config overrides (trainer --set syntax) for a 2-step GRPO +
// Prompt-GDRO run on the task, writing under Dir; callers append their own.
func (t Task) Sets() []string {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []string{
		"model.path=" + q(t.Model), "data.train=[" + q(t.Train) + "]", "data.template=none",
		"validation.files=[" + q(t.Val) + "]", "validation.n=2", "validation.every=1", "validation.max_new_tokens=4",
		"run.out_dir=" + q(t.Dir), "train.steps=2", "train.prompts_per_step=4", "train.mini_batch_prompts=2",
		"train.micro_batch_rows=3", "gdro.rollout.n_mean=2", "sampling.max_new_tokens=4", "reward.mode=dapo",
		"train.method=prompt_gdro", "optim.lr=1e-3",
	}
}

// TinyCheckpoint writes under root a random tiny model in ROOT/base (as
// `init-tiny --seed 1` writes it) and a checkpoint of it,
// ROOT/run/checkpoints/step_00000008, with a stub tokenizer: the folders
// the model commands' tests read and refuse to overwrite.
func TinyCheckpoint(t testing.TB, root string) (ckpt, base string) {
	t.Helper()
	o := model.DefaultTiny()
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	p := model.RandomParams(b, mc, 1, o.InitStd, 0)
	base = filepath.Join(root, "base")
	if err := model.WriteFolder(base, mc, b, p, model.F32); err != nil {
		t.Fatal(err)
	}
	w, err := checkpoint.Begin(filepath.Join(root, "run", "checkpoints"), 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteFolder(w.Dir(), mc, b, p, model.F32); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.Dir(), "tokenizer.json"), []byte(`{"stub": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ckpt, err = w.Commit(checkpoint.Manifest{State: json.RawMessage(`{}`), Config: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return ckpt, base
}
