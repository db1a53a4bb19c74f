package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// hfWhite is the \s of the Hugging Face tokenizers library (Oniguruma's,
// Unicode White_Space) written out, so that the regexp2 oracle uses the same
// whitespace set as the reference (see isSpace).
const hfWhite = `\t\n\v\f\r \x{0085}\x{00a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`

// oraclePattern is QwenSplitRegex as the reference runs it: the (?i:…) group
// spelled out with the case folding of Oniguruma (U+017F ſ folds to s, see
// contraction) and \s / \S replaced by hfWhite.
var oraclePattern = strings.NewReplacer(
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)`, `'(?:[sS\x{017f}]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])`,
	`[^\s\p{L}\p{N}]`, `[^`+hfWhite+`\p{L}\p{N}]`,
	`(?!\S)`, `(?![^`+hfWhite+`])`,
	`\s`, `[`+hfWhite+`]`,
).Replace(QwenSplitRegex)

// oracleSplit splits s with the regex compiled by regexp2 (a backtracking
// engine with look-ahead), keeping unmatched stretches as pieces.
func oracleSplit(t testing.TB, re *regexp2.Regexp, s string) []string {
	t.Helper()
	var out []string
	runes := []rune(s)
	prev := 0
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		if m.Index > prev {
			out = append(out, string(runes[prev:m.Index]))
		}
		out = append(out, m.String())
		prev = m.Index + m.Length
	}
	if err != nil {
		t.Fatal(err)
	}
	if prev < len(runes) {
		out = append(out, string(runes[prev:]))
	}
	return out
}

func scannerSplit(s string) []string {
	var out []string
	pretokenize(s, func(p string) { out = append(out, p) })
	return out
}

func compileOracle(t testing.TB) *regexp2.Regexp {
	re, err := regexp2.Compile(oraclePattern, regexp2.None)
	if err != nil {
		t.Fatalf("regexp2 cannot compile %q: %v", oraclePattern, err)
	}
	return re
}

func TestPretokenizeExamples(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"Hello  world", []string{"Hello", " ", " world"}},
		{"don't", []string{"don", "'t"}},
		{"DON'T", []string{"DON", "'T"}},
		{"it'sn'T'LL", []string{"it", "'s", "n", "'T", "'LL"}},
		{"'rx", []string{"'rx"}},
		{"x  \n\n  y", []string{"x", "  \n\n", " ", " y"}},
		{"a \r\n", []string{"a", " \r\n"}},
		{"a   ", []string{"a", "   "}},
		{"a \tb", []string{"a", " ", "\tb"}},
		{"12345", []string{"1", "2", "3", "4", "5"}},
		{"x=1;\n\ny", []string{"x", "=", "1", ";\n\n", "y"}},
		{" !!", []string{" !!"}},
		{"  !", []string{" ", " !"}},
		{"!!a", []string{"!!", "a"}},
		{"!a", []string{"!a"}},
		{"中文 😀!", []string{"中文", " 😀!"}},
		{"\u00a0x", []string{"\u00a0x"}},
		{"a\u3000\u3000b", []string{"a", "\u3000", "\u3000b"}},
		{"\r\nx", []string{"\r\n", "x"}},
		{"\n x", []string{"\n", " x"}},
		{" \n \n  x", []string{" \n \n", " ", " x"}},
		// U+0085 is whitespace, U+FEFF is not (Oniguruma's \s, not ECMAScript's).
		{"a\u0085\u0085b", []string{"a", "\u0085", "\u0085b"}},
		{"a \u0085", []string{"a", " \u0085"}},
		{"\u0085\n", []string{"\u0085\n"}},
		{"a\ufeff\ufeffb", []string{"a", "\ufeff\ufeff", "b"}},
		{"a \ufeff", []string{"a", " \ufeff"}},
		{"  \ufeffx", []string{" ", " \ufeff", "x"}},
		// 'ſ (U+017F) is a contraction: ſ folds to s.
		{"it'ſt", []string{"it", "'\u017f", "t"}},
		{"'\u017f'S", []string{"'\u017f", "'S"}},
	}
	re := compileOracle(t)
	for _, tc := range tests {
		got := scannerSplit(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("pretokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if o := oracleSplit(t, re, tc.in); !slices.Equal(o, tc.want) && len(tc.want) > 0 {
			t.Errorf("regexp2 oracle disagrees with the table for %q: %q", tc.in, o)
		}
	}
}

// TestPretokenizeMatchesRegexp2 compares the scanner with the regex on the
// golden corpus and on random strings over an alphabet chosen to exercise
// every branch (letters, digits, quotes, ſ, CR/LF, several kinds of space,
// punctuation, combining marks, CJK, emoji).
func TestPretokenizeMatchesRegexp2(t *testing.T) {
	re := compileOracle(t)
	check := func(s string) {
		t.Helper()
		if got, want := scannerSplit(s), oracleSplit(t, re, s); !slices.Equal(got, want) {
			t.Fatalf("pretokenize(%q)\n got %q\nwant %q", trunc(s), got, want)
		}
	}
	for _, c := range loadGolden(t) {
		if c.Kind == "encode" && len(c.Text) < 20000 {
			check(c.Text)
		}
	}
	alphabet := []rune("aZé中'sStTrReEvVmMlLdDſ09٣½ \t\n\r\v\f\u00a0\u2000\u2028\u3000\ufeff\u0085!?.,-_$\\{}()\u0301😀")
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		k := rng.IntN(16)
		var b strings.Builder
		for range k {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		check(b.String())
	}
}

func FuzzPretokenize(f *testing.F) {
	for _, s := range []string{"", "Hello world", "a  \n\n b", "don't", " !!\r\n", "中文😀"} {
		f.Add(s)
	}
	re := compileOracle(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !isValidUTF8(s) {
			return
		}
		got := scannerSplit(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces of %q do not concatenate back: %q", s, got)
		}
		if want := oracleSplit(t, re, s); !slices.Equal(got, want) {
			t.Fatalf("pretokenize(%q) = %q, want %q", s, got, want)
		}
	})
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }
