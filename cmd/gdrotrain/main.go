// Command gdrotrain post-trains Qwen3-Base models for math reasoning with
// GRPO and the Prompt-GDRO / Rollout-GDRO curriculum controllers.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// SIGTERM/SIGUSR1 handling for checkpoints lives in the trainer; here a
	// signal only cancels the context so every command stops cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cobra.CheckErr(newRootCmd().ExecuteContext(ctx))
}
