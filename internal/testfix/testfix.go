// Package testfix writes the small training fixture shared by the trainer's
// tests and the CUDA backend's end-to-end tests: a random tiny Qwen3 with the
// tiny tokenizer, and a synthetic arithmetic task.
package testfix

import (
	"path/filepath"
	"testing"

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
	for _, id := range tok.StopIDs() {
		o.EOS = append(o.EOS, id)
	}
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := model.NewCPU()
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
