package reward

// Python string semantics that the reference scorers depend on. The
// reference runs on Python str (code points), Python's Unicode `\s`, and
// str.isdigit/str.strip; these helpers reproduce them so that the reference
// modes agree with verl byte for byte.

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// pyIsSpace is Python's str.isspace for one code point, which is also what
// `\s` matches in a str pattern: Go's unicode.IsSpace plus U+001C–U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() with no arguments.
func pyStrip(s string) string {
	return strings.TrimFunc(s, pyIsSpace)
}

// pyDigitRanges lists the code points with Numeric_Type=Digit that are not in
// category Nd (superscripts, subscripts, circled and parenthesized digits…):
// Python's str.isdigit accepts them, unicode.IsDigit does not.
var pyDigitRanges = [][2]rune{
	{0x00B2, 0x00B3}, {0x00B9, 0x00B9}, {0x1369, 0x1371}, {0x19DA, 0x19DA},
	{0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468},
	{0x2474, 0x247C}, {0x2488, 0x2490}, {0x24EA, 0x24EA}, {0x24F5, 0x24FD},
	{0x24FF, 0x24FF}, {0x2776, 0x277E}, {0x2780, 0x2788}, {0x278A, 0x2792},
	{0x10A40, 0x10A43}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x1F100, 0x1F10A},
}

func pyIsDigitRune(r rune) bool {
	if unicode.IsDigit(r) {
		return true
	}
	for _, g := range pyDigitRanges {
		if r >= g[0] && r <= g[1] {
			return true
		}
	}
	return false
}

// pyIsDigit is Python's str.isdigit: non-empty and every code point a digit.
func pyIsDigit(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !pyIsDigitRune(r) {
			return false
		}
	}
	return true
}

// lastRunes is Python's s[-n:] on a str: the last n code points. An invalid
// UTF-8 byte counts as one code point.
func lastRunes(s string, n int) string {
	i := len(s)
	for k := 0; k < n && i > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// firstRune returns the first code point of s and its width (0 for "").
func firstRune(s string) (string, int) {
	if s == "" {
		return "", 0
	}
	_, size := utf8.DecodeRuneInString(s)
	return s[:size], size
}

// foldAnswerAt reports whether s[i:] starts with "answer" under Python's
// re.IGNORECASE in Unicode mode, and returns the byte length matched. Besides
// ASCII case, Python folds U+017F (ſ, long s) to 's'; no other code point
// folds to a letter of "answer".
func foldAnswerAt(s string, i int) (int, bool) {
	const word = "answer"
	j := i
	for k := 0; k < len(word); k++ {
		if j >= len(s) {
			return 0, false
		}
		c := s[j]
		if c < utf8.RuneSelf {
			if c|0x20 != word[k] {
				return 0, false
			}
			j++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		if word[k] != 's' || r != 0x017F {
			return 0, false
		}
		j += size
	}
	return j - i, true
}

// skipPySpace returns the first index at or after i that is not Python whitespace.
func skipPySpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !pyIsSpace(r) {
			break
		}
		i += size
	}
	return i
}
