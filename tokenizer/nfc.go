package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// nfc is NFC as the Hugging Face tokenizers library computes it. Its
// normalizer (the crate unicode-normalization-alignments 0.1.12) has Unicode
// 9.0 tables, where a character assigned later is inert: combining class 0,
// no decomposition, no composition. Go's tables (x/text, Unicode 15.0) know
// some of those as combining marks or parts of compositions (lateNormalizing,
// generated: nfc_table.go), so where one occurs the text is cut there, the
// pieces between are normalized apart and the character itself is kept as it
// is. That is Unicode 9.0's NFC: such a character is a starter that composes
// with nothing, so nothing is reordered or composed across it, and the
// normalization of characters assigned by 9.0 is the same in every later
// version (Unicode's normalization stability). For the same reason a string
// that is NFC by the newer tables is NFC by 9.0's, the common fast path.
func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	i := indexLate(s)
	if i < 0 {
		return norm.NFC.String(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		_, w := utf8.DecodeRuneInString(s[i:])
		b.WriteString(norm.NFC.String(s[:i]))
		b.WriteString(s[i : i+w])
		s = s[i+w:]
		i = indexLate(s)
	}
	b.WriteString(norm.NFC.String(s))
	return b.String()
}

// lateMin is the first code point of lateNormalizing.
var lateMin = rune(lateNormalizing.R16[0].Lo)

// indexLate returns the byte index of the first rune of s in
// lateNormalizing, or -1.
func indexLate(s string) int {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if r >= lateMin && unicode.Is(lateNormalizing, r) {
			return i
		}
		i += w
	}
	return -1
}
