package export

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

// TinyOptions are init-tiny's settings, the flags of `gdrotrain
// init-tiny`.
type TinyOptions struct {
	// Model is the model's shape and initialisation.
	Model model.RandomOptions
	// Out is the folder to write (--out), DType the storage dtype
	// (--dtype: float32, bfloat16 or float16).
	Out, DType string
	Seed       uint64
	// Force writes into an Out that is, or is inside, a model folder, a
	// checkpoint or a run folder, replacing the model there (--force).
	Force bool
	// Stdout gets the summary line, Stderr the earlier model's files that
	// Force removed.
	Stdout, Stderr io.Writer
}

// InitTiny writes a randomly initialised Qwen3 model folder, refused
// before anything is drawn when this machine cannot hold it.
func InitTiny(o TinyOptions) error {
	if o.Out == "" {
		return fmt.Errorf("--out is required")
	}
	dt, err := model.ParseDType(o.DType)
	if err != nil {
		return fmt.Errorf("--dtype: %w", err)
	}
	cfg, err := o.Model.Config()
	if err != nil {
		return err
	}
	if err := memplan.InitTiny(cfg, dt).Check(memplan.Available(), "this machine"); err != nil {
		return err
	}
	b := cpu.NewBackend()
	p := model.RandomParams(b, cfg, o.Seed, o.Model.InitStd, 0)
	err = WriteFolder(o.Out, o.Force, o.Stderr, func(dir string) error { return model.WriteFolder(dir, cfg, b, p, dt) })
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stdout, "wrote %s: %d layers, hidden %d, heads %d/%d, vocab %d, %d parameters (%s)\n",
		o.Out, cfg.NumHiddenLayers, cfg.HiddenSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.VocabSize, cfg.NumParams(), dt.TorchName())
	return nil
}
