package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

func newExportCmd() *cobra.Command {
	var ckpt, out, dtype, base string
	var shardGB float64
	var adapter, force bool
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
			if ckpt == "" || out == "" {
				return fmt.Errorf("--checkpoint and --out are required")
			}
			dt, err := model.ParseDType(dtype)
			if err != nil {
				return fmt.Errorf("--dtype: %w", err)
			}
			if !(shardGB >= 0 && shardGB <= maxShardGB) { // NaN fails both
				return fmt.Errorf("--shard-gb %v: want a size in GiB from 0 (one file) to %d", shardGB, maxShardGB)
			}
			man, err := checkpoint.Verify(ckpt)
			if err != nil {
				return err
			}
			if !model.IsAdapterFolder(ckpt) {
				if adapter || base != "" {
					flag := "--adapter"
					if !adapter {
						flag = "--base"
					}
					return fmt.Errorf("%s: %s is not a LoRA checkpoint (no %s): its policy is a full model, exported without it", flag, ckpt, model.AdapterConfigFile)
				}
				if mc, err := model.LoadConfig(ckpt); err == nil {
					if err := exportPlan(mc, dt, shardGB*(1<<30)).check(hostMemory(), "this machine"); err != nil {
						return err
					}
				}
				m, err := model.Load(cpu.NewBackend(), ckpt)
				if err != nil {
					return err
				}
				err = writeOut(cmd, out, force, func(dir string) error {
					if err := model.WriteFolderSharded(dir, m.Cfg, m.B, m.P, dt, int64(shardGB*(1<<30))); err != nil {
						return err
					}
					return tokenizer.CopyFiles(ckpt, dir)
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "exported %s → %s (%s, %.1fM parameters)\n", ckpt, out, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
				return nil
			}
			if adapter && cmd.Flags().Changed("shard-gb") {
				return fmt.Errorf("--shard-gb: an adapter folder is one file (adapter_model.safetensors); drop --shard-gb or --adapter")
			}
			baseDir, err := model.AdapterBase(ckpt, man, base, "--base")
			if err != nil {
				return err
			}
			if mc, err := model.LoadConfig(baseDir); err == nil {
				if err := exportPlan(mc, dt, shardGB*(1<<30)).check(hostMemory(), "this machine"); err != nil {
					return err
				}
			}
			m, err := model.LoadAdapted(cpu.NewBackend(), ckpt, baseDir)
			if err != nil {
				return err
			}
			lc := m.A.LoRA
			if adapter {
				abs, err := filepath.Abs(baseDir)
				if err != nil {
					return err
				}
				err = writeOut(cmd, out, force, func(dir string) error {
					if err := model.SaveAdapters(m.B, m.Cfg, m.A, dir, abs, dt); err != nil {
						return err
					}
					return tokenizer.CopyFiles(ckpt, dir)
				})
				if err != nil {
					return err
				}
				n := 0
				for _, np := range m.A.Named(m.Cfg) {
					n += (*np.Ptr).Numel()
				}
				fmt.Fprintf(cmd.OutOrStdout(), "exported the adapters of %s → %s (PEFT LoRA rank %d, alpha %v on %v over %s; %s, %.2fM parameters)\n",
					ckpt, out, lc.Rank, lc.Alpha, lc.Targets, abs, dt.TorchName(), float64(n)/1e6)
				return nil
			}
			merged, err := m.MergedWeights()
			if err != nil {
				return err
			}
			err = writeOut(cmd, out, force, func(dir string) error {
				if err := model.WriteFolderWith(dir, m.Cfg, m.B, m.P, dt, int64(shardGB*(1<<30)), merged); err != nil {
					return err
				}
				return tokenizer.CopyFiles(ckpt, dir)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "exported %s merged into its base %s → %s (LoRA rank %d, alpha %v on %v; %s, %.1fM parameters)\n",
				ckpt, baseDir, out, lc.Rank, lc.Alpha, lc.Targets, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ckpt, "checkpoint", "", "checkpoint folder (RUN/checkpoints/step_NNNNNNNN)")
	f.StringVar(&out, "out", "", "output Hugging Face folder")
	f.StringVar(&dtype, "dtype", "bf16", "weight dtype: bf16, fp16 or fp32")
	f.Float64Var(&shardGB, "shard-gb", 5, "largest shard in GiB (0: one file)")
	f.BoolVar(&adapter, "adapter", false, "LoRA checkpoint: write the PEFT adapter folder instead of the merged model")
	f.BoolVar(&force, "force", false, "write into an --out that is, or is inside, a checkpoint, a run folder or a model folder, replacing the model there")
	f.StringVar(&base, "base", "", "LoRA checkpoint: the base model folder (default: the one its manifest records); its weights must hash to the manifest's weights_sha256")
	return cmd
}

// maxShardGB bounds --shard-gb (a PiB: far past any shard, and inside int64
// bytes).
const maxShardGB = 1 << 20

// writeOut writes a model folder at out through write, into a temporary
// sibling moved into place (outfolder.go), and says which stale weight
// files of an earlier model it removed.
func writeOut(cmd *cobra.Command, out string, force bool, write func(dir string) error) error {
	o, err := openOut(out, "--out", force)
	if err != nil {
		return err
	}
	if err := write(o.Dir()); err != nil {
		o.Abort()
		return err
	}
	removed, err := o.Commit()
	if len(removed) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "--force: removed the earlier model's %s from %s\n", strings.Join(removed, ", "), out)
	}
	return err
}
