package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/gpukit"
)

func newKitReportCmd() *cobra.Command {
	var o gpukit.ReportOptions
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
			o.Stdout = cmd.OutOrStdout()
			return gpukit.WriteReport(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "the kit run's results folder")
	cmd.Flags().StringVar(&o.Size, "size", "", "the size the run used (full or tiny), recorded in the summary")
	cmd.Flags().StringVar(&o.Version, "kit-version", "", "the kit's version (its VERSION file's first line), recorded in the summary")
	return cmd
}
