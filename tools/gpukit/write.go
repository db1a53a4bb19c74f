package gpukit

// write.go: `gdrotrain kit-report` as one call (WriteReport): summarize a
// results folder, stamp the binary's revision, and write summary.json and
// report.md into the folder.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"

	"github.com/gdrotrain/gdrotrain/internal/atomicfile"
)

// ReportOptions are kit-report's settings, the flags of `gdrotrain
// kit-report`.
type ReportOptions struct {
	// Dir is the kit run's results folder (--dir).
	Dir string
	// Size (full or tiny; --size) and Version (the kit's VERSION;
	// --kit-version) are recorded in the summary.
	Size, Version string
	// Stdout gets the one-line outcome.
	Stdout io.Writer
}

// WriteReport summarizes o.Dir into its summary.json and report.md.
func WriteReport(o ReportOptions) error {
	if o.Dir == "" {
		return fmt.Errorf("--dir: the results folder is required")
	}
	s, err := Summarize(o.Dir)
	if err != nil {
		return fmt.Errorf("kit-report: %w", err)
	}
	s.Kit.Size, s.Kit.Version = o.Size, o.Version
	s.Kit.Revision = buildRevision()
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		return fmt.Errorf("kit-report: %w", err)
	}
	for name, data := range map[string][]byte{"summary.json": append(raw, '\n'), "report.md": md.Bytes()} {
		if err := atomicfile.WriteFile(filepath.Join(o.Dir, name), data); err != nil {
			return fmt.Errorf("kit-report: %w", err)
		}
	}
	fmt.Fprintf(o.Stdout, "kit-report: %s: %d steps passed, %d failed, %d skipped, %d cut; wrote %s and %s\n", s.Result,
		s.Counts["pass"], s.Counts["fail"], s.Counts["skip"], s.Counts["cut"], filepath.Join(o.Dir, "summary.json"), filepath.Join(o.Dir, "report.md"))
	return nil
}

// buildRevision is the binary's commit as its build information stamps
// it ("+modified" for a dirty tree; "" when not stamped).
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev := ""
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value + rev
		case "vcs.modified":
			if kv.Value == "true" {
				rev += "+modified"
			}
		}
	}
	return rev
}
