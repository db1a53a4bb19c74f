package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Config is the subset of a Hugging Face Qwen3 config.json that defines the
// architecture. Fields we do not implement are decoded too, so Validate can
// refuse them by name instead of silently computing something else.
type Config struct {
	ModelType             string   `json:"model_type"`
	Architectures         []string `json:"architectures,omitempty"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	HiddenAct             string   `json:"hidden_act"`
	TorchDtype            string   `json:"torch_dtype,omitempty"`
	BosTokenID            *int     `json:"bos_token_id,omitempty"`
	EOSTokenIDs           TokenIDs `json:"eos_token_id"`

	// Features Qwen3-Base does not use; decoded only to be refused.
	AttentionBias    bool            `json:"attention_bias"`
	UseSlidingWindow bool            `json:"use_sliding_window"`
	RopeScaling      json.RawMessage `json:"rope_scaling,omitempty"`
	// transformers ≥ 5 writes RoPE settings here ({"rope_type", "rope_theta"})
	// and no top-level rope_theta; read so that such a checkpoint does not
	// silently run with the default base.
	RopeParameters   json.RawMessage `json:"rope_parameters,omitempty"`
	NewDtype         string          `json:"dtype,omitempty"` // transformers ≥ 4.56 writes "dtype"
	InitializerRange float64         `json:"initializer_range,omitempty"`
}

// TokenIDs decodes a token id field that config.json may write as a single
// integer or as a list (Qwen3 checkpoints use both forms).
type TokenIDs []int

// UnmarshalJSON accepts an integer, a list of integers or null.
func (t *TokenIDs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*t = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var ids []int
		if err := json.Unmarshal(b, &ids); err != nil {
			return err
		}
		*t = ids
		return nil
	}
	var id int
	if err := json.Unmarshal(b, &id); err != nil {
		return fmt.Errorf("token id must be an integer or a list of integers: %w", err)
	}
	*t = TokenIDs{id}
	return nil
}

// MarshalJSON writes a single id as an integer, as transformers does.
func (t TokenIDs) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]int(t))
}

// Dtype returns the checkpoint's declared storage dtype ("bfloat16" when absent).
func (c *Config) Dtype() string {
	switch {
	case c.NewDtype != "":
		return c.NewDtype
	case c.TorchDtype != "":
		return c.TorchDtype
	}
	return "bfloat16"
}

// LoadConfig reads and validates DIR/config.json.
func LoadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// CheckContext refuses a sequence longer than the model's context: prompt
// tokens of what (the flag or file they come from), plus newTokens to
// generate (flag names the flag that sets them; "" for none).
func (c *Config) CheckContext(what string, prompt, newTokens int, flag string) error {
	maxPos := c.MaxPositionEmbeddings
	switch {
	case prompt > maxPos:
		return fmt.Errorf("%s has %d tokens, more than the model's max_position_embeddings %d", what, prompt, maxPos)
	case newTokens > 0 && prompt == maxPos:
		return fmt.Errorf("%s has %d tokens, the model's whole max_position_embeddings: no room to generate (%s %d)", what, prompt, flag, newTokens)
	case newTokens > 0 && int64(prompt)+int64(newTokens) > int64(maxPos):
		return fmt.Errorf("%s has %d tokens and %s %d would take the sequence to %d, past the model's max_position_embeddings %d (HINT: %s %d at most)",
			what, prompt, flag, newTokens, int64(prompt)+int64(newTokens), maxPos, flag, maxPos-prompt)
	}
	return nil
}

// ParseConfig decodes config.json bytes, fills defaults and validates.
func ParseConfig(raw []byte) (*Config, error) {
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if err := cfg.readRopeParameters(); err != nil {
		return nil, err
	}
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// fillDefaults applies the defaults transformers' Qwen3Config applies.
func (c *Config) fillDefaults() {
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 32768
	}
}

// Validate checks that the configuration describes a Qwen3 model this
// implementation computes exactly, and refuses the rest by name.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.ModelType != "qwen3" {
		bad("model_type %q is not supported (want \"qwen3\")", c.ModelType)
	}
	positive := []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim},
		{"vocab_size", c.VocabSize}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad("%s must be positive, got %d", p.name, p.v)
		}
	}
	if c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		bad("num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head_dim must be even for rotary embeddings, got %d", c.HeadDim)
	}
	if c.RMSNormEps <= 0 {
		bad("rms_norm_eps must be positive, got %g", c.RMSNormEps)
	}
	if c.RopeTheta <= 0 {
		bad("rope_theta must be positive, got %g", c.RopeTheta)
	}
	if c.HiddenAct != "silu" {
		bad("hidden_act %q is not supported (Qwen3 uses \"silu\")", c.HiddenAct)
	}
	if c.AttentionBias {
		bad("attention_bias=true is not supported (Qwen3 has no attention biases)")
	}
	if c.UseSlidingWindow {
		bad("use_sliding_window=true is not supported; set it to false (Qwen3 dense models do not use it)")
	}
	if err := checkRopeScaling(c.RopeScaling); err != nil {
		errs = append(errs, err)
	}
	for _, id := range c.EOSTokenIDs {
		if id < 0 || (c.VocabSize > 0 && id >= c.VocabSize) {
			bad("eos_token_id %d is outside the vocabulary [0, %d)", id, c.VocabSize)
		}
	}
	switch c.Dtype() {
	case "bfloat16", "float16", "float32":
	default:
		bad("dtype %q is not supported (want bfloat16, float16 or float32)", c.Dtype())
	}
	return errors.Join(errs...)
}

// checkRopeScaling accepts an absent rope_scaling or the "default" type and
// refuses every scaling scheme we have not implemented.
func checkRopeScaling(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var rs struct {
		RopeType string `json:"rope_type"`
		Type     string `json:"type"`
	}
	if err := json.Unmarshal(raw, &rs); err != nil {
		return fmt.Errorf("rope_scaling: %w", err)
	}
	typ := rs.RopeType
	if typ == "" {
		typ = rs.Type
	}
	if typ == "default" || typ == "" {
		return nil
	}
	return fmt.Errorf("rope_scaling type %q is not implemented; only unscaled RoPE is supported (remove rope_scaling or set it to null)", typ)
}

// ropeParameters is transformers 5's rope_parameters object.
type ropeParameters struct {
	RopeType  string   `json:"rope_type"`
	RopeTheta *float64 `json:"rope_theta"`
}

// readRopeParameters takes rope_theta from rope_parameters (transformers ≥ 5)
// and refuses a scaled RoPE there as checkRopeScaling does for rope_scaling,
// and a base that contradicts a top-level rope_theta.
func (c *Config) readRopeParameters() error {
	raw := bytes.TrimSpace(c.RopeParameters)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var rp ropeParameters
	if err := json.Unmarshal(raw, &rp); err != nil {
		return fmt.Errorf("rope_parameters: %w (want {\"rope_type\": \"default\", \"rope_theta\": …})", err)
	}
	if rp.RopeType != "default" && rp.RopeType != "" {
		return fmt.Errorf("rope_parameters rope_type %q is not implemented; only unscaled RoPE is supported", rp.RopeType)
	}
	if rp.RopeTheta == nil {
		return nil
	}
	if c.RopeTheta != 0 && c.RopeTheta != *rp.RopeTheta {
		return fmt.Errorf("rope_theta %g and rope_parameters.rope_theta %g disagree", c.RopeTheta, *rp.RopeTheta)
	}
	c.RopeTheta = *rp.RopeTheta
	return nil
}

// KVGroups is the number of query heads that share one key/value head.
func (c *Config) KVGroups() int { return c.NumAttentionHeads / c.NumKeyValueHeads }

// NumParams counts the parameters (the LM head counted once when tied).
func (c *Config) NumParams() int64 {
	C, F, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	Q, KV, D := int64(c.NumAttentionHeads*c.HeadDim), int64(c.NumKeyValueHeads*c.HeadDim), int64(c.HeadDim)
	layer := C*Q + 2*C*KV + Q*C + 3*C*F + 2*C + 2*D
	n := V*C + int64(c.NumHiddenLayers)*layer + C
	if !c.TieWordEmbeddings {
		n += V * C
	}
	return n
}
