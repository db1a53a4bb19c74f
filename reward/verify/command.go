package verify

// command.go: `gdrotrain verify` as one call (Run): one pair or a file,
// printed as text or JSON, with --quiet and --strict.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Command is verify's settings, the flags of `gdrotrain verify`.
type Command struct {
	// Response and Truth are one pair to score (--response, --truth; nil:
	// not given, so an empty response can still be scored); JSONL a file
	// of rows (--jsonl; "-": Stdin).
	Response, Truth *string
	JSONL           string
	// Options select the scorer (--mode, --data-source).
	Options Options
	// JSON prints one JSON object per verdict (--json); Quiet only the
	// summary and the disagreements (--quiet); Strict makes a
	// disagreement with expected an error (--strict).
	JSON, Quiet, Strict bool
	Stdin               io.Reader
	Stdout              io.Writer
}

// Run scores the pair or the file and prints the verdicts (and a file's
// summary).
func Run(ctx context.Context, c Command) error {
	single := c.Response != nil || c.Truth != nil
	switch {
	case single && c.JSONL != "":
		return errors.New("verify: give either --response/--truth or --jsonl, not both")
	case !single && c.JSONL == "":
		return errors.New("verify: nothing to score: give --response and --truth, or --jsonl FILE")
	case single && (c.Response == nil || c.Truth == nil):
		return errors.New("verify: --response and --truth go together")
	}
	if err := c.Options.Check(); err != nil {
		return fmt.Errorf("verify: --mode: %w", err)
	}
	if single {
		return c.one()
	}
	return c.file(ctx)
}

// one scores the pair.
func (c Command) one() error {
	v, err := One(c.Options, *c.Response, *c.Truth)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if c.JSON {
		return json.NewEncoder(c.Stdout).Encode(v)
	}
	_, err = io.WriteString(c.Stdout, v.Text())
	return err
}

// file scores every row of JSONL.
func (c Command) file(ctx context.Context) error {
	out := c.Stdout
	in, name := c.Stdin, "stdin"
	if c.JSONL != "-" {
		f, err := os.Open(c.JSONL)
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		defer f.Close()
		in, name = f, c.JSONL
	}
	enc := json.NewEncoder(out)
	s, err := File(ctx, in, name, c.Options, func(v Verdict) error {
		switch {
		case c.JSON:
			return enc.Encode(v)
		case !c.Quiet:
			_, err := fmt.Fprintln(out, v.Line())
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !c.JSON {
		if !c.Quiet {
			fmt.Fprintln(out)
		}
		fmt.Fprint(out, s.Text(c.Options.Mode))
	}
	if c.Strict && len(s.Disagreements) > 0 {
		return fmt.Errorf("verify: %d verdicts disagree with expected", len(s.Disagreements))
	}
	return nil
}
