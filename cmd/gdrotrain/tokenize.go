package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// defaultTokenizerDir is where `make fixtures` puts Qwen3's tokenizer files.
const defaultTokenizerDir = ".cache/qwen3-tokenizer"

// loadTokenizerFlag loads --tokenizer, defaulting to the fixtures folder.
func loadTokenizerFlag(dir string) (*tokenizer.Tokenizer, string, error) {
	if dir == "" {
		if _, err := os.Stat(filepath.Join(defaultTokenizerDir, "tokenizer.json")); err != nil {
			return nil, "", errors.New("--tokenizer DIR is required (a folder with tokenizer.json, e.g. a Qwen3 checkpoint; " +
				"`make fixtures` puts Qwen3's in .cache/qwen3-tokenizer, `gdrotrain tokenize --write-tiny DIR` writes a small one)")
		}
		dir = defaultTokenizerDir
	}
	tok, err := tokenizer.Load(dir)
	return tok, dir, err
}

func newTokenizeCmd() *cobra.Command {
	var (
		dir, writeTiny             string
		tinyVocab                  int
		decode, chat, skipSpecial  bool
		asJSON, showTokens, pieces bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize [TEXT...]",
		Short: "Encode text to token ids, or decode ids to text, with a Hugging Face tokenizer.json",
		Long: `tokenize encodes TEXT (the arguments joined by spaces, or standard input when
there are none) with the tokenizer in --tokenizer and prints the ids, exactly as
the Hugging Face tokenizer would (no special tokens are added; special tokens
written in the text are recognized). --chat first renders the text as a user
turn with the checkpoint's chat template and an open assistant turn, as
apply_chat_template(..., add_generation_prompt=True) does. --decode reads ids
(separated by spaces or commas, JSON brackets allowed) and prints the text.
--write-tiny writes a small self-contained tokenizer instead.`,
		Example: `  gdrotrain tokenize --tokenizer .cache/qwen3-tokenizer "Hello, world!"
  echo 'What is $1+1$?' | gdrotrain tokenize --chat --tokens
  gdrotrain tokenize --decode "9707 11 1879 0"
  gdrotrain tokenize --write-tiny /tmp/tiny-tok --vocab 512`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if writeTiny != "" {
				if err := tokenizer.WriteTiny(writeTiny, tinyVocab); err != nil {
					return err
				}
				fmt.Fprintf(out, "wrote %s/tokenizer.json and tokenizer_config.json (vocab %d)\n", writeTiny, tinyVocab)
				return nil
			}
			tok, _, err := loadTokenizerFlag(dir)
			if err != nil {
				return err
			}
			input := strings.Join(args, " ")
			if len(args) == 0 || (len(args) == 1 && args[0] == "-") {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read standard input: %w", err)
				}
				input = strings.TrimSuffix(string(b), "\n")
			}
			if decode {
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
				text := tok.Decode(ids, skipSpecial)
				if asJSON {
					return json.NewEncoder(out).Encode(map[string]any{"ids": ids, "text": text})
				}
				fmt.Fprintln(out, text)
				return nil
			}
			text := input
			if chat {
				text, err = tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: input}}, tokenizer.ChatOptions{AddGenerationPrompt: true})
				if err != nil {
					return err
				}
			}
			ids := tok.Encode(text)
			switch {
			case asJSON:
				toks := make([]string, len(ids))
				for i, id := range ids {
					toks[i] = string(tok.TokenBytes(id))
				}
				return json.NewEncoder(out).Encode(map[string]any{"text": text, "ids": ids, "tokens": toks})
			case pieces:
				for _, p := range tok.Pieces(text) {
					fmt.Fprintf(out, "%q\n", p)
				}
			case showTokens:
				if chat {
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
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "tokenizer", "", "folder with tokenizer.json and tokenizer_config.json (default "+defaultTokenizerDir+" when present)")
	f.BoolVar(&decode, "decode", false, "decode ids to text instead of encoding")
	f.BoolVar(&skipSpecial, "skip-special", false, "with --decode: drop special tokens (skip_special_tokens=True)")
	f.BoolVar(&chat, "chat", false, "render the text as a user turn with the chat template and an open assistant turn first")
	f.BoolVar(&showTokens, "tokens", false, "print one token per line: id and its bytes")
	f.BoolVar(&pieces, "pieces", false, "print the pre-tokenizer's pieces instead of ids")
	f.BoolVar(&asJSON, "json", false, "print JSON {text, ids, tokens}")
	f.StringVar(&writeTiny, "write-tiny", "", "write a small self-contained tokenizer to this folder and exit")
	f.IntVar(&tinyVocab, "vocab", 512, "with --write-tiny: vocabulary size (added tokens included)")
	return cmd
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
