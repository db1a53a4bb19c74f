package model

import (
	"strings"
	"testing"
)

// TestCheckContext: a sequence within max_position_embeddings passes; a
// prompt past it, one that fills it with tokens still to generate, and one
// whose new tokens would pass it are refused, naming the flag and the
// largest value that fits.
func TestCheckContext(t *testing.T) {
	c := &Config{MaxPositionEmbeddings: 100}
	for _, tc := range []struct {
		name              string
		prompt, newTokens int
		want              string // "": accepted
	}{
		{"fits exactly", 60, 40, ""},
		{"no generation, whole context", 100, 0, ""},
		{"prompt past the context", 101, 0, "--prompt has 101 tokens, more than the model's max_position_embeddings 100"},
		{"no room to generate", 100, 1, "no room to generate (--max-new-tokens 1)"},
		{"new tokens past the context", 60, 41, "would take the sequence to 101, past the model's max_position_embeddings 100 (HINT: --max-new-tokens 40 at most)"},
		{"no int overflow", 60, 1<<31 - 1, "would take the sequence to 2147483707"},
	} {
		err := c.CheckContext("--prompt", tc.prompt, tc.newTokens, "--max-new-tokens")
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
