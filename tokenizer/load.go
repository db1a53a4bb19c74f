package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// QwenSplitRegex is the Split pre-tokenizer pattern of Qwen2 and Qwen3
// tokenizer.json files; it is the only pattern this package implements.
const QwenSplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// AddedToken is an entry of tokenizer.json's "added_tokens".
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// Tokenizer encodes and decodes text; it is safe for concurrent use.
type Tokenizer struct {
	vocab   map[string]int // byte-level token string → id (model vocabulary)
	idBytes [][]byte       // id → raw bytes it decodes to; nil for unused ids
	idToken []string       // id → token string as in tokenizer.json
	special []bool         // id → special (skipped by Decode(ids, true))
	added   []AddedToken
	addedM  *addedMatcher
	bpe     *bpeModel

	config       Config
	template     templateKind
	templateFile string

	cacheMu sync.RWMutex
	cache   map[string][]int32
}

// Config is the part of tokenizer_config.json the trainer needs.
type Config struct {
	EOSToken     string `json:"-"`
	PadToken     string `json:"-"`
	BOSToken     string `json:"-"`
	ChatTemplate string `json:"-"`
	// ModelMaxLength is model_max_length (0 when absent).
	ModelMaxLength int `json:"-"`
}

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
func Load(dir string) (*Tokenizer, error) {
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if _, err := os.Stat(cfg); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		cfg = ""
	}
	return LoadFiles(filepath.Join(dir, "tokenizer.json"), cfg)
}

// LoadFiles reads a tokenizer.json and an optional tokenizer_config.json
// (configPath "" skips it: no chat template, no EOS name).
func LoadFiles(tokenizerPath, configPath string) (*Tokenizer, error) {
	raw, err := os.ReadFile(tokenizerPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parseTokenizerJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", tokenizerPath, err)
	}
	if configPath != "" {
		rawCfg, err := os.ReadFile(configPath)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		if err := t.parseConfig(rawCfg); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", configPath, err)
		}
		t.templateFile = configPath
	}
	return t, nil
}

type jsonTokenizer struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

type jsonTyped struct {
	Type string `json:"type"`
}

type jsonByteLevel struct {
	Type           string `json:"type"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       bool   `json:"use_regex"`
}

type jsonSplit struct {
	Type    string `json:"type"`
	Pattern struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// checkPipeline refuses any tokenizer.json whose normalizer, pre-tokenizer,
// post-processor or decoder is not the Qwen2/Qwen3 one: this package
// implements exactly that pipeline and nothing approximately.
func checkPipeline(j *jsonTokenizer) error {
	if !isNull(j.Normalizer) {
		var n jsonTyped
		if err := json.Unmarshal(j.Normalizer, &n); err != nil {
			return fmt.Errorf("normalizer: %w", err)
		}
		if n.Type != "NFC" {
			return fmt.Errorf("normalizer %q is not supported (only NFC or none)", n.Type)
		}
	}
	var seq struct {
		Type          string            `json:"type"`
		Pretokenizers []json.RawMessage `json:"pretokenizers"`
	}
	if err := json.Unmarshal(j.PreTokenizer, &seq); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	if seq.Type != "Sequence" || len(seq.Pretokenizers) != 2 {
		return fmt.Errorf("pre_tokenizer %q is not supported (want Sequence[Split, ByteLevel] as in Qwen3)", seq.Type)
	}
	var split jsonSplit
	if err := json.Unmarshal(seq.Pretokenizers[0], &split); err != nil {
		return fmt.Errorf("pre_tokenizer[0]: %w", err)
	}
	if split.Type != "Split" || split.Pattern.Regex == nil || *split.Pattern.Regex != QwenSplitRegex ||
		split.Behavior != "Isolated" || split.Invert {
		return fmt.Errorf("pre_tokenizer[0] is not the Qwen2/Qwen3 Split (regex %q, Isolated, invert=false)", QwenSplitRegex)
	}
	var bl jsonByteLevel
	if err := json.Unmarshal(seq.Pretokenizers[1], &bl); err != nil {
		return fmt.Errorf("pre_tokenizer[1]: %w", err)
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex {
		return fmt.Errorf("pre_tokenizer[1] must be ByteLevel with add_prefix_space=false, use_regex=false")
	}
	for name, raw := range map[string]json.RawMessage{"post_processor": j.PostProcessor, "decoder": j.Decoder} {
		if isNull(raw) {
			if name == "decoder" {
				return fmt.Errorf("decoder is missing (want ByteLevel)")
			}
			continue
		}
		var d jsonByteLevel
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if d.Type != "ByteLevel" || d.AddPrefixSpace {
			return fmt.Errorf("%s %q is not supported (want ByteLevel without prefix space)", name, d.Type)
		}
	}
	m := &j.Model
	switch {
	case m.Type != "BPE" && m.Type != "":
		return fmt.Errorf("model type %q is not supported (want BPE)", m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("BPE dropout is not supported")
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return fmt.Errorf("BPE continuing_subword_prefix is not supported")
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("BPE end_of_word_suffix is not supported")
	case m.ByteFallback:
		return fmt.Errorf("BPE byte_fallback is not supported")
	case m.IgnoreMerges:
		return fmt.Errorf("BPE ignore_merges is not supported")
	case len(m.Vocab) == 0:
		return fmt.Errorf("model.vocab is empty")
	}
	return nil
}

// parseMerges accepts both serializations: ["a b", …] (tokenizers < 0.20)
// and [["a","b"], …].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("model.merges: want [[a, b], …] or [\"a b\", …]: %w", err)
	}
	pairs = make([][2]string, len(lines))
	for i, l := range lines {
		k := bytes.IndexByte([]byte(l), ' ')
		if k < 0 {
			return nil, fmt.Errorf("model.merges[%d] = %q has no space", i, l)
		}
		pairs[i] = [2]string{l[:k], l[k+1:]}
	}
	return pairs, nil
}

func parseTokenizerJSON(raw []byte) (*Tokenizer, error) {
	var j jsonTokenizer
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := checkPipeline(&j); err != nil {
		return nil, err
	}
	merges, err := parseMerges(j.Model.Merges)
	if err != nil {
		return nil, err
	}
	bpe, err := newBPE(j.Model.Vocab, merges)
	if err != nil {
		return nil, err
	}
	n := 0
	for tok, id := range j.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("model.vocab[%q] = %d is negative", tok, id)
		}
		n = max(n, id+1)
	}
	for i, a := range j.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("added_tokens[%d]: bad id %d or empty content", i, a.ID)
		}
		if a.LStrip || a.RStrip || a.SingleWord || a.Normalized {
			return nil, fmt.Errorf("added_tokens[%d] %q: lstrip/rstrip/single_word/normalized are not supported", i, a.Content)
		}
		n = max(n, a.ID+1)
	}
	t := &Tokenizer{
		vocab:   j.Model.Vocab,
		idBytes: make([][]byte, n),
		idToken: make([]string, n),
		special: make([]bool, n),
		added:   j.AddedTokens,
		bpe:     bpe,
		cache:   make(map[string][]int32),
	}
	for tok, id := range j.Model.Vocab {
		b, ok := byteLevelDecode(tok)
		if !ok {
			return nil, fmt.Errorf("model.vocab[%q]: not a byte-level token", tok)
		}
		t.idBytes[id] = b
		t.idToken[id] = tok
	}
	for _, a := range j.AddedTokens {
		if b, ok := byteLevelDecode(a.Content); ok {
			// Hugging Face's ByteLevel decoder maps an added token through the
			// byte table when every character is in it, else keeps its bytes.
			t.idBytes[a.ID] = b
		} else {
			t.idBytes[a.ID] = []byte(a.Content)
		}
		t.idToken[a.ID] = a.Content
		t.special[a.ID] = a.Special
	}
	contents := make([]string, len(j.AddedTokens))
	ids := make([]int, len(j.AddedTokens))
	for i, a := range j.AddedTokens {
		contents[i], ids[i] = a.Content, a.ID
	}
	t.addedM = newAddedMatcher(contents, ids)
	return t, nil
}

func (t *Tokenizer) parseConfig(raw []byte) error {
	var c map[string]json.RawMessage
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	tokenName := func(key string) (string, error) {
		v, ok := c[key]
		if !ok || isNull(v) {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			return s, nil
		}
		var obj struct {
			Content string `json:"content"`
		}
		if err := json.Unmarshal(v, &obj); err != nil {
			return "", fmt.Errorf("%s: want a string or {content}: %w", key, err)
		}
		return obj.Content, nil
	}
	var err error
	if t.config.EOSToken, err = tokenName("eos_token"); err != nil {
		return err
	}
	if t.config.PadToken, err = tokenName("pad_token"); err != nil {
		return err
	}
	if t.config.BOSToken, err = tokenName("bos_token"); err != nil {
		return err
	}
	for key, name := range map[string]string{"eos_token": t.config.EOSToken, "pad_token": t.config.PadToken, "bos_token": t.config.BOSToken} {
		if name != "" {
			if _, ok := t.TokenID(name); !ok {
				return fmt.Errorf("%s %q is not in the vocabulary", key, name)
			}
		}
	}
	if v, ok := c["model_max_length"]; ok {
		var f float64
		if err := json.Unmarshal(v, &f); err == nil && f > 0 && f < 1e15 {
			t.config.ModelMaxLength = int(f)
		}
	}
	if v, ok := c["chat_template"]; ok && !isNull(v) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err2 := json.Unmarshal(v, &named); err2 != nil {
				return fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
			}
			for _, nt := range named {
				if nt.Name == "default" {
					s = nt.Template
				}
			}
		}
		t.config.ChatTemplate = s
	}
	t.template = classifyTemplate(t.config.ChatTemplate)
	return nil
}

// Config returns the settings read from tokenizer_config.json.
func (t *Tokenizer) Config() Config { return t.config }

// VocabSize is one more than the largest id (model vocabulary and added
// tokens); a model's embedding may be larger.
func (t *Tokenizer) VocabSize() int { return len(t.idToken) }

// TokenID returns the id of a vocabulary or added token given as its
// tokenizer.json string (byte-level form for vocabulary tokens).
func (t *Tokenizer) TokenID(token string) (int, bool) {
	for _, a := range t.added {
		if a.Content == token {
			return a.ID, true
		}
	}
	id, ok := t.vocab[token]
	return id, ok
}

// Token returns the tokenizer.json string of id.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.idToken) || t.idBytes[id] == nil {
		return "", false
	}
	return t.idToken[id], true
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// AddedTokens returns the added tokens sorted by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := append([]AddedToken(nil), t.added...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// EOSID returns the id of tokenizer_config.json's eos_token.
func (t *Tokenizer) EOSID() (int, bool) {
	if t.config.EOSToken == "" {
		return 0, false
	}
	return t.TokenID(t.config.EOSToken)
}

// PadID returns the id of tokenizer_config.json's pad_token.
func (t *Tokenizer) PadID() (int, bool) {
	if t.config.PadToken == "" {
		return 0, false
	}
	return t.TokenID(t.config.PadToken)
}

// StopIDs returns the ids generation should stop at: the configured EOS plus
// <|im_end|> and <|endoftext|> when present (Qwen3-Base configs name
// <|endoftext|>, chat configs <|im_end|>; docs/algorithm.md §11 item 19).
func (t *Tokenizer) StopIDs() []int {
	var out []int
	seen := map[int]bool{}
	addTok := func(s string) {
		if id, ok := t.TokenID(s); ok && s != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	addTok(t.config.EOSToken)
	addTok("<|im_end|>")
	addTok("<|endoftext|>")
	return out
}
