package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/internal/progress"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

func newGenerateCmd() *cobra.Command {
	var dir, tokDir, prompt, mode string
	var p sampler.Params
	var n int
	var asJSON bool
	var kvGiB float64
	var dev deviceFlags
	cmd := &cobra.Command{
		Use:   "generate --model DIR --prompt TEXT",
		Short: "Sample completions from a model with the KV-cached sampler",
		Long: `generate renders the prompt (the model's chat template with an open assistant
turn, or raw), samples -n completions with the same sampler the trainer uses
(per-sequence seeded randomness, stop on every EOS id), and prints them.
Temperature 0 is greedy. A prompt that with --max-new-tokens would pass the
model's max_position_embeddings is refused (the error says the largest
--max-new-tokens that fits), and so is a run whose weights, KV cache (-n
slots of prompt + --max-new-tokens tokens, or --kv-cache-gib) and results
would not fit the device's memory.`,
		Example:      "  gdrotrain generate --model runs/demo/model-warm --prompt '12+7=' --mode raw -n 4 --temperature 0.6",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" || prompt == "" {
				return fmt.Errorf("--model and --prompt are required")
			}
			if n < 1 {
				return fmt.Errorf("-n %d: want at least 1 completion", n)
			}
			if tokDir == "" {
				tokDir = dir
			}
			if err := model.VerifyModelFolder(dir); err != nil {
				return err
			}
			pm, err := tokenizer.ParsePromptMode(mode)
			if err != nil {
				return fmt.Errorf("--mode: %w", err)
			}
			if !(kvGiB >= 0) {
				return fmt.Errorf("--kv-cache-gib %v: want ≥ 0 (0: every slot at full length)", kvGiB)
			}
			tok, err := tokenizer.Load(tokDir)
			if err != nil {
				return err
			}
			ids, err := tok.EncodePrompt([]tokenizer.Message{{Role: "user", Content: prompt}}, pm)
			if err != nil {
				return err
			}
			mc, err := model.FolderConfig(dir)
			if err != nil {
				return err
			}
			if err := mc.CheckContext("--prompt", len(ids), p.MaxNewTokens, "--max-new-tokens"); err != nil {
				return err
			}
			plan := memplan.Generate(mc, dev.matmul == "bf16", n, len(ids), p.MaxNewTokens, kvGiB)
			m, err := loadModel(cmd, dir, dev, &plan)
			if err != nil {
				return err
			}
			for _, id := range tok.StopIDs() {
				p.StopIDs = append(p.StopIDs, int32(id))
			}
			for _, id := range m.Cfg.EOSTokenIDs {
				p.StopIDs = append(p.StopIDs, int32(id))
			}
			p.MaxSlots = max(n, 1)
			p.KVBudgetBytes = int64(kvGiB * (1 << 30))
			bar := progress.New(n, "sequences")
			out, err := sampler.Generate(cmd.Context(), m, []sampler.Request{{UID: prompt, Prompt: tokenizer.Int32s(ids), N: n}}, p, bar)
			bar.Finish()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, c := range out[0] {
				text := tok.Decode32(c.Tokens, true)
				if asJSON {
					line, _ := json.Marshal(map[string]any{"index": c.Index, "text": text, "tokens": c.Tokens, "stopped": c.Stopped, "truncated": c.Truncated})
					fmt.Fprintln(w, string(line))
					continue
				}
				end := "stop"
				if c.Truncated {
					end = "max_new_tokens"
				}
				fmt.Fprintf(w, "--- completion %d (%d tokens, %s)\n%s\n", c.Index, len(c.Tokens), end, text)
			}
			return nil
		},
	}
	addDeviceFlags(cmd, &dev, "fp32")
	f := cmd.Flags()
	f.StringVar(&dir, "model", "", "Hugging Face model folder")
	f.StringVar(&tokDir, "tokenizer", "", "tokenizer folder (default: --model)")
	f.StringVar(&prompt, "prompt", "", "the user message")
	f.StringVar(&mode, "mode", "chat", "chat (apply the chat template) or raw")
	f.IntVarP(&n, "n", "n", 1, "completions to sample")
	f.Float64Var(&p.Temperature, "temperature", 1, "sampling temperature (0: greedy)")
	f.Float64Var(&p.TopP, "top-p", 1, "nucleus sampling mass")
	f.IntVar(&p.TopK, "top-k", 0, "keep the k most likely tokens (0: off)")
	f.IntVar(&p.MaxNewTokens, "max-new-tokens", 256, "maximum generated tokens")
	f.BoolVar(&p.Graphs, "cuda-graphs", true, "on CUDA, run each decode step as one CUDA graph with the draw on the GPU (sampling.cuda_graphs)")
	f.Float64Var(&kvGiB, "kv-cache-gib", 0, "page the KV cache within this many GiB, pre-empting and recomputing completions when it is full (sampling.kv_cache_gib; 0: every slot at full length)")
	f.Uint64Var(&p.Seed, "seed", 0, "random seed")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per completion")
	return cmd
}
