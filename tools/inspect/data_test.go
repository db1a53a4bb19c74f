package inspect

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inspectData runs Data with the training defaults (template auto, chat
// mode, no length limit) under o's other settings and returns what it
// printed.
func inspectData(o DataOptions) (string, error) {
	var out strings.Builder
	if o.Template == "" {
		o.Template = "auto"
	}
	if o.Mode == "" {
		o.Mode = "chat"
	}
	o.Stdout, o.Stderr = &out, io.Discard
	err := Data(o)
	return out.String(), err
}

func TestDataInspect(t *testing.T) {
	dir := tinyTokDir(t)
	file := filepath.Join("..", "..", "data", "testdata", "dapo_math_sample.jsonl")
	out, err := inspectData(DataOptions{Tokenizer: dir, MaxPromptLength: 150, Files: []string{file}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"format: jsonl-simple, 77 rows",
		"  problem: string",
		"data sources: open-r1/DAPO-Math-17k-Processed (77)",
		`UIDs: 77 unique, e.g. "dapo_math_17k-0"`,
		"prompt length in tokens (chat mode",
		"over --max-prompt-length 150:",
		"sample prompt 0 (uid dapo_math_17k-0",
		"<|im_start|>user\nSolve the following math problem step by step.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	raw, err := inspectData(DataOptions{Tokenizer: dir, Mode: "raw", Sample: 3, Files: []string{file}})
	if err != nil || strings.Contains(raw, "<|im_start|>") || !strings.Contains(raw, "sample prompt 3") {
		t.Errorf("raw mode: %v\n%s", err, raw)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(`{"id": "a", "problem": "P", "answer": "1"}`+"\n"+`{"id": "b", "problem": "Q"}`+"\n"), 0o644)
	if _, err := inspectData(DataOptions{Tokenizer: dir, Files: []string{bad}}); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2 (row 1)") {
		t.Errorf("bad row: err = %v", err)
	}
	out, err = inspectData(DataOptions{Tokenizer: dir, SkipBadRows: true, Files: []string{bad}})
	if err != nil || !strings.Contains(out, "1 rows (1 bad rows skipped)") {
		t.Errorf("--skip-bad-rows: %v\n%s", err, out)
	}
}
