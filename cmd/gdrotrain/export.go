package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/export"
)

func newExportCmd() *cobra.Command {
	var o export.Options
	cmd := &cobra.Command{
		Use:   "export --checkpoint DIR --out HF_DIR [--dtype bf16] [--adapter] [--base DIR] [--force]",
		Short: "Write a checkpoint's policy as a Hugging Face model folder (transformers / vLLM), or a LoRA checkpoint's adapters",
		Long: `export verifies a checkpoint (manifest, checksums) and writes its policy as a
Hugging Face folder: config.json (torch_dtype set to --dtype),
generation_config.json, the tokenizer files, and the weights as safetensors,
sharded with model.safetensors.index.json when larger than --shard-gb.
AutoModelForCausalLM.from_pretrained and vLLM load it unchanged.

A LoRA run's checkpoint holds adapters over a base model. Its base is the
folder the manifest records (--base names another copy), and its weights
must hash to the manifest's weights_sha256, or export refuses. By default
export writes the merged model, W + (alpha/r)·B·A for every adapted
projection (computed in float64, rounded once to --dtype), as a full
Hugging Face folder like the above; with --adapter it writes the PEFT
adapter folder instead (adapter_config.json naming the base folder,
adapter_model.safetensors in --dtype, the tokenizer files), which
peft.PeftModel.from_pretrained and vLLM's LoRA support load over the base.

--out must be a new folder (or an empty one, or one holding no model): a
folder that is, or is inside, a checkpoint, a run folder or a model folder
(the checkpoint's own, the base model's) is refused unless --force, which
replaces the model there (the weights, index and manifest the new files do
not replace are removed, so the folder holds one model). The files are
written into a temporary folder beside --out and moved into place.`,
		Example: `  gdrotrain export --checkpoint runs/demo/grpo-prompt-gdro/checkpoints/step_00000100 --out /tmp/hf --dtype bf16
  gdrotrain export --checkpoint runs/lora/t/checkpoints/step_00000100 --out /tmp/lora --adapter --dtype fp32`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ShardGBSet = cmd.Flags().Changed("shard-gb")
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return export.Run(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Checkpoint, "checkpoint", "", "checkpoint folder (RUN/checkpoints/step_NNNNNNNN)")
	f.StringVar(&o.Out, "out", "", "output Hugging Face folder")
	f.StringVar(&o.DType, "dtype", "bf16", "weight dtype: bf16, fp16 or fp32")
	f.Float64Var(&o.ShardGB, "shard-gb", 5, "largest shard in GiB (0: one file)")
	f.BoolVar(&o.Adapter, "adapter", false, "LoRA checkpoint: write the PEFT adapter folder instead of the merged model")
	f.BoolVar(&o.Force, "force", false, "write into an --out that is, or is inside, a checkpoint, a run folder or a model folder, replacing the model there")
	f.StringVar(&o.Base, "base", "", "LoRA checkpoint: the base model folder (default: the one its manifest records); its weights must hash to the manifest's weights_sha256")
	return cmd
}
