package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the CLI: every subcommand is listed here, one
// constructor per file of this folder (cobra prints them sorted by name).
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gdrotrain",
		Short: "Post-train Qwen3-Base models for math reasoning with GRPO and GDRO curricula",
		Long: `gdrotrain loads Hugging Face Qwen3 weights, samples rollouts with its own
KV-cached sampler, scores them with a math verifier and runs the clipped GRPO
update with the Prompt-GDRO or Rollout-GDRO curriculum controllers.`,
		SilenceUsage:  true,
		SilenceErrors: true, // main prints the error once via cobra.CheckErr
	}
	root.AddCommand(
		// Training and evaluation.
		newTrainCmd(),      // train.go
		newDemoCmd(),       // demo.go
		newGenerateCmd(),   // generate.go
		newVerifyCmd(),     // verify.go
		newDataCmd(),       // datainspect.go: data inspect
		newTokenizeCmd(),   // tokenize.go
		newGDROSimCmd(),    // gdrosim.go
		newGDROReplayCmd(), // gdroreplay.go
		newPlotCmd(),       // plot.go
		newWatchCmd(),      // watch.go
		// Models and devices.
		newExportCmd(),    // export.go
		newInitTinyCmd(),  // inittiny.go
		newLogitsCmd(),    // logits.go
		newBenchCmd(),     // bench.go
		newCudaInfoCmd(),  // cudainfo.go
		newKitReportCmd(), // kitreport.go: the GPU kit's summary
	)
	return root
}
