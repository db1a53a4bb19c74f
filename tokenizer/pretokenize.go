package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Character classes of the Split regex (see QwenSplitRegex).
const (
	clsOther  uint8 = iota // [^\s\p{L}\p{N}]
	clsLetter              // \p{L}
	clsNumber              // \p{N}
	clsSpace               // \s
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = classOfSlow(rune(c))
	}
}

// isSpace is the \s of the Hugging Face tokenizers library (Oniguruma with
// Unicode, i.e. the White_Space property): TAB, LF, VT, FF, CR, SPACE, NEL
// (U+0085), NBSP, U+1680, U+2000–U+200A, LS, PS, U+202F, U+205F and U+3000.
// Not U+FEFF, which ECMAScript's \s (the JS port's) includes and which lacks
// NEL.
func isSpace(r rune) bool {
	switch {
	case r == ' ' || (r >= '\t' && r <= '\r'):
		return true
	case r < 0x80:
		return false
	case r == 0x85 || r == 0xa0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 ||
		r == 0x202f || r == 0x205f || r == 0x3000:
		return true
	}
	return false
}

func classOfSlow(r rune) uint8 {
	switch {
	case isSpace(r):
		return clsSpace
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	}
	return clsOther
}

// runeAt decodes the rune at s[i:] and its class. s must be valid UTF-8.
func runeAt(s string, i int) (rune, int, uint8) {
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, w, classOfSlow(r)
}

// contraction returns the length in bytes of a contraction suffix ('s 't 're
// 've 'm 'll 'd) at the start of s, or 0. The group is case-insensitive with
// Unicode case folding, as Oniguruma matches it: besides ASCII's two cases,
// U+017F LATIN SMALL LETTER LONG S folds to s, so 'ſ is a contraction too
// (U+212A KELVIN SIGN folds to k, which no contraction holds; no other
// character folds to one of these letters).
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	lower := func(c byte) byte { return c | 0x20 }
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && lower(s[1]) == 'l' {
			return 2
		}
	}
	if strings.HasPrefix(s, "\u017f") {
		return len("\u017f")
	}
	return 0
}

// pretokenize calls emit with each piece of s, in order, exactly as
// splitting s with QwenSplitRegex (behaviour Isolated) does. s must be valid
// UTF-8. The regex's alternatives are tried in order at each position and
// the first that matches wins (leftmost-first); the comments give the match
// each alternative produces once its backtracking is worked out. Every
// character is a letter, number, whitespace or "other", and one of the
// alternatives always matches a non-empty prefix, so there are no gaps.
func pretokenize(s string, emit func(piece string)) {
	for i := 0; i < len(s); {
		r, w, c := runeAt(s, i)

		// 1. '(?:s|t|re|ve|m|ll|d) — case-insensitive (see contraction).
		if r == '\'' {
			if k := contraction(s[i+1:]); k > 0 {
				emit(s[i : i+1+k])
				i += 1 + k
				continue
			}
		}

		// 2. [^\r\n\p{L}\p{N}]?\p{L}+ — a letter run, optionally preceded by one
		// character that is not CR, LF, a letter or a number. When the optional
		// character is taken but no letter follows, backtracking drops it and
		// \p{L}+ must start at i, which then is no letter: no match.
		if c == clsLetter {
			j := scanClass(s, i+w, clsLetter)
			emit(s[i:j])
			i = j
			continue
		}
		if c != clsNumber && r != '\r' && r != '\n' && i+w < len(s) {
			if _, w2, c2 := runeAt(s, i+w); c2 == clsLetter {
				j := scanClass(s, i+w+w2, clsLetter)
				emit(s[i:j])
				i = j
				continue
			}
		}

		// 3. \p{N} — one number character.
		if c == clsNumber {
			emit(s[i : i+w])
			i += w
			continue
		}

		// 4. " ?[^\s\p{L}\p{N}]+[\r\n]*" — an optional space, a run of "other"
		// characters, then any CR/LF. Taking the space and failing makes the run
		// start at the space, which is \s: no match, so the space is taken only
		// when an "other" character follows.
		start := -1
		if c == clsOther {
			start = i + w
		} else if r == ' ' && i+1 < len(s) {
			if _, w2, c2 := runeAt(s, i+1); c2 == clsOther {
				start = i + 1 + w2
			}
		}
		if start >= 0 {
			j := scanClass(s, start, clsOther)
			for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
				j++
			}
			emit(s[i:j])
			i = j
			continue
		}

		// Only whitespace is left (c == clsSpace). Let [i, e) be the maximal
		// whitespace run.
		e := scanClass(s, i+w, clsSpace)

		// 5. \s*[\r\n]+ — \s* first takes the whole run, then gives characters
		// back until [\r\n]+ matches; it matches from the last CR/LF of the run
		// (then [\r\n]+ cannot extend past it, or it would not be the last). So
		// the match ends just after the run's last CR or LF, if it has one.
		if last := lastNewline(s[i:e]); last >= 0 {
			emit(s[i : i+last+1])
			i += last + 1
			continue
		}

		// 6. \s+(?!\S) — the whole run if it ends the text; otherwise the run
		// less its last character (which is followed by \S), when that leaves
		// at least one character.
		if e == len(s) {
			emit(s[i:e])
			i = e
			continue
		}
		if _, lw := utf8.DecodeLastRuneInString(s[i:e]); e-lw > i {
			emit(s[i : e-lw])
			i = e - lw
			continue
		}

		// 7. \s+ — a single whitespace character followed by \S.
		emit(s[i:e])
		i = e
	}
}

// scanClass returns the end of the run of characters of class cls starting at i.
func scanClass(s string, i int, cls uint8) int {
	for i < len(s) {
		_, w, c := runeAt(s, i)
		if c != cls {
			break
		}
		i += w
	}
	return i
}

func lastNewline(s string) int {
	for k := len(s) - 1; k >= 0; k-- {
		if s[k] == '\n' || s[k] == '\r' {
			return k
		}
	}
	return -1
}
