// Package infer runs a model outside training: sampling completions of a
// prompt with the trainer's sampler (Generate) and a token sequence's
// logits for comparison with other implementations (Logits). `gdrotrain
// generate` and `gdrotrain logits` are their flags and one call; the
// errors name those flags.
package infer

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/internal/progress"
	"github.com/gdrotrain/gdrotrain/launch"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// GenerateOptions are generate's settings, the flags of `gdrotrain
// generate`.
type GenerateOptions struct {
	// Model is the model folder (--model), Tokenizer its tokenizer's
	// (--tokenizer; "": Model).
	Model, Tokenizer string
	// Prompt is the user message (--prompt), Mode how it is rendered
	// (--mode: chat or raw).
	Prompt, Mode string
	// N is the number of completions (-n).
	N int
	// Sampling are the sampler's settings (temperature, top-p, top-k,
	// max new tokens, CUDA graphs, seed); Generate sets the stop ids, the
	// slots and the KV budget.
	Sampling sampler.Params
	// KVCacheGiB pages the KV cache within this many GiB (--kv-cache-gib;
	// 0: every slot at full length).
	KVCacheGiB float64
	// JSON prints one JSON object per completion (--json).
	JSON   bool
	Device launch.Device
	// Stdout gets the completions, Stderr the device's log and progress.
	Stdout, Stderr io.Writer
}

// Generate samples o.N completions of the prompt and prints them. A prompt
// that with the new tokens would pass the model's context, or a run that
// would not fit the device's memory, is refused before the weights load.
func Generate(ctx context.Context, o GenerateOptions) error {
	if o.Model == "" || o.Prompt == "" {
		return fmt.Errorf("--model and --prompt are required")
	}
	if o.N < 1 {
		return fmt.Errorf("-n %d: want at least 1 completion", o.N)
	}
	if o.Tokenizer == "" {
		o.Tokenizer = o.Model
	}
	if err := model.VerifyModelFolder(o.Model); err != nil {
		return err
	}
	pm, err := tokenizer.ParsePromptMode(o.Mode)
	if err != nil {
		return fmt.Errorf("--mode: %w", err)
	}
	if !(o.KVCacheGiB >= 0) {
		return fmt.Errorf("--kv-cache-gib %v: want ≥ 0 (0: every slot at full length)", o.KVCacheGiB)
	}
	tok, err := tokenizer.Load(o.Tokenizer)
	if err != nil {
		return err
	}
	ids, err := tok.EncodePrompt([]tokenizer.Message{{Role: "user", Content: o.Prompt}}, pm)
	if err != nil {
		return err
	}
	p := o.Sampling
	mc, err := model.FolderConfig(o.Model)
	if err != nil {
		return err
	}
	if err := mc.CheckContext("--prompt", len(ids), p.MaxNewTokens, "--max-new-tokens"); err != nil {
		return err
	}
	plan := memplan.Generate(mc, o.Device.MatMul == "bf16", o.N, len(ids), p.MaxNewTokens, o.KVCacheGiB)
	m, err := o.Device.LoadModel(o.Model, &plan, o.Stderr)
	if err != nil {
		return err
	}
	for _, id := range tok.StopIDs() {
		p.StopIDs = append(p.StopIDs, int32(id))
	}
	for _, id := range m.Cfg.EOSTokenIDs {
		p.StopIDs = append(p.StopIDs, int32(id))
	}
	p.MaxSlots = max(o.N, 1)
	p.KVBudgetBytes = int64(o.KVCacheGiB * (1 << 30))
	bar := progress.New(o.N, "sequences")
	out, err := sampler.Generate(ctx, m, []sampler.Request{{UID: o.Prompt, Prompt: tokenizer.Int32s(ids), N: o.N}}, p, bar)
	bar.Finish()
	if err != nil {
		return err
	}
	o.print(tok, out[0])
	return nil
}

// print writes the completions as text or JSON lines.
func (o GenerateOptions) print(tok *tokenizer.Tokenizer, cs []sampler.Completion) {
	for _, c := range cs {
		text := tok.Decode32(c.Tokens, true)
		if o.JSON {
			line, _ := json.Marshal(map[string]any{"index": c.Index, "text": text, "tokens": c.Tokens, "stopped": c.Stopped, "truncated": c.Truncated})
			fmt.Fprintln(o.Stdout, string(line))
			continue
		}
		end := "stop"
		if c.Truncated {
			end = "max_new_tokens"
		}
		fmt.Fprintf(o.Stdout, "--- completion %d (%d tokens, %s)\n%s\n", c.Index, len(c.Tokens), end, text)
	}
}
