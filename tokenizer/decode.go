package tokenizer

import "unicode/utf8"

// Decode returns the text of ids, as Hugging Face's
// decode(ids, skip_special_tokens=skipSpecial) for Qwen3
// (clean_up_tokenization_spaces=False): the ids' bytes are concatenated and
// each maximal invalid UTF-8 subsequence becomes one U+FFFD. Ids the
// tokenizer does not know (a model's padded embedding rows) are skipped, as
// Hugging Face skips them.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(t.idBytes) || (skipSpecial && t.special[id]) {
			continue
		}
		buf = append(buf, t.idBytes[id]...)
	}
	return lossyString(buf)
}

// Decode32 is Decode for int32 ids.
func (t *Tokenizer) Decode32(ids []int32, skipSpecial bool) string {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.idBytes) || (skipSpecial && t.special[id]) {
			continue
		}
		buf = append(buf, t.idBytes[id]...)
	}
	return lossyString(buf)
}

// TokenBytes returns the raw bytes id decodes to (nil for an unknown id).
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.idBytes) {
		return nil
	}
	return t.idBytes[id]
}

func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(appendLossy(nil, b))
}

// appendLossy appends b to dst with every maximal subpart of an ill-formed
// UTF-8 sequence replaced by U+FFFD: the "substitution of maximal subparts"
// practice of Unicode §3.9, used by WHATWG's TextDecoder, Rust's
// String::from_utf8_lossy and Python's errors="replace".
func appendLossy(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		r, w := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || w == 3 { // w==3: a literal U+FFFD in the input
			dst = append(dst, b[i:i+w]...)
			i += w
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return dst
}

// maximalSubpart returns the length (≥ 1) of the longest prefix of b that
// starts a well-formed UTF-8 sequence without completing it. b[0] is not the
// start of a complete valid sequence.
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf) // allowed range of the second byte
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c >= 0xe1 && c <= 0xec, c == 0xee, c == 0xef:
		need = 2
	case c == 0xed:
		need, hi = 2, 0x9f
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 {
			if x < lo || x > hi {
				break
			}
		} else if x < 0x80 || x > 0xbf {
			break
		}
		n++
	}
	return n
}
