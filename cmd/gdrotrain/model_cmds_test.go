package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/infer"
)

// TestInitTinyAndLogits: init-tiny writes a loadable folder and logits
// prints what the model computes.
func TestInitTinyAndLogits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, err := runCmd(t, "", "init-tiny", "--out", dir, "--layers", "1", "--hidden", "32", "--heads", "4", "--kv-heads", "1",
		"--head-dim", "8", "--intermediate", "48", "--vocab", "50", "--tied", "--dtype", "bfloat16", "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "generation_config.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("init-tiny did not write %s: %v", f, err)
		}
	}
	outFile := filepath.Join(t.TempDir(), "l.json")
	if _, err := runCmd(t, "", "logits", "--model", dir, "--ids", "1, 2,3", "--all", "--out", outFile); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(outFile)
	var res infer.LogitsOutput
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(cpu.NewBackend(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Cfg.TieWordEmbeddings || m.Cfg.NumKeyValueHeads != 1 || m.Cfg.Dtype() != "bfloat16" {
		t.Fatalf("config not as requested: %+v", m.Cfg)
	}
	want, _ := m.Logits([]int32{1, 2, 3})
	if len(res.Positions) != 3 || res.VocabSize != 50 || len(res.Logits) != 50 {
		t.Fatalf("output shape: %d positions, vocab %d", len(res.Positions), res.VocabSize)
	}
	for i := range want[2] {
		if res.Logits[i] != want[2][i] {
			t.Fatalf("logit %d: %v vs %v", i, res.Logits[i], want[2][i])
		}
	}
	if _, err := runCmd(t, "", "logits", "--model", dir, "--ids", "1,x"); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("bad ids: %v", err)
	}
	if _, err := runCmd(t, "", "init-tiny", "--out", dir, "--heads", "3", "--kv-heads", "2"); err == nil || !strings.Contains(err.Error(), "num_key_value_heads") {
		t.Fatalf("bad heads: %v", err)
	}
}

// TestModelCommandsVerifyCheckpoints: generate and logits refuse a
// checkpoint that fails its checksums, as export does (they used to load
// it), and load a sound one.
func TestModelCommandsVerifyCheckpoints(t *testing.T) {
	ckpt, _ := testfix.TinyCheckpoint(t, t.TempDir())
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
