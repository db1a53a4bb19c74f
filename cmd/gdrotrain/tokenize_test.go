package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func tinyTokDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tok")
	if out, err := runCmd(t, "", "tokenize", "--write-tiny", dir, "--vocab", "512"); err != nil || !strings.Contains(out, "vocab 512") {
		t.Fatalf("--write-tiny: %v %s", err, out)
	}
	return dir
}

func TestTokenizeCmd(t *testing.T) {
	dir := tinyTokDir(t)
	text := "Let's think step by step <|im_end|> 中文"
	out, err := runCmd(t, "", "tokenize", "--tokenizer", dir, "--json", text)
	if err != nil {
		t.Fatal(err)
	}
	var enc struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(out), &enc); err != nil || enc.Text != text || len(enc.IDs) == 0 {
		t.Fatalf("--json output %q: %v", out, err)
	}
	// Plain output from standard input gives the same ids.
	plain, err := runCmd(t, text+"\n", "tokenize", "--tokenizer", dir)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := parseTokenIDs(plain)
	if err != nil || !slices.Equal(ids, enc.IDs) {
		t.Fatalf("stdin ids %v, want %v", ids, enc.IDs)
	}
	// And back.
	back, err := runCmd(t, "", "tokenize", "--tokenizer", dir, "--decode", strings.TrimSpace(plain))
	if err != nil || back != text+"\n" {
		t.Fatalf("--decode: %q %v", back, err)
	}
	back, _ = runCmd(t, "", "tokenize", "--tokenizer", dir, "--decode", "--skip-special", strings.TrimSpace(plain))
	if strings.Contains(back, "<|im_end|>") {
		t.Errorf("--skip-special kept the special token: %q", back)
	}
	chat, err := runCmd(t, "", "tokenize", "--tokenizer", dir, "--chat", "--tokens", "hi")
	if err != nil || !strings.Contains(chat, `rendered: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"`) {
		t.Errorf("--chat: %v\n%s", err, chat)
	}
	pieces, _ := runCmd(t, "", "tokenize", "--tokenizer", dir, "--pieces", "a  b")
	if pieces != "\"a\"\n\" \"\n\" b\"\n" {
		t.Errorf("--pieces: %q", pieces)
	}
	// Ids outside the vocabulary are an error (never dropped silently).
	for _, ids := range []string{"1 512 2", "5,-1"} {
		if _, err := runCmd(t, "", "tokenize", "--tokenizer", dir, "--decode", ids); err == nil || !strings.Contains(err.Error(), "not in the tokenizer's vocabulary") {
			t.Errorf("--decode %q: %v, want an out-of-vocabulary error", ids, err)
		}
	}
	for _, bad := range [][]string{
		{"tokenize", "--tokenizer", dir, "--decode", "1 x 2"},
		{"tokenize", "--tokenizer", filepath.Join(dir, "missing"), "x"},
		{"tokenize", "--write-tiny", filepath.Join(dir, "t2"), "--vocab", "10"},
	} {
		if _, err := runCmd(t, "", bad...); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
