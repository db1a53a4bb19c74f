package main

import (
	"github.com/spf13/cobra"
)

// subcommands holds the constructors of every subcommand. Each subcommand
// lives in its own file and registers itself from an init function, so adding
// a command never touches this file.
var subcommands []func() *cobra.Command

func register(newCmd func() *cobra.Command) { subcommands = append(subcommands, newCmd) }

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
	for _, newCmd := range subcommands {
		root.AddCommand(newCmd())
	}
	return root
}
