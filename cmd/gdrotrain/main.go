// Command gdrotrain post-trains Qwen3-Base models for math reasoning with
// GRPO and the Prompt-GDRO / Rollout-GDRO curriculum controllers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gdrotrain/gdrotrain/trainer"
)

// exitRequeue is the exit status of a run stopped by a signal after it wrote
// a checkpoint (scripts/slurm requeues the job on it).
const exitRequeue = 3

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, stopSignals()...)
	// The cause names the signal: a stopped bench reports it.
	stop := func(sig os.Signal) { cancel(errors.New(signalName(sig))) }
	go handleSignals(sigs, stop, os.Stderr, trainer.Checkpointing, os.Exit)
	err := newRootCmd().ExecuteContext(ctx)
	if errors.Is(err, trainer.ErrStopped) {
		// Pre-empted or interrupted with a checkpoint written: a distinct
		// status the batch scripts requeue on.
		fmt.Fprintln(os.Stderr, "gdrotrain:", err)
		os.Exit(exitRequeue)
	}
	cobra.CheckErr(err)
}

// stopSignals stop a command cleanly: SIGINT (Ctrl-C), SIGTERM (kill,
// Slurm at the time limit, scancel), SIGUSR1 (Slurm's pre-emption
// warning) and SIGHUP (the SSH session or terminal closed), unless the
// process started with SIGHUP ignored (nohup: the user asked it to outlive
// the terminal; catching it would undo that).
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// signalName is sig as kill(1) spells it (SIGTERM), else its description.
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}

// handleSignals reads sigs until it closes. The first signal calls stop
// with it (commands finish or abandon the work in flight and return; the trainer
// checkpoints its last complete step and returns trainer.ErrStopped,
// whatever phase it was in). Later ones never cut that stop short: Slurm
// follows its USR1 warning with TERM, to every process, at the time
// limit, and a checkpoint being written must be finished (only SIGKILL,
// which cannot be caught, stops it; every file is written atomically, so
// that loses at most the checkpoint in progress). They are only logged,
// except a second Ctrl-C outside a checkpoint write, which ends the
// process at once (exit 130), for a user who will not wait.
func handleSignals(sigs <-chan os.Signal, stop func(os.Signal), log io.Writer, checkpointing func() bool, exit func(int)) {
	first := true
	for sig := range sigs {
		switch {
		case first:
			first = false
			stop(sig)
		case sig == os.Interrupt && !checkpointing():
			fmt.Fprintln(log, "gdrotrain: second interrupt: exiting now, without a checkpoint")
			exit(130)
		case checkpointing():
			fmt.Fprintf(log, "gdrotrain: %v while a checkpoint is being written: it is finished first (only SIGKILL stops it)\n", sig)
		default:
			fmt.Fprintf(log, "gdrotrain: %v: already stopping (the last complete step is checkpointed first; SIGKILL ends the process at once)\n", sig)
		}
	}
}
