// Command gdrotrain post-trains Qwen3-Base models for math reasoning with
// GRPO and the Prompt-GDRO / Rollout-GDRO curriculum controllers.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/trainer"
)

// exitRequeue is the exit status of a run stopped by a signal after it wrote
// a checkpoint (scripts/slurm requeues the job on it).
const exitRequeue = 3

func main() {
	// The first SIGINT/SIGTERM/SIGUSR1 cancels the context: commands finish
	// or abandon the work in flight and return (the trainer checkpoints its
	// last complete step and returns trainer.ErrStopped, whatever phase it
	// was in). After that the default handlers are back, so a second signal
	// ends the process at once; every file is written atomically, so that
	// loses at most the write in progress.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	defer stop()
	go func() { <-ctx.Done(); stop() }()
	err := newRootCmd().ExecuteContext(ctx)
	if errors.Is(err, trainer.ErrStopped) {
		// Pre-empted or interrupted with a checkpoint written: a distinct
		// status the batch scripts requeue on.
		fmt.Fprintln(os.Stderr, "gdrotrain:", err)
		os.Exit(exitRequeue)
	}
	cobra.CheckErr(err)
}
