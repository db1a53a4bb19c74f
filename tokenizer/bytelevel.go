package tokenizer

import (
	"unicode/utf8"

	"github.com/sugarme/tokenizer/pretokenizer"
)

// byteChar maps a byte to its character in GPT-2's byte-level alphabet
// (printable bytes map to themselves, the others to U+0100…); charByte is
// the inverse. The table is sugarme's; bytelevel_test.go checks it against
// the published bytes_to_unicode construction.
var (
	byteChar [256]rune
	charByte = map[rune]byte{}
)

func init() {
	for b := 0; b < 256; b++ {
		r, _ := utf8.DecodeRuneInString(pretokenizer.BytesChar[uint8(b)])
		byteChar[b] = r
		charByte[r] = byte(b)
	}
}

// byteLevelDecode maps a byte-level token string back to its bytes; ok is
// false when a character is outside the alphabet.
func byteLevelDecode(tok string) ([]byte, bool) {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := charByte[r]
		if !ok {
			return nil, false
		}
		out = append(out, b)
	}
	return out, true
}
