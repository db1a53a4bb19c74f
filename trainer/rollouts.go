package trainer

// The rollout source: where a step's scored rows come from. The trainer
// holds one, chosen when it opens (openFolder): localRollouts, this
// process's sampler (each training rank generating its slice of the
// prompts, step.go), or asyncState, the generation ranks (async.go). A
// new place to generate rollouts (another server, a replay of stored
// rows) is a new implementation of rolloutSource, chosen in openFolder.

import (
	"context"
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// rolloutSource gives each step its rows and keeps whatever it has in
// flight across checkpoints.
type rolloutSource interface {
	// open makes what the source needs on backend b (a weights' link).
	open(b model.Backend) error
	// start runs as Run starts (the first plan goes out); finish as it
	// ends, with Run's error, which it returns (joined with its own).
	start() error
	finish(err error) error
	// collect is the step's rows, prompt-contiguous in plan order, scored.
	collect(ctx context.Context, met *StepMetrics) (stepBatch, error)
	// stepContext is the context a step runs under.
	stepContext(ctx context.Context) context.Context
	// inFlight is what a checkpoint records of the rollouts under way (nil:
	// none); save writes their weights into a checkpoint folder (rank 0),
	// and resume restores what a checkpoint recorded (f, nil: none).
	inFlight() *flight
	save(dir string) error
	resume(dir string, f *flight) error
	close() error
}

// localRollouts generates the step's rows with the policy this process
// trains (Trainer.collect).
type localRollouts struct{ t *Trainer }

func (localRollouts) open(model.Backend) error { return nil }
func (localRollouts) start() error             { return nil }
func (localRollouts) finish(err error) error   { return err }
func (l localRollouts) collect(ctx context.Context, met *StepMetrics) (stepBatch, error) {
	return l.t.collect(ctx, met)
}
func (localRollouts) stepContext(ctx context.Context) context.Context { return ctx }
func (localRollouts) inFlight() *flight                               { return nil }
func (localRollouts) save(string) error                               { return nil }
func (localRollouts) close() error                                    { return nil }

// resume: a checkpoint of a run with generation ranks may hold rollouts in
// flight, which this run cannot finish.
func (localRollouts) resume(dir string, f *flight) error {
	if f != nil {
		return fmt.Errorf("resume %s: the checkpoint has rollouts in flight (step %d) but this run has no generation ranks (dist.rollout_ranks)", dir, f.Step)
	}
	return nil
}

// openRollouts picks the rollout source of t's run, placed by d (nil: one
// process).
func openRollouts(t *Trainer, cfg Config, d *Dist) (rolloutSource, error) {
	if d == nil || d.World == nil {
		return localRollouts{t}, nil
	}
	return newAsyncState(t, cfg, d)
}

var (
	_ rolloutSource = localRollouts{}
	_ rolloutSource = (*asyncState)(nil)
)
