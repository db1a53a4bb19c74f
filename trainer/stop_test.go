package trainer

// A signal at any moment loses nothing: a run stopped (its context
// cancelled, as the SIGTERM / SIGUSR1 / SIGINT handler does) at every phase
// of the loop — generation, scoring, log-probs, update, validation before
// training, at a validation step and at the end, a checkpoint write —
// returns ErrStopped with its last complete step checkpointed (none before
// the first step), and resuming it with --resume auto ends bitwise
// identical to the uninterrupted run: weights, optimizer moments, trainer
// state, metrics and validation lines.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

func TestStopAtEveryPhase(t *testing.T) {
	base, _ := fixture(t)
	base.Train.Steps = 4
	base.Validation.Every, base.Checkpoint.Every, base.Checkpoint.Keep = 2, 2, 0
	base.Run.Name = "uninterrupted"
	refDir := runFixture(t, base)

	cases := []struct {
		name  string
		phase Phase
		nth   int // stop at the nth time the phase starts
		ckpt  int // the newest checkpoint after the stop (-1: none)
	}{
		{"generation", PhaseGenerate, 3, 2},                  // step 3 abandoned: step 2 is the last complete one
		{"scoring", PhaseScore, 3, 2},                        // likewise
		{"log-probs", PhaseLogProbs, 1, -1},                  // step 1 abandoned: nothing to checkpoint
		{"update", PhaseUpdate, 3, 3},                        // step 3 finishes and is checkpointed
		{"validation before training", PhaseValidate, 1, -1}, // nothing ran yet
		{"validation at a checkpoint step", PhaseValidate, 2, 2},
		{"final validation", PhaseValidate, 3, 4},
		{"checkpoint write", PhaseCheckpoint, 1, 2}, // the write finishes; not written twice
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Run.Name = "stopped"
			cfg.Run.OutDir = t.TempDir()
			tr, err := New(cfg, io.Discard, "")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			seen := 0
			tr.onPhase = func(p Phase) {
				if p == c.phase {
					if seen++; seen == c.nth {
						cancel() // what the signal handler does
					}
				}
			}
			err = tr.Run(ctx)
			tr.Close()
			if !errors.Is(err, ErrStopped) {
				t.Fatalf("Run = %v, want ErrStopped", err)
			}
			root := filepath.Join(tr.Dir, "checkpoints")
			dir, m, skipped := checkpoint.Latest(root)
			switch {
			case len(skipped) > 0:
				t.Fatalf("damaged checkpoints after the stop: %v", skipped)
			case c.ckpt < 0 && dir != "":
				t.Fatalf("checkpoint %s written before any step completed", dir)
			case c.ckpt >= 0 && (m == nil || m.Step != c.ckpt):
				t.Fatalf("newest checkpoint %q (%v), want step %d", dir, m, c.ckpt)
			}
			// Resume (as the requeued job does) and finish.
			tr, err = New(cfg, io.Discard, "auto")
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			tr.Close()
			sameRun(t, refDir, tr.Dir, base.Train.Steps)
		})
	}
}

// sameRun checks that two run folders end in identical states and logs.
func sameRun(t *testing.T, refDir, dir string, steps int) {
	t.Helper()
	a, ma, _ := checkpoint.Latest(filepath.Join(refDir, "checkpoints"))
	b, mb, _ := checkpoint.Latest(filepath.Join(dir, "checkpoints"))
	if a == "" || b == "" || ma.Step != steps || mb.Step != steps {
		t.Fatalf("final checkpoints %q and %q, want step %d", a, b, steps)
	}
	for _, f := range []string{"model.safetensors", optimizerFile} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) || len(x) == 0 {
			t.Errorf("%s differs from the uninterrupted run's", f)
		}
	}
	if !bytes.Equal(ma.State, mb.State) {
		t.Errorf("trainer state differs:\n%s\n%s", ma.State, mb.State)
	}
	for _, f := range []string{"metrics.jsonl", "validation.jsonl"} {
		if x, y := stripTimes(t, filepath.Join(refDir, f)), stripTimes(t, filepath.Join(dir, f)); x != y {
			t.Errorf("%s differs from the uninterrupted run's:\n%.600s\n---\n%.600s", f, x, y)
		}
	}
}
