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
	// The first SIGINT/SIGTERM cancels the context: commands finish the work
	// in flight (the trainer its current step, then it writes the weights)
	// and return. After that the default handlers are back, so a second
	// signal ends the process at once; every file is written atomically, so
	// that loses at most the write in progress.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	cobra.CheckErr(newRootCmd().ExecuteContext(ctx))
}
