package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

func newExportCmd() *cobra.Command {
	var o exportOptions
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
			return runExport(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ckpt, "checkpoint", "", "checkpoint folder (RUN/checkpoints/step_NNNNNNNN)")
	f.StringVar(&o.out, "out", "", "output Hugging Face folder")
	f.StringVar(&o.dtype, "dtype", "bf16", "weight dtype: bf16, fp16 or fp32")
	f.Float64Var(&o.shardGB, "shard-gb", 5, "largest shard in GiB (0: one file)")
	f.BoolVar(&o.adapter, "adapter", false, "LoRA checkpoint: write the PEFT adapter folder instead of the merged model")
	f.BoolVar(&o.force, "force", false, "write into an --out that is, or is inside, a checkpoint, a run folder or a model folder, replacing the model there")
	f.StringVar(&o.base, "base", "", "LoRA checkpoint: the base model folder (default: the one its manifest records); its weights must hash to the manifest's weights_sha256")
	return cmd
}

// exportOptions are export's flags.
type exportOptions struct {
	ckpt, out, dtype, base string
	shardGB                float64
	adapter, force         bool
}

// runExport checks the flags and the checkpoint, then writes its policy: a
// full model, or a LoRA checkpoint's adapters (--adapter) or its merged
// model.
func runExport(cmd *cobra.Command, o exportOptions) error {
	if o.ckpt == "" || o.out == "" {
		return fmt.Errorf("--checkpoint and --out are required")
	}
	dt, err := model.ParseDType(o.dtype)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	if !(o.shardGB >= 0 && o.shardGB <= maxShardGB) { // NaN fails both
		return fmt.Errorf("--shard-gb %v: want a size in GiB from 0 (one file) to %d", o.shardGB, maxShardGB)
	}
	man, err := checkpoint.Verify(o.ckpt)
	if err != nil {
		return err
	}
	if !model.IsAdapterFolder(o.ckpt) {
		return exportFull(cmd, o, dt)
	}
	if o.adapter && cmd.Flags().Changed("shard-gb") {
		return fmt.Errorf("--shard-gb: an adapter folder is one file (adapter_model.safetensors); drop --shard-gb or --adapter")
	}
	baseDir, err := model.AdapterBase(o.ckpt, man, o.base, "--base")
	if err != nil {
		return err
	}
	if err := o.checkMemory(baseDir, dt); err != nil {
		return err
	}
	m, err := model.LoadAdapted(cpu.NewBackend(), o.ckpt, baseDir)
	if err != nil {
		return err
	}
	if o.adapter {
		return exportAdapters(cmd, o, dt, m, baseDir)
	}
	return exportMerged(cmd, o, dt, m, baseDir)
}

// checkMemory refuses an export of the model in dir (its config.json) that
// this machine's memory cannot hold; a folder without a readable config
// fails later, when it loads, naming the file.
func (o exportOptions) checkMemory(dir string, dt model.DType) error {
	mc, err := model.LoadConfig(dir)
	if err != nil {
		return nil
	}
	return exportPlan(mc, dt, o.shardGB*(1<<30)).check(hostMemory(), "this machine")
}

// exportFull writes a full checkpoint's policy as a Hugging Face folder.
func exportFull(cmd *cobra.Command, o exportOptions, dt model.DType) error {
	if o.adapter || o.base != "" {
		flag := "--adapter"
		if !o.adapter {
			flag = "--base"
		}
		return fmt.Errorf("%s: %s is not a LoRA checkpoint (no %s): its policy is a full model, exported without it", flag, o.ckpt, model.AdapterConfigFile)
	}
	if err := o.checkMemory(o.ckpt, dt); err != nil {
		return err
	}
	m, err := model.Load(cpu.NewBackend(), o.ckpt)
	if err != nil {
		return err
	}
	err = writeOut(cmd, o.out, o.force, func(dir string) error {
		if err := model.WriteFolderSharded(dir, m.Cfg, m.B, m.P, dt, int64(o.shardGB*(1<<30))); err != nil {
			return err
		}
		return tokenizer.CopyFiles(o.ckpt, dir)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "exported %s → %s (%s, %.1fM parameters)\n", o.ckpt, o.out, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
	return nil
}

// exportAdapters writes a LoRA checkpoint's adapters as a PEFT folder
// naming its base folder.
func exportAdapters(cmd *cobra.Command, o exportOptions, dt model.DType, m *model.Model, baseDir string) error {
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		return err
	}
	err = writeOut(cmd, o.out, o.force, func(dir string) error {
		if err := model.SaveAdapters(m.B, m.Cfg, m.A, dir, abs, dt); err != nil {
			return err
		}
		return tokenizer.CopyFiles(o.ckpt, dir)
	})
	if err != nil {
		return err
	}
	n := 0
	for _, np := range m.A.Named(m.Cfg) {
		n += (*np.Ptr).Numel()
	}
	lc := m.A.LoRA
	fmt.Fprintf(cmd.OutOrStdout(), "exported the adapters of %s → %s (PEFT LoRA rank %d, alpha %v on %v over %s; %s, %.2fM parameters)\n",
		o.ckpt, o.out, lc.Rank, lc.Alpha, lc.Targets, abs, dt.TorchName(), float64(n)/1e6)
	return nil
}

// exportMerged writes a LoRA checkpoint merged into its base, W +
// (alpha/r)·B·A, as a full Hugging Face folder.
func exportMerged(cmd *cobra.Command, o exportOptions, dt model.DType, m *model.Model, baseDir string) error {
	merged, err := m.MergedWeights()
	if err != nil {
		return err
	}
	err = writeOut(cmd, o.out, o.force, func(dir string) error {
		if err := model.WriteFolderWith(dir, m.Cfg, m.B, m.P, dt, int64(o.shardGB*(1<<30)), merged); err != nil {
			return err
		}
		return tokenizer.CopyFiles(o.ckpt, dir)
	})
	if err != nil {
		return err
	}
	lc := m.A.LoRA
	fmt.Fprintf(cmd.OutOrStdout(), "exported %s merged into its base %s → %s (LoRA rank %d, alpha %v on %v; %s, %.1fM parameters)\n",
		o.ckpt, baseDir, o.out, lc.Rank, lc.Alpha, lc.Targets, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
	return nil
}

// maxShardGB bounds --shard-gb (a PiB: far past any shard, and inside int64
// bytes).
const maxShardGB = 1 << 20
