package inspect

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tokenize runs Tokenize with stdin as standard input and returns what it
// printed.
func tokenize(stdin string, o TokenizeOptions) (string, error) {
	var out strings.Builder
	o.Stdin, o.Stdout = strings.NewReader(stdin), &out
	err := Tokenize(o)
	return out.String(), err
}

func tinyTokDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tok")
	if out, err := tokenize("", TokenizeOptions{WriteTiny: dir, TinyVocab: 512}); err != nil || !strings.Contains(out, "vocab 512") {
		t.Fatalf("--write-tiny: %v %s", err, out)
	}
	return dir
}

func TestTokenize(t *testing.T) {
	dir := tinyTokDir(t)
	text := "Let's think step by step <|im_end|> 中文"
	out, err := tokenize("", TokenizeOptions{Tokenizer: dir, JSON: true, Args: []string{text}})
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
	plain, err := tokenize(text+"\n", TokenizeOptions{Tokenizer: dir})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := parseTokenIDs(plain)
	if err != nil || !slices.Equal(ids, enc.IDs) {
		t.Fatalf("stdin ids %v, want %v", ids, enc.IDs)
	}
	// And back.
	back, err := tokenize("", TokenizeOptions{Tokenizer: dir, Decode: true, Args: []string{strings.TrimSpace(plain)}})
	if err != nil || back != text+"\n" {
		t.Fatalf("--decode: %q %v", back, err)
	}
	back, _ = tokenize("", TokenizeOptions{Tokenizer: dir, Decode: true, SkipSpecial: true, Args: []string{strings.TrimSpace(plain)}})
	if strings.Contains(back, "<|im_end|>") {
		t.Errorf("--skip-special kept the special token: %q", back)
	}
	chat, err := tokenize("", TokenizeOptions{Tokenizer: dir, Chat: true, Tokens: true, Args: []string{"hi"}})
	if err != nil || !strings.Contains(chat, `rendered: "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"`) {
		t.Errorf("--chat: %v\n%s", err, chat)
	}
	pieces, _ := tokenize("", TokenizeOptions{Tokenizer: dir, Pieces: true, Args: []string{"a  b"}})
	if pieces != "\"a\"\n\" \"\n\" b\"\n" {
		t.Errorf("--pieces: %q", pieces)
	}
	// Ids outside the vocabulary are an error (never dropped silently).
	for _, ids := range []string{"1 512 2", "5,-1"} {
		if _, err := tokenize("", TokenizeOptions{Tokenizer: dir, Decode: true, Args: []string{ids}}); err == nil || !strings.Contains(err.Error(), "not in the tokenizer's vocabulary") {
			t.Errorf("--decode %q: %v, want an out-of-vocabulary error", ids, err)
		}
	}
	for name, bad := range map[string]TokenizeOptions{
		"--decode 1 x 2":          {Tokenizer: dir, Decode: true, Args: []string{"1 x 2"}},
		"a missing --tokenizer":   {Tokenizer: filepath.Join(dir, "missing"), Args: []string{"x"}},
		"--write-tiny --vocab 10": {WriteTiny: filepath.Join(dir, "t2"), TinyVocab: 10},
	} {
		if _, err := tokenize("", bad); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}
