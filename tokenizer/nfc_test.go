package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// TestNFCUnicode9: nfc against the normalizer of tokenizers 0.23.1
// (transformers' backend_tokenizer.normalizer.normalize_str), which leaves
// characters assigned after Unicode 9.0 inert.
func TestNFCUnicode9(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"cafe\u0301", "caf\u00e9"},
		{"a\u07fd\u0301", "a\u07fd\u0301"}, // Go alone: "\u00e1\u07fd"
		{"a\u0898\u0316", "a\u0898\u0316"}, // Go alone: "a\u0316\u0898"
		{"\U00011935\U00011930", "\U00011935\U00011930"},
		{"e\u0301\u0898e\u0301", "\u00e9\u0898\u00e9"},
		{"a\u0316\u0301\u1df6\u0316\u0301", "\u00e1\u0316\u1df6\u0316\u0301"},
		{"A\u030a\u0d3b\u212b", "\u00c5\u0d3b\u00c5"},
	}
	for _, tc := range tests {
		if got := nfc(tc.in); got != tc.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", tc.in, got, tc.want)
		}
	}
}

// TestNFCProperties: nfc is Go's NFC on text without lateNormalizing runes,
// is idempotent, and keeps every lateNormalizing rune where it was.
func TestNFCProperties(t *testing.T) {
	alphabet := []rune("aAeE\u00e9\u212b\u0301\u0316\u0327\u030a\u0323\u07fd\u0898\u0d3b\u1df6\u0c3c\U00011935\U00011930\u1100\u1161\u11a8 x")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		got := nfc(s)
		if indexLate(s) < 0 && got != norm.NFC.String(s) {
			t.Fatalf("nfc(%+q) = %+q, want norm.NFC's %+q", s, got, norm.NFC.String(s))
		}
		if again := nfc(got); again != got {
			t.Fatalf("nfc not idempotent on %+q: %+q then %+q", s, got, again)
		}
		late := func(x string) string {
			return strings.Map(func(r rune) rune {
				if unicode.Is(lateNormalizing, r) {
					return r
				}
				return -1
			}, x)
		}
		if late(got) != late(s) {
			t.Fatalf("nfc(%+q) = %+q moved or changed a late character", s, got)
		}
	}
}
