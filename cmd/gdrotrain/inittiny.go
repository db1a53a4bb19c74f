package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/export"
)

func newInitTinyCmd() *cobra.Command {
	o := export.TinyOptions{Model: model.DefaultTiny()}
	cmd := &cobra.Command{
		Use:   "init-tiny --out DIR",
		Short: "Write a random-initialised Qwen3 model folder (config.json + model.safetensors)",
		Long: `init-tiny writes a randomly initialised Qwen3 model in the Hugging Face
layout (config.json, generation_config.json, model.safetensors), loadable by
transformers' Qwen3ForCausalLM and by every gdrotrain command. Weights are
drawn as transformers initialises them: normal(0, init-std), norms at 1.
An --out that is, or is inside, a model folder, a checkpoint or a run folder
is refused unless --force (as for export).`,
		Example:      "  gdrotrain init-tiny --out /tmp/tiny --layers 2 --hidden 64 --heads 4 --kv-heads 2 --vocab 256",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return export.InitTiny(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "output folder (created if missing)")
	f.IntVar(&o.Model.Layers, "layers", o.Model.Layers, "number of decoder layers")
	f.IntVar(&o.Model.Hidden, "hidden", o.Model.Hidden, "hidden size")
	f.IntVar(&o.Model.Intermediate, "intermediate", o.Model.Intermediate, "MLP intermediate size")
	f.IntVar(&o.Model.Heads, "heads", o.Model.Heads, "attention (query) heads")
	f.IntVar(&o.Model.KVHeads, "kv-heads", o.Model.KVHeads, "key/value heads (GQA); must divide --heads")
	f.IntVar(&o.Model.HeadDim, "head-dim", o.Model.HeadDim, "per-head dimension (even)")
	f.IntVar(&o.Model.Vocab, "vocab", o.Model.Vocab, "vocabulary size")
	f.BoolVar(&o.Model.Tied, "tied", o.Model.Tied, "tie the LM head to the token embedding")
	f.Float64Var(&o.Model.RopeTheta, "rope-theta", o.Model.RopeTheta, "RoPE base")
	f.Float64Var(&o.Model.InitStd, "init-std", o.Model.InitStd, "standard deviation of the normal initialisation")
	f.IntSliceVar(&o.Model.EOS, "eos", nil, "end-of-sequence token ids (default: the last id)")
	f.Uint64Var(&o.Seed, "seed", 0, "random seed")
	f.BoolVar(&o.Force, "force", false, "write into an --out that is, or is inside, a model folder, a checkpoint or a run folder, replacing the model there")
	f.StringVar(&o.DType, "dtype", "float32", "storage dtype: float32, bfloat16 or float16")
	return cmd
}
