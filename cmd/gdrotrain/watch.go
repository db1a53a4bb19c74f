package main

// gdrotrain watch RUN_DIR: a live terminal view of a run (tools/watch).

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gdrotrain/gdrotrain/tools/watch"
)

func newWatchCmd() *cobra.Command {
	var once, plain bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch RUN_DIR",
		Short: "Follow a running or finished run in the terminal",
		Long: `watch follows a run folder's metrics.jsonl and validation.jsonl while the
run writes them (from any machine that sees the folder: a login node over SSH
while the job runs on a GPU node): the last step's line, sparklines of reward,
accuracy, KL, gradient norm and tokens/s, each difficulty bin's prompt share,
GDRO weight and rollouts per prompt, the last validation and the time to the
last step (from the recent steps' times; validations not counted).

On a terminal it redraws in place; otherwise (a pipe, a batch log) it prints
one line per new step and per validation. It exits when the run has written
its last step (and that step's validation), or on Ctrl-C. It only reads the
run folder.`,
		Example: `  gdrotrain watch runs/paper-prompt-gdro-1.7b
  gdrotrain watch --once runs/demo/grpo-prompt-gdro       # one frame, then exit
  gdrotrain watch runs/r1 | tee watch.log                 # plain lines`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := watch.Options{Dir: args[0], Out: cmd.OutOrStdout(), Interval: interval, Once: once}
			if f, ok := o.Out.(*os.File); ok && !plain && term.IsTerminal(int(f.Fd())) {
				o.TTY = true
				o.Size = func() (int, int, error) { return term.GetSize(int(f.Fd())) }
			}
			return watch.Run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "show the run as it is now (one frame, or the lines so far) and exit")
	f.BoolVar(&plain, "plain", false, "print plain lines even on a terminal")
	f.DurationVar(&interval, "interval", time.Second, "how often to read the run folder")
	return cmd
}
