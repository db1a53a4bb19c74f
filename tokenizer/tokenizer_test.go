package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func loadTiny(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(filepath.Join("testdata", "tiny512"))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTinyGolden: the tiny tokenizer encoded by the JS port
// (testdata/tiny512_golden.jsonl.gz, from scripts/tokenizer_golden.mjs;
// transformers gives the same ids on all 3,228 cases).
// Needs no fetched files.
func TestTinyGolden(t *testing.T) {
	tok := loadTiny(t)
	f, err := os.Open(filepath.Join("testdata", "tiny512_golden.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n := 0
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		n++
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("tiny: %q: got %v want %v", trunc(c.Text), got, c.IDs)
		}
		if got, want := tok.Decode(c.IDs, false), nfcSections(tok, c.Text); got != want {
			t.Errorf("tiny: round trip of %q = %q", trunc(c.Text), trunc(got))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 2000 {
		t.Errorf("tiny golden has %d cases", n)
	}
}

// TestByteTable checks sugarme's table against GPT-2's bytes_to_unicode.
func TestByteTable(t *testing.T) {
	want := map[int]rune{}
	order := gpt2ByteOrder()
	n := 0
	for _, b := range order {
		if (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff) {
			want[b] = rune(b)
		} else {
			want[b] = rune(256 + n)
			n++
		}
	}
	for b := 0; b < 256; b++ {
		if byteChar[b] != want[b] {
			t.Errorf("byte 0x%02x → %q, want %q", b, byteChar[b], want[b])
		}
	}
	if byteChar[' '] != 'Ġ' || byteChar['\n'] != 'Ċ' {
		t.Errorf("space/newline map to %q %q", byteChar[' '], byteChar['\n'])
	}
}

// TestBPELinearEqualsHeap: the two merge loops give the same ids.
func TestBPELinearEqualsHeap(t *testing.T) {
	for _, tok := range []*Tokenizer{loadTiny(t), loadQwen3(t)} {
		rng := rand.New(rand.NewPCG(3, 4))
		alphabet := []string{"a", "b", "e", "t", "h", "the", "ing", " ", "中", "😀", "x", "1"}
		for range 3000 {
			var b strings.Builder
			for range 1 + rng.IntN(40) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := b.String()
			if len(s) > linearMax {
				s = s[:linearMax]
			}
			lin := tok.bpe.encodeLinear(s, nil)
			heap := tok.bpe.encodeHeap(s, nil)
			if !slices.Equal(lin, heap) {
				t.Fatalf("%q: linear %v heap %v", s, lin, heap)
			}
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"abc", "abc"},
		{"\xe4\xb8", "\ufffd"},                 // truncated 3-byte sequence: one U+FFFD
		{"\xe4\xb8a", "\ufffda"},               //
		{"\xff\xfe", "\ufffd\ufffd"},           // two invalid bytes
		{"\xf0\x9f\x98", "\ufffd"},             // truncated emoji
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"}, // surrogate: ED then A0 is out of range
		{"\xe0\x80", "\ufffd\ufffd"},           // overlong
		{"\xc0\xaf", "\ufffd\ufffd"},           //
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\ufffd", "\ufffd"},
		{"a\xc3", "a\ufffd"},
	}
	for _, tc := range tests {
		got := string(appendLossy(nil, []byte(tc.in)))
		if got != tc.want {
			t.Errorf("lossy(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("lossy(%q) is not valid UTF-8", tc.in)
		}
	}
}

// TestEncodeInvalidUTF8: invalid input bytes become U+FFFD, never a panic.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok := loadTiny(t)
	got := tok.Decode(tok.Encode("a\xffb\xe4\xb8"), false)
	if got != "a\ufffdb\ufffd" {
		t.Errorf("got %q", got)
	}
}

func TestChatTemplateUnits(t *testing.T) {
	tok := loadTiny(t)
	f := false
	tests := []struct {
		name string
		msgs []Message
		opts ChatOptions
		want string
	}{
		{"user+gen", []Message{{Role: "user", Content: "Q"}}, ChatOptions{AddGenerationPrompt: true},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"},
		{"no gen", []Message{{Role: "user", Content: "Q"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n"},
		{"system", []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}}, ChatOptions{AddGenerationPrompt: true},
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"},
		{"thinking off", []Message{{Role: "user", Content: "Q"}}, ChatOptions{AddGenerationPrompt: true, EnableThinking: &f},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"last assistant gets think block", []Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n"},
		{"old reasoning dropped", []Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "<think>r</think>A"}, {Role: "user", Content: "Q2"}}, ChatOptions{},
			"<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"},
	}
	for _, tc := range tests {
		got, err := tok.ApplyChatTemplate(tc.msgs, tc.opts)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := tok.ApplyChatTemplate(nil, ChatOptions{}); err == nil {
		t.Error("no messages: want an error")
	}
	raw, err := tok.RenderPrompt([]Message{{Role: "user", Content: "just text"}}, PromptRaw)
	if err != nil || raw != "just text" {
		t.Errorf("raw = %q, %v", raw, err)
	}
	if _, err := ParsePromptMode("jinja"); err == nil {
		t.Error("ParsePromptMode(jinja): want an error")
	}
}

func TestTemplateKinds(t *testing.T) {
	plainChatML := "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	qwen25 := plainChatML + "{{ 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}"
	tests := []struct {
		tmpl    string
		kind    templateKind
		userErr bool // ApplyChatTemplate on a user turn fails
		asstErr bool // … on an assistant turn fails
	}{
		{qwen3ChatTemplate, templateQwen3, false, false},
		{plainChatML, templateChatML, false, true},
		{qwen25, templateOther, true, true},
		{"", templateNone, true, true},
		{"{{ messages }}", templateOther, true, true},
	}
	for i, tc := range tests {
		tok := loadTiny(t)
		tok.template = classifyTemplate(tc.tmpl)
		if tok.template != tc.kind {
			t.Errorf("case %d: kind %d, want %d", i, tok.template, tc.kind)
		}
		_, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, ChatOptions{AddGenerationPrompt: true})
		if (err != nil) != tc.userErr {
			t.Errorf("case %d: user turn err = %v", i, err)
		}
		_, err = tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}, {Role: "assistant", Content: "y"}}, ChatOptions{})
		if (err != nil) != tc.asstErr {
			t.Errorf("case %d: assistant turn err = %v", i, err)
		}
	}
}

// TestLoadErrors: unsupported or broken tokenizer files are refused with an
// error naming the file and the reason, never a panic.
func TestLoadErrors(t *testing.T) {
	good, cfg, err := TinyFiles(300)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, wantErr string
	}{
		{"not json", "{", "[", "parse"},
		{"other regex", `(?i:'s|'t|'re|'ve|'m|'ll|'d)|`, ``, "Split"},
		{"normalizer", `{"type": "NFC"}`, `{"type": "NFKC"}`, "normalizer"},
		{"model type", `"type": "BPE"`, `"type": "WordPiece"`, "model type"},
		{"byte fallback", `"byte_fallback": false`, `"byte_fallback": true`, "byte_fallback"},
		{"lstrip", `"lstrip": false`, `"lstrip": true`, "lstrip"},
		{"bad merge", `"merges": [`, `"merges": [["zzzz", "qqqq"],`, "merges[0]"},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		bad := strings.Replace(string(good), tc.old, tc.new, 1)
		if bad == string(good) {
			t.Fatalf("%s: replacement did not apply", tc.name)
		}
		os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(bad), 0o644)
		os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "tokenizer.json") {
			t.Errorf("%s: err = %v, want one mentioning %q and the file", tc.name, err, tc.wantErr)
		}
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("empty dir: want an error")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), good, 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(strings.Replace(string(cfg), `"eos_token": "<|im_end|>"`, `"eos_token": "<nope>"`, 1)), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "eos_token") {
		t.Errorf("unknown eos: err = %v", err)
	}
	// Old-style "a b" merges load too.
	tok, err := LoadFiles(filepath.Join("testdata", "tiny512", "tokenizer.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, ChatOptions{}); err == nil {
		t.Error("no config: want ErrNoChatTemplate")
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := loadTiny(t)
	text := strings.Repeat("Let's think step by step about 2015 cards. ", 50)
	want := tok.Encode(text)
	done := make(chan []int)
	for range 8 {
		go func() { done <- tok.Encode(text) }()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatal("concurrent Encode differs")
		}
	}
}
