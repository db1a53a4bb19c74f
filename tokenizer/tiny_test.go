package tokenizer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/tiny512 from TinyFiles(512)")

func TestWriteTinyLoads(t *testing.T) {
	for _, size := range []int{MinTinyVocab, 300, 512, 1024} {
		dir := t.TempDir()
		if err := WriteTiny(dir, size); err != nil {
			t.Fatalf("WriteTiny(%d): %v", size, err)
		}
		tok, err := Load(dir)
		if err != nil {
			t.Fatalf("Load tiny %d: %v", size, err)
		}
		if tok.VocabSize() != size {
			t.Errorf("tiny %d: VocabSize = %d", size, tok.VocabSize())
		}
		if eos, ok := tok.EOSID(); !ok || eos != size-len(qwen3Added)+2 {
			t.Errorf("tiny %d: EOSID = %d, %v", size, eos, ok)
		}
		msgs := []Message{{Role: "user", Content: "Compute $1+1$. Let's think step by step and output the final answer within \\boxed{}."}}
		s, err := tok.ApplyChatTemplate(msgs, ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := tok.Encode(s)
		if got := tok.Decode(ids, false); got != s {
			t.Errorf("tiny %d: round trip %q != %q", size, got, s)
		}
		t.Logf("tiny %d: chat prompt of %d bytes → %d tokens", size, len(s), len(ids))
	}
	if err := WriteTiny(t.TempDir(), MinTinyVocab-1); err == nil {
		t.Error("WriteTiny below the minimum size succeeded")
	}
	if err := WriteTiny(t.TempDir(), 1<<20); err == nil {
		t.Error("WriteTiny beyond the corpus succeeded")
	}
}

func TestWriteTinyDeterministic(t *testing.T) {
	a1, b1, err := TinyFiles(512)
	if err != nil {
		t.Fatal(err)
	}
	a2, b2, _ := TinyFiles(512)
	if !bytes.Equal(a1, a2) || !bytes.Equal(b1, b2) {
		t.Fatal("TinyFiles(512) is not deterministic")
	}
	// The committed fixture (also encoded by the JS reference, see
	// TestTinyGolden) is what WriteTiny(dir, 512) writes.
	for name, got := range map[string][]byte{"tokenizer.json": a1, "tokenizer_config.json": b1} {
		path := filepath.Join("testdata", "tiny512", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/tiny512/%s differs from TinyFiles(512); regenerate with `go test ./tokenizer -run TestWriteTinyDeterministic -update`", name)
		}
	}
}
