package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

func newExportCmd() *cobra.Command {
	var ckpt, out, dtype string
	var shardGB float64
	cmd := &cobra.Command{
		Use:   "export --checkpoint DIR --out HF_DIR [--dtype bf16]",
		Short: "Write a checkpoint's policy as a Hugging Face model folder (transformers / vLLM)",
		Long: `export verifies a checkpoint (manifest, checksums) and writes its policy as a
Hugging Face folder: config.json (torch_dtype set to --dtype),
generation_config.json, the tokenizer files, and the weights as safetensors,
sharded with model.safetensors.index.json when larger than --shard-gb.
AutoModelForCausalLM.from_pretrained and vLLM load it unchanged.`,
		Example:      "  gdrotrain export --checkpoint runs/demo/grpo-prompt-gdro/checkpoints/step_00000100 --out /tmp/hf --dtype bf16",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if ckpt == "" || out == "" {
				return fmt.Errorf("--checkpoint and --out are required")
			}
			dt, err := model.ParseDType(dtype)
			if err != nil {
				return fmt.Errorf("--dtype: %w", err)
			}
			if _, err := checkpoint.Verify(ckpt); err != nil {
				return err
			}
			m, err := model.Load(cpu.NewBackend(), ckpt)
			if err != nil {
				return err
			}
			if err := model.WriteFolderSharded(out, m.Cfg, m.B, m.P, dt, int64(shardGB*(1<<30))); err != nil {
				return err
			}
			if err := tokenizer.CopyFiles(ckpt, out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %s → %s (%s, %.1fM parameters)\n", ckpt, out, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ckpt, "checkpoint", "", "checkpoint folder (RUN/checkpoints/step_NNNNNNNN)")
	f.StringVar(&out, "out", "", "output Hugging Face folder")
	f.StringVar(&dtype, "dtype", "bf16", "weight dtype: bf16, fp16 or fp32")
	f.Float64Var(&shardGB, "shard-gb", 5, "largest shard in GiB (0: one file)")
	return cmd
}
