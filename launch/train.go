package launch

// train.go: `gdrotrain train` as one call: read the config (a file or a
// built-in one), apply the overrides, then print it, plan its memory (the
// dry run) or launch this rank.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Command is a training command's settings, the flags of `gdrotrain
// train`.
type Command struct {
	// Config is a YAML file, or a built-in config's name (--config).
	Config string
	// Sets override config keys, section.key=value (--set), after Device
	// (--device: run.device) and Bind (--bind-addr: dist.bind) when set.
	Sets         []string
	Device, Bind string
	// PrintConfig prints the resolved config and stops (--print-config).
	PrintConfig bool
	// DryRun prints the memory the run needs and stops (--dry-run),
	// against AssumeGiB of device memory when set (--assume-memory-gib)
	// and for Launch.Place.Size ranks.
	DryRun    bool
	AssumeGiB float64
	// Launch is this rank's launch; Train sets its Config.
	Launch Options
	// Stdout gets the config or the plan; Launch.Log the rest (nil:
	// os.Stderr).
	Stdout io.Writer
}

// Train runs the training command: print the config, plan its memory, or
// launch this rank and run it to the end of training (Run).
func Train(ctx context.Context, c Command) error {
	if c.Launch.Log == nil {
		c.Launch.Log = os.Stderr
	}
	raw, source, err := ReadConfig(c.Config)
	if err != nil {
		return err
	}
	sets := slices.Clone(c.Sets)
	if c.Device != "" {
		sets = append(sets, "run.device="+c.Device)
	}
	if c.Bind != "" {
		sets = append(sets, "dist.bind="+strconv.Quote(c.Bind))
	}
	if c.PrintConfig || c.DryRun {
		// Both work on a shipped config before its paths are set.
		cfg, err := trainer.Resolve(raw, source, sets)
		if err != nil {
			return err
		}
		if c.DryRun {
			if cfg.Model.Path == "" {
				return fmt.Errorf("--dry-run: model.path is required (a folder with the model's config.json, e.g. docs/qwen3-shapes/1.7b)")
			}
			return Plan(c.Stdout, c.Launch.Log, cfg, c.AssumeGiB, max(c.Launch.Place.Size, 1))
		}
		out, err := cfg.YAML()
		if err != nil {
			return err
		}
		_, err = c.Stdout.Write(out)
		return err
	}
	cfg, err := trainer.LoadBytes(raw, source, sets)
	if err != nil {
		return err
	}
	c.Launch.Config = cfg
	return Run(ctx, c.Launch)
}

// ReadConfig reads a config file, or a built-in config when no file of
// that name exists, and says which it read.
func ReadConfig(name string) ([]byte, string, error) {
	if name == "" {
		return nil, "", fmt.Errorf("--config is required (a YAML file or one of %v)", configs.Names())
	}
	// A file of that name wins over a built-in config; a folder does not
	// (`--config demo` beside a folder demo/ must not read the folder).
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		raw, err := os.ReadFile(name)
		if err != nil {
			return nil, "", fmt.Errorf("config: %w", err)
		}
		return raw, name, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("config: %w", err)
	}
	raw, berr := configs.Get(name)
	if st, err := os.Stat(name); berr != nil && err == nil && st.IsDir() {
		return nil, "", fmt.Errorf("--config %s is a folder, want a YAML file (or a built-in config: %v)", name, configs.Names())
	}
	if berr != nil {
		return nil, "", fmt.Errorf("config %s: no such file, and %v", name, berr)
	}
	return raw, "built-in " + name, nil
}
