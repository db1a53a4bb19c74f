package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

func newInitTinyCmd() *cobra.Command {
	o := model.DefaultTiny()
	var out, dtype string
	var seed uint64
	var force bool
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
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			dt, err := model.ParseDType(dtype)
			if err != nil {
				return fmt.Errorf("--dtype: %w", err)
			}
			cfg, err := o.Config()
			if err != nil {
				return err
			}
			if err := initTinyPlan(cfg, dt).check(hostMemory(), "this machine"); err != nil {
				return err
			}
			b := cpu.NewBackend()
			p := model.RandomParams(b, cfg, seed, o.InitStd, 0)
			err = writeOut(cmd, out, force, func(dir string) error { return model.WriteFolder(dir, cfg, b, p, dt) })
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d layers, hidden %d, heads %d/%d, vocab %d, %d parameters (%s)\n",
				out, cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.VocabSize, cfg.NumParams(), dt.TorchName())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "output folder (created if missing)")
	f.IntVar(&o.Layers, "layers", o.Layers, "number of decoder layers")
	f.IntVar(&o.Hidden, "hidden", o.Hidden, "hidden size")
	f.IntVar(&o.Intermediate, "intermediate", o.Intermediate, "MLP intermediate size")
	f.IntVar(&o.Heads, "heads", o.Heads, "attention (query) heads")
	f.IntVar(&o.KVHeads, "kv-heads", o.KVHeads, "key/value heads (GQA); must divide --heads")
	f.IntVar(&o.HeadDim, "head-dim", o.HeadDim, "per-head dimension (even)")
	f.IntVar(&o.Vocab, "vocab", o.Vocab, "vocabulary size")
	f.BoolVar(&o.Tied, "tied", o.Tied, "tie the LM head to the token embedding")
	f.Float64Var(&o.RopeTheta, "rope-theta", o.RopeTheta, "RoPE base")
	f.Float64Var(&o.InitStd, "init-std", o.InitStd, "standard deviation of the normal initialisation")
	f.IntSliceVar(&o.EOS, "eos", nil, "end-of-sequence token ids (default: the last id)")
	f.Uint64Var(&seed, "seed", 0, "random seed")
	f.BoolVar(&force, "force", false, "write into an --out that is, or is inside, a model folder, a checkpoint or a run folder, replacing the model there")
	f.StringVar(&dtype, "dtype", "float32", "storage dtype: float32, bfloat16 or float16")
	return cmd
}

// initTinyPlan is what init-tiny holds: the fp32 weights and the file's
// encoded tensors.
func initTinyPlan(cfg *model.Config, dt model.DType) memPlan {
	w := paramBytes(cfg)
	const sizes = "--hidden, --intermediate, --layers or --vocab"
	return memPlan{command: "init-tiny", parts: []memPart{
		{"weights (fp32)", w, sizes}, {"model.safetensors (" + dt.TorchName() + ")", w / 4 * float64(dt.Size()), sizes}}}
}
