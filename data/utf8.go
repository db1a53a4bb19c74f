package data

// Invalid UTF-8 in a row is not an error (such rows exist in scraped math
// data), but it is never silent: each invalid sequence becomes U+FFFD, as
// encoding/json does for JSONL, and ReadFile counts the rows and says so.

import (
	"unicode/utf8"
)

// utf8Tally counts the rows of one file that held invalid UTF-8.
type utf8Tally struct {
	rows  int
	first int // 0-based data row of the first, valid when rows > 0
}

func (u *utf8Tally) add(row int) {
	if u.rows == 0 {
		u.first = row
	}
	u.rows++
}

// sanitizeUTF8 replaces invalid UTF-8 in every string of a decoded row (in
// place; maps and slices as rowToPrompt reads them) and reports whether it
// found any.
func sanitizeUTF8(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if utf8.ValidString(x) {
			return x, false
		}
		return toValidUTF8(x), true
	case map[string]any:
		found := false
		for k, e := range x {
			var f bool
			x[k], f = sanitizeUTF8(e)
			found = found || f
		}
		return x, found
	case []any:
		found := false
		for i, e := range x {
			var f bool
			x[i], f = sanitizeUTF8(e)
			found = found || f
		}
		return x, found
	}
	return v, false
}

// toValidUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func toValidUTF8(s string) string {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		out = append(out, r) // RuneError for an invalid byte
		i += size
	}
	return string(out)
}
