package main

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// TestSignalWhileJoining: a rank waiting for the group to form — rank 0 for
// a rank that died at start-up, or a rank for a rank 0 that never came —
// stops on SIGTERM or SIGUSR1 with exit status 3 (nothing to checkpoint),
// as a signal while loading does. Before, the signal was swallowed and the
// rank waited out dist.timeout_s (here an hour) before failing with exit 1.
func TestSignalWhileJoining(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	task := testfix.TinyTask(t)
	cases := []struct {
		name   string
		rank   int
		sig    syscall.Signal
		marker string
		want   string
	}{
		{"rank 0 waits for rank 1, SIGTERM", 0, syscall.SIGTERM, "rank 0 listens on", "stopped while waiting for rank(s) 1 of 2 to join"},
		{"rank 1 waits for rank 0, SIGUSR1", 1, syscall.SIGUSR1, "joining the group", "stopped while joining rank 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd, out := startRank(t, task, c.rank, 2, freeTCPPort(t), []string{dist.TokenEnv + "=" + testToken}, nil, c.marker, "dist.timeout_s=3600")
			select {
			case <-out.seen:
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("the rank never started joining:\n%s", out)
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute): // far below the hour it would wait
				cmd.Process.Kill()
				t.Fatalf("still waiting to join after the signal:\n%s", out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitRequeue {
				t.Fatalf("%v, want exit status %d\n%s", err, exitRequeue, out)
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("the log does not say %q:\n%s", c.want, out)
			}
		})
	}
}
