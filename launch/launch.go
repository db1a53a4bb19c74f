// Package launch starts a training job's rank: where this process stands in
// the job (flags, else Slurm's variables, else alone), its device, the
// control plane to the other ranks and the job token its members prove
// they hold, the gradient reducer and the weights' link, the rank's role
// (a training or a generation rank), and then preflight → GPU self-test →
// open → run. `gdrotrain train` is flags plus one call to Run; a test or
// another program launches a job the same way.
package launch

import (
	"context"
	"io"
	"os"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Options is one rank's launch.
type Options struct {
	Config trainer.Config
	// Place is where this process stands in the job; its zero value takes
	// Slurm's variables under srun, else one process.
	Place Place
	// Insecure forms the ranks' group without the job token (--insecure-dist).
	Insecure bool
	// Trainer holds the run folder's options (resume, overwrite, …); Run
	// sets its Backend and Dist.
	Trainer      trainer.Options
	SkipSelfTest bool                // on CUDA, no GPU self-test first
	Getenv       func(string) string // the environment (nil: os.Getenv)
	Log          io.Writer           // progress and warnings (nil: os.Stderr)
}

// Run launches this rank and runs it to the end of training (or until ctx
// is cancelled: then the trainer checkpoints and returns trainer.ErrStopped).
func Run(ctx context.Context, o Options) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	cfg := o.Config
	w, err := o.Place.World(o.Getenv)
	if err != nil {
		return err
	}
	if cfg.Run.Device, err = RankDevice(cfg.Run.Device, w, o.Getenv); err != nil {
		return err
	}
	o.Config = cfg
	if cfg.Dist.RolloutRanks > 0 {
		return runRoles(ctx, o, w)
	}
	g, err := o.join(ctx, w)
	if err != nil {
		return err
	}
	if g != nil {
		defer g.Close()
		o.Trainer.Dist = &trainer.Dist{Group: g, NewReducer: reducerFor(g, cfg.DistTimeout())}
	}
	return openAndRun(ctx, o, nil)
}

// openAndRun ends every training rank's launch: the input paths and the
// run folder first (a mistake costs no self-test and no model load), then
// the device self-test, Open and Run. abort, when not nil, runs when Open
// fails, before the caller's deferred closes.
func openAndRun(ctx context.Context, o Options, abort func()) error {
	cfg, to := o.Config, o.Trainer
	if err := trainer.Preflight(cfg, to); err != nil {
		return err
	}
	if err := selftest.ForDevice(cfg.Run.Device, cfg.Precision.MatMul, cfg.Precision.ExactLogProbs, o.SkipSelfTest, o.Log); err != nil {
		return err
	}
	to.Backend = backend.Open
	t, err := trainer.Open(cfg, o.Log, to)
	if err != nil {
		if abort != nil {
			abort()
		}
		return err
	}
	defer t.Close()
	return t.Run(ctx)
}
