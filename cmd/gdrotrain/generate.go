package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/infer"
)

func newGenerateCmd() *cobra.Command {
	var o infer.GenerateOptions
	p := &o.Sampling
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
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return infer.Generate(cmd.Context(), o)
		},
	}
	addDeviceFlags(cmd, &o.Device, "fp32")
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "Hugging Face model folder")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer folder (default: --model)")
	f.StringVar(&o.Prompt, "prompt", "", "the user message")
	f.StringVar(&o.Mode, "mode", "chat", "chat (apply the chat template) or raw")
	f.IntVarP(&o.N, "n", "n", 1, "completions to sample")
	f.Float64Var(&p.Temperature, "temperature", 1, "sampling temperature (0: greedy)")
	f.Float64Var(&p.TopP, "top-p", 1, "nucleus sampling mass")
	f.IntVar(&p.TopK, "top-k", 0, "keep the k most likely tokens (0: off)")
	f.IntVar(&p.MaxNewTokens, "max-new-tokens", 256, "maximum generated tokens")
	f.BoolVar(&p.Graphs, "cuda-graphs", true, "on CUDA, run each decode step as one CUDA graph with the draw on the GPU (sampling.cuda_graphs)")
	f.Float64Var(&o.KVCacheGiB, "kv-cache-gib", 0, "page the KV cache within this many GiB, pre-empting and recomputing completions when it is full (sampling.kv_cache_gib; 0: every slot at full length)")
	f.Uint64Var(&p.Seed, "seed", 0, "random seed")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per completion")
	return cmd
}
