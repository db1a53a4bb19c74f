// Package gdrosim drives the GDRO controllers without a model: the
// simulator on a synthetic prompt population (Simulate, over
// gdro.Simulate) and the replay of a logged trace (Replay, over
// gdro.Replay), each with its files and its summary. `gdrotrain gdro-sim`
// and `gdrotrain gdro-replay` are their flags and one call; the errors
// name those flags.
package gdrosim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// ConfigSource selects the controllers' configuration: a preset
// (--preset), then a YAML file of gdro settings over it (--config; ""
// none), then rollout.mode (--mode; "" the preset's or the file's).
type ConfigSource struct {
	Preset, File, Mode string
}

// Resolve builds the configuration: preset, then File, then Mode.
func (s ConfigSource) Resolve() (gdro.Config, error) {
	cfg, err := gdro.Preset(s.Preset)
	if err != nil {
		return cfg, err
	}
	if s.File != "" {
		data, err := os.ReadFile(s.File)
		if err != nil {
			return cfg, err
		}
		if cfg, err = gdro.ParseConfig(data, cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", s.File, err)
		}
	}
	if s.Mode != "" {
		cfg.Rollout.Mode = s.Mode
	}
	return cfg, cfg.Validate()
}

// SimOptions are gdro-sim's settings, the flags of `gdrotrain gdro-sim`.
type SimOptions struct {
	Config ConfigSource
	Sim    gdro.SimConfig
	// Out gets one JSON object per step (--out), Trace a gdro-replay trace
	// (--trace); "-" is Stdout, "" nothing.
	Out, Trace string
	// JSON prints the summary as JSON (--json).
	JSON bool
	// Stdout gets the summary, or Stderr when Out or Trace is "-".
	Stdout, Stderr io.Writer
}

// Simulate runs the simulator and prints its summary.
func Simulate(o SimOptions) error {
	cfg, err := o.Config.Resolve()
	if err != nil {
		return err
	}
	w, closeOut, err := create(o.Out, o.Stdout)
	if err != nil {
		return err
	}
	tw, closeTrace, err := create(o.Trace, o.Stdout)
	if err != nil {
		_ = closeOut()
		return err
	}
	sum, err := gdro.Simulate(cfg, o.Sim, w, tw)
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if cerr := closeTrace(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	report := o.Stdout
	if o.Out == "-" || o.Trace == "-" {
		report = o.Stderr
	}
	if o.JSON {
		return writeJSON(report, sum)
	}
	_, err = io.WriteString(report, sum.Format())
	return err
}

// ReplayOptions are gdro-replay's settings, the flags of `gdrotrain
// gdro-replay`.
type ReplayOptions struct {
	Config ConfigSource
	// Trace is the JSONL trace to replay (--trace; "-": Stdin), Out the
	// decisions' JSONL (--out; "" or "-": Stdout).
	Trace, Out string
	Stdin      io.Reader
	// Stdout gets the decisions without Out, Stderr the summary line.
	Stdout, Stderr io.Writer
}

// Replay runs the controllers over the trace, writes their decisions and
// prints a summary line.
func Replay(o ReplayOptions) error {
	if o.Trace == "" {
		return fmt.Errorf("gdro-replay: --trace FILE is required")
	}
	cfg, err := o.Config.Resolve()
	if err != nil {
		return err
	}
	in := o.Stdin
	if o.Trace != "-" {
		f, err := os.Open(o.Trace)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if o.Out == "" {
		o.Out = "-"
	}
	w, closeOut, err := create(o.Out, o.Stdout)
	if err != nil {
		return err
	}
	sum, err := gdro.Replay(cfg, in, w)
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.Trace, err)
	}
	msg := fmt.Sprintf("gdro-replay: %d steps, %d prompts, %d rows replayed (method %s", sum.Steps, sum.Prompts, sum.Rows, sum.Method)
	if cfg.Rollout.Enabled {
		msg += fmt.Sprintf(", final mu %.4f", sum.MuFinal)
	}
	_, err = fmt.Fprintln(o.Stderr, msg+")")
	return err
}

// create opens path for writing; "-" is stdout, "" is nothing.
func create(path string, stdout io.Writer) (io.Writer, func() error, error) {
	switch path {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
