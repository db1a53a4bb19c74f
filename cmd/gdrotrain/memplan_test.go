package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
)

// withMaxPositions rewrites the model's max_position_embeddings.
func withMaxPositions(t *testing.T, dir string, n int) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	c["max_position_embeddings"] = n
	if raw, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelCommandsRefuseOversize: what would die with "fatal error: out
// of memory", or run quadratic on an over-long prompt, is refused before
// anything large is allocated, naming the flag (issue 44). The sizes are
// beyond any machine (petabytes), so the refusal does not depend on this
// one's memory.
func TestModelCommandsRefuseOversize(t *testing.T) {
	task := testfix.TinyTask(t)
	tok := task.Model
	long := t.TempDir() // the tiny model with a context of 2·10⁹ tokens
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(task.Model, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(long, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	withMaxPositions(t, long, 2_000_000_000)
	mc, err := model.LoadConfig(task.Model)
	if err != nil {
		t.Fatal(err)
	}
	maxPos := mc.MaxPositionEmbeddings
	ids := strings.TrimSuffix(strings.Repeat("1,", maxPos+1), ",")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"generate -n 10⁹", []string{"generate", "--model", task.Model, "--prompt", "1+1=", "--mode", "raw", "-n", "1000000000"},
			[]string{"generate: out of memory before starting", "KV cache (1000000000 slots", "lower -n", "bytes needed"}},
		{"generate --max-new-tokens 10⁹ past the context", []string{"generate", "--model", task.Model, "--prompt", "1+1=", "--mode", "raw", "--max-new-tokens", "1000000000"},
			[]string{"--max-new-tokens 1000000000 would take the sequence to", "max_position_embeddings " + strconv.Itoa(maxPos), "HINT: --max-new-tokens"}},
		{"generate --max-new-tokens 10⁹ within a long context", []string{"generate", "--model", long, "--tokenizer", tok, "--prompt", "1+1=", "--mode", "raw", "--max-new-tokens", "1000000000", "-n", "100000"},
			[]string{"generate: out of memory before starting", "lower -n or --max-new-tokens"}},
		{"generate: prompt past the context", []string{"generate", "--model", task.Model, "--prompt", strings.Repeat("7", maxPos+10), "--mode", "raw"},
			[]string{"--prompt has", "more than the model's max_position_embeddings " + strconv.Itoa(maxPos)}},
		{"generate: prompt and new tokens past the context", []string{"generate", "--model", task.Model, "--prompt", strings.Repeat("7", maxPos-100), "--mode", "raw", "--max-new-tokens", "256"},
			[]string{"--max-new-tokens 256 would take the sequence to", "HINT: --max-new-tokens"}},
		{"logits: ids past the context", []string{"logits", "--model", task.Model, "--ids", ids},
			[]string{"--ids has " + strconv.Itoa(maxPos+1) + " tokens, more than the model's max_position_embeddings"}},
		{"init-tiny, petabytes", []string{"init-tiny", "--out", filepath.Join(t.TempDir(), "big"), "--hidden", "1000000000", "--layers", "100"},
			[]string{"init-tiny: out of memory before starting", "lower --hidden, --intermediate, --layers or --vocab"}},
	} {
		out, err := runCmd(t, "", c.args...)
		if err == nil {
			t.Errorf("%s: no error\n%s", c.name, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(t.TempDir(), "big")); err == nil {
		t.Error("init-tiny wrote a folder it refused")
	}
}
