package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/inspect"
)

func newTokenizeCmd() *cobra.Command {
	var o inspect.TokenizeOptions
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
			o.Args, o.Stdin, o.Stdout = args, cmd.InOrStdin(), cmd.OutOrStdout()
			return inspect.Tokenize(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Tokenizer, "tokenizer", "", "folder with tokenizer.json and tokenizer_config.json (default "+inspect.DefaultTokenizerDir+" when present)")
	f.BoolVar(&o.Decode, "decode", false, "decode ids to text instead of encoding")
	f.BoolVar(&o.SkipSpecial, "skip-special", false, "with --decode: drop special tokens (skip_special_tokens=True)")
	f.BoolVar(&o.Chat, "chat", false, "render the text as a user turn with the chat template and an open assistant turn first")
	f.BoolVar(&o.Tokens, "tokens", false, "print one token per line: id and its bytes")
	f.BoolVar(&o.Pieces, "pieces", false, "print the pre-tokenizer's pieces instead of ids")
	f.BoolVar(&o.JSON, "json", false, "print JSON {text, ids, tokens}")
	f.StringVar(&o.WriteTiny, "write-tiny", "", "write a small self-contained tokenizer to this folder and exit")
	f.IntVar(&o.TinyVocab, "vocab", 512, "with --write-tiny: vocabulary size (added tokens included)")
	return cmd
}
