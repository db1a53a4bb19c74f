package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/gpukit"
)

func newKitReportCmd() *cobra.Command {
	var dir, size, version string
	cmd := &cobra.Command{
		Use:   "kit-report --dir RESULTS",
		Short: "Summarize a GPU kit run's results folder into summary.json and report.md",
		Long: `kit-report is the last step of the GPU kit (run.sh, scripts/gpu_kit.sh; see
docs/gpu-kit.md). It reads the folder the run wrote (steps.tsv, cuda-info.json,
the logs, bench.json) and writes summary.json — every step's outcome and
duration, the GPU, driver and libraries with where each was found, the tests'
counts, the measured benchmark numbers — and report.md, the same for reading.
A phase the kit's deadline cut is reported as cut, with what it finished.
It can be rerun on a results folder at any time (run.sh packs the folder
into logs.tar.gz).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return fmt.Errorf("--dir: the results folder is required")
			}
			s, err := gpukit.Summarize(dir)
			if err != nil {
				return fmt.Errorf("kit-report: %w", err)
			}
			s.Kit.Size, s.Kit.Version = size, version
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, kv := range bi.Settings {
					switch kv.Key {
					case "vcs.revision":
						s.Kit.Revision = kv.Value + s.Kit.Revision
					case "vcs.modified":
						if kv.Value == "true" {
							s.Kit.Revision += "+modified"
						}
					}
				}
			}
			raw, err := json.MarshalIndent(s, "", "  ")
			if err != nil {
				return err
			}
			var md bytes.Buffer
			if err := s.WriteMarkdown(&md); err != nil {
				return fmt.Errorf("kit-report: %w", err)
			}
			for name, data := range map[string][]byte{"summary.json": append(raw, '\n'), "report.md": md.Bytes()} {
				if err := model.WriteFileAtomic(filepath.Join(dir, name), data); err != nil {
					return fmt.Errorf("kit-report: %w", err)
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "kit-report: %s: %d steps passed, %d failed, %d skipped, %d cut; wrote %s and %s\n", s.Result,
				s.Counts["pass"], s.Counts["fail"], s.Counts["skip"], s.Counts["cut"], filepath.Join(dir, "summary.json"), filepath.Join(dir, "report.md"))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the kit run's results folder")
	cmd.Flags().StringVar(&size, "size", "", "the size the run used (full or tiny), recorded in the summary")
	cmd.Flags().StringVar(&version, "kit-version", "", "the kit's version (its VERSION file's first line), recorded in the summary")
	return cmd
}
