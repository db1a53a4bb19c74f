// Package inspect looks into a tokenizer and datasets the way the trainer
// sees them: text to token ids and back (Tokenize) and a dataset's schema,
// rows and prompt lengths in tokens (Data). `gdrotrain tokenize` and
// `gdrotrain data inspect` are their flags and one call; the errors name
// those flags.
package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// DefaultTokenizerDir is where `make fixtures` puts Qwen3's tokenizer files.
const DefaultTokenizerDir = ".cache/qwen3-tokenizer"

// loadTokenizer loads dir (--tokenizer), defaulting to the fixtures folder,
// and says which folder it read.
func loadTokenizer(dir string) (*tokenizer.Tokenizer, string, error) {
	if dir == "" {
		if _, err := os.Stat(filepath.Join(DefaultTokenizerDir, "tokenizer.json")); err != nil {
			return nil, "", errors.New("--tokenizer DIR is required (a folder with tokenizer.json, e.g. a Qwen3 checkpoint; " +
				"`make fixtures` puts Qwen3's in .cache/qwen3-tokenizer, `gdrotrain tokenize --write-tiny DIR` writes a small one)")
		}
		dir = DefaultTokenizerDir
	}
	tok, err := tokenizer.Load(dir)
	return tok, dir, err
}

// TokenizeOptions are tokenize's settings, the flags of `gdrotrain
// tokenize`.
type TokenizeOptions struct {
	// Tokenizer is the folder with tokenizer.json (--tokenizer; "":
	// DefaultTokenizerDir when present).
	Tokenizer string
	// WriteTiny writes a small self-contained tokenizer of TinyVocab ids
	// to this folder instead (--write-tiny, --vocab).
	WriteTiny string
	TinyVocab int
	// Decode reads ids and prints the text (--decode), SkipSpecial drops
	// special tokens then (--skip-special).
	Decode, SkipSpecial bool
	// Chat renders the text as a user turn with the chat template and an
	// open assistant turn first (--chat).
	Chat bool
	// JSON, Tokens and Pieces choose the output (--json, --tokens,
	// --pieces; none: the ids on one line).
	JSON, Tokens, Pieces bool
	// Args is the text (joined by spaces); none, or "-", reads Stdin.
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
}

// Tokenize encodes the text (or decodes ids) and prints the result.
func Tokenize(o TokenizeOptions) error {
	if o.WriteTiny != "" {
		if err := tokenizer.WriteTiny(o.WriteTiny, o.TinyVocab); err != nil {
			return err
		}
		fmt.Fprintf(o.Stdout, "wrote %s/tokenizer.json and tokenizer_config.json (vocab %d)\n", o.WriteTiny, o.TinyVocab)
		return nil
	}
	tok, _, err := loadTokenizer(o.Tokenizer)
	if err != nil {
		return err
	}
	input := strings.Join(o.Args, " ")
	if len(o.Args) == 0 || (len(o.Args) == 1 && o.Args[0] == "-") {
		b, err := io.ReadAll(o.Stdin)
		if err != nil {
			return fmt.Errorf("read standard input: %w", err)
		}
		input = strings.TrimSuffix(string(b), "\n")
	}
	if o.Decode {
		return o.decode(tok, input)
	}
	return o.encode(tok, input)
}

// decode prints the text of the ids in input.
func (o TokenizeOptions) decode(tok *tokenizer.Tokenizer, input string) error {
	ids, err := parseTokenIDs(input)
	if err != nil {
		return err
	}
	// Decode skips unknown ids; a user asking to decode them is told.
	var unknown []string
	for _, id := range ids {
		if _, ok := tok.Token(id); !ok {
			unknown = append(unknown, strconv.Itoa(id))
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("--decode: %d ids are not in the tokenizer's vocabulary (ids 0…%d): %s", len(unknown), tok.VocabSize()-1, strings.Join(unknown[:min(len(unknown), 10)], " "))
	}
	text := tok.Decode(ids, o.SkipSpecial)
	if o.JSON {
		return json.NewEncoder(o.Stdout).Encode(map[string]any{"ids": ids, "text": text})
	}
	fmt.Fprintln(o.Stdout, text)
	return nil
}

// encode prints the ids of input (rendered as a chat turn with Chat).
func (o TokenizeOptions) encode(tok *tokenizer.Tokenizer, input string) error {
	out := o.Stdout
	text := input
	if o.Chat {
		var err error
		text, err = tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: input}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			return err
		}
	}
	ids := tok.Encode(text)
	switch {
	case o.JSON:
		toks := make([]string, len(ids))
		for i, id := range ids {
			toks[i] = string(tok.TokenBytes(id))
		}
		return json.NewEncoder(out).Encode(map[string]any{"text": text, "ids": ids, "tokens": toks})
	case o.Pieces:
		for _, p := range tok.Pieces(text) {
			fmt.Fprintf(out, "%q\n", p)
		}
	case o.Tokens:
		if o.Chat {
			fmt.Fprintf(out, "rendered: %q\n", text)
		}
		for _, id := range ids {
			fmt.Fprintf(out, "%7d  %q\n", id, tok.TokenBytes(id))
		}
		fmt.Fprintf(out, "%d tokens, %d bytes\n", len(ids), len(text))
	default:
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = strconv.Itoa(id)
		}
		fmt.Fprintln(out, strings.Join(s, " "))
	}
	return nil
}

// parseTokenIDs reads ids separated by spaces, commas or newlines, with optional
// JSON brackets.
func parseTokenIDs(s string) ([]int, error) {
	s = strings.NewReplacer("[", " ", "]", " ", ",", " ").Replace(s)
	var ids []int
	for _, f := range strings.Fields(s) {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--decode: %q is not a token id", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
