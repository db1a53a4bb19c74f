// Package export writes model folders out of gdrotrain: a checkpoint's
// policy as a Hugging Face folder (a full model, a LoRA checkpoint merged
// into its base, or its PEFT adapters; Run) and a random tiny model
// (InitTiny), both through a folder that refuses to overwrite a
// checkpoint, a run folder or another model unless forced (WriteFolder).
// `gdrotrain export` and `gdrotrain init-tiny` are their flags and one call;
// the errors name those flags.
package export

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// Options are an export's settings, the flags of `gdrotrain export`.
type Options struct {
	// Checkpoint is the checkpoint folder (--checkpoint), Out the folder
	// to write (--out).
	Checkpoint, Out string
	// DType is the weights' dtype (--dtype): bf16, fp16 or fp32.
	DType string
	// ShardGB is the largest shard in GiB (--shard-gb; 0: one file).
	// ShardGBSet says it was given: an adapter folder is one file, so an
	// adapter export refuses it.
	ShardGB    float64
	ShardGBSet bool
	// Adapter writes a LoRA checkpoint's PEFT adapter folder instead of
	// the merged model (--adapter).
	Adapter bool
	// Force writes into an Out that is, or is inside, a checkpoint, a run
	// folder or a model folder, replacing the model there (--force).
	Force bool
	// Base is a LoRA checkpoint's base model folder (--base; "": the one
	// its manifest records).
	Base string
	// Stdout gets the summary line, Stderr the earlier model's files that
	// Force removed.
	Stdout, Stderr io.Writer
}

// maxShardGB bounds --shard-gb (a PiB: far past any shard, and inside int64
// bytes).
const maxShardGB = 1 << 20

// Run checks the options and the checkpoint, then writes its policy: a
// full model, or a LoRA checkpoint's adapters (Adapter) or its merged
// model.
func Run(o Options) error {
	if o.Checkpoint == "" || o.Out == "" {
		return fmt.Errorf("--checkpoint and --out are required")
	}
	dt, err := model.ParseDType(o.DType)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	if !(o.ShardGB >= 0 && o.ShardGB <= maxShardGB) { // NaN fails both
		return fmt.Errorf("--shard-gb %v: want a size in GiB from 0 (one file) to %d", o.ShardGB, maxShardGB)
	}
	man, err := checkpoint.Verify(o.Checkpoint)
	if err != nil {
		return err
	}
	if !model.IsAdapterFolder(o.Checkpoint) {
		return o.full(dt)
	}
	if o.Adapter && o.ShardGBSet {
		return fmt.Errorf("--shard-gb: an adapter folder is one file (adapter_model.safetensors); drop --shard-gb or --adapter")
	}
	baseDir, err := model.AdapterBase(o.Checkpoint, man, o.Base, "--base")
	if err != nil {
		return err
	}
	if err := o.checkMemory(baseDir, dt); err != nil {
		return err
	}
	m, err := model.LoadAdapted(cpu.NewBackend(), o.Checkpoint, baseDir)
	if err != nil {
		return err
	}
	if o.Adapter {
		return o.adapters(dt, m, baseDir)
	}
	return o.merged(dt, m, baseDir)
}

// shardBytes is ShardGB in bytes.
func (o Options) shardBytes() float64 { return o.ShardGB * (1 << 30) }

// checkMemory refuses an export of the model in dir (its config.json) that
// this machine's memory cannot hold; a folder without a readable config
// fails later, when it loads, naming the file.
func (o Options) checkMemory(dir string, dt model.DType) error {
	mc, err := model.LoadConfig(dir)
	if err != nil {
		return nil
	}
	return memplan.Export(mc, dt, o.shardBytes()).Check(memplan.Available(), "this machine")
}

// write writes Out through fill, then the checkpoint's tokenizer files.
func (o Options) write(fill func(dir string) error) error {
	return WriteFolder(o.Out, o.Force, o.Stderr, func(dir string) error {
		if err := fill(dir); err != nil {
			return err
		}
		return tokenizer.CopyFiles(o.Checkpoint, dir)
	})
}

// full writes a full checkpoint's policy as a Hugging Face folder.
func (o Options) full(dt model.DType) error {
	if o.Adapter || o.Base != "" {
		flag := "--adapter"
		if !o.Adapter {
			flag = "--base"
		}
		return fmt.Errorf("%s: %s is not a LoRA checkpoint (no %s): its policy is a full model, exported without it", flag, o.Checkpoint, model.AdapterConfigFile)
	}
	if err := o.checkMemory(o.Checkpoint, dt); err != nil {
		return err
	}
	m, err := model.Load(cpu.NewBackend(), o.Checkpoint)
	if err != nil {
		return err
	}
	err = o.write(func(dir string) error {
		return model.WriteFolderSharded(dir, m.Cfg, m.B, m.P, dt, int64(o.shardBytes()))
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "exported %s → %s (%s, %.1fM parameters)\n", o.Checkpoint, o.Out, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
	return nil
}

// adapters writes a LoRA checkpoint's adapters as a PEFT folder naming its
// base folder.
func (o Options) adapters(dt model.DType, m *model.Model, baseDir string) error {
	abs, err := filepath.Abs(baseDir)
	if err != nil {
		return err
	}
	err = o.write(func(dir string) error { return model.SaveAdapters(m.B, m.Cfg, m.A, dir, abs, dt) })
	if err != nil {
		return err
	}
	n := 0
	for _, np := range m.A.Named(m.Cfg) {
		n += (*np.Ptr).Numel()
	}
	lc := m.A.LoRA
	fmt.Fprintf(o.Stdout, "exported the adapters of %s → %s (PEFT LoRA rank %d, alpha %v on %v over %s; %s, %.2fM parameters)\n",
		o.Checkpoint, o.Out, lc.Rank, lc.Alpha, lc.Targets, abs, dt.TorchName(), float64(n)/1e6)
	return nil
}

// merged writes a LoRA checkpoint merged into its base, W + (alpha/r)·B·A,
// as a full Hugging Face folder.
func (o Options) merged(dt model.DType, m *model.Model, baseDir string) error {
	merged, err := m.MergedWeights()
	if err != nil {
		return err
	}
	err = o.write(func(dir string) error {
		return model.WriteFolderWith(dir, m.Cfg, m.B, m.P, dt, int64(o.shardBytes()), merged)
	})
	if err != nil {
		return err
	}
	lc := m.A.LoRA
	fmt.Fprintf(o.Stdout, "exported %s merged into its base %s → %s (LoRA rank %d, alpha %v on %v; %s, %.1fM parameters)\n",
		o.Checkpoint, baseDir, o.Out, lc.Rank, lc.Alpha, lc.Targets, dt.TorchName(), float64(m.Cfg.NumParams())/1e6)
	return nil
}
