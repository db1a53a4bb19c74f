package trainer

// The rank group: how the training ranks work together. The trainer holds
// one, chosen when it opens (openFolder): soloRanks for one process, or
// dataParallel (dp.go) for several ranks that each train a share of the
// step and exchange rows and update results. Step, the loop, validation
// and checkpoints call it the same way in every mode, so they read as the
// algorithm; a new way of spreading the training over processes is a new
// implementation of rankGroup, chosen in openFolder.

import (
	"context"
	"io"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
)

// Reducer sums tensors over the ranks (a replicated run's gradient
// all-reduce, optim.AllReducer). A reducer that also runs ZeRO's
// collectives (optim.ShardComm: cuda.Comm, over NCCL) runs those too;
// otherwise they go through the control plane (optim.HostComm).
type Reducer interface {
	// AllReduceSum replaces every tensor by its element-wise sum over the
	// ranks; every rank ends with the same values.
	AllReduceSum(ts []*model.Tensor) error
}

// Dist places a run in a data-parallel job (Options.Dist; nil or a group of
// one rank: one process, today's path).
type Dist struct {
	Group *dist.Group
	// NewReducer makes the gradient reducer once the backend is open; nil
	// sums through Group in host memory (optim.HostComm), the CPU
	// backend's way. The binary passes an NCCL reducer on CUDA.
	NewReducer func(b model.Backend) (Reducer, error)
	// World, with dist.rollout_ranks R > 0, is the whole job's group:
	// the training ranks first (Group is theirs alone; nil or one rank when
	// a single rank trains), then the R generation ranks (OpenGenerator).
	// It carries the rollout exchange only (async.go).
	World *dist.Group
	// NewWeightLink, with World, makes the weights' device link once the
	// backend is open (asynclink.go); every world rank calls it, and it
	// returns nil on the training ranks but rank 0, and where the
	// backend has none (the CPU's: the weights then travel in the
	// exchange). The binary passes cuda.OpenWeightLink on CUDA.
	NewWeightLink func(b model.Backend) (WeightLink, error)
}

// rankGroup is the training ranks' side of a run: this rank's place, its
// share of the step's work and the exchanges that give every rank the
// one-process result.
type rankGroup interface {
	// rank and size: this rank and the number of training ranks.
	rank() int
	size() int
	// open makes what the group needs on backend b (the gradient
	// reducer) and sizes the memory plan for the group's world.
	open(b model.Backend, plan *memplan.Budget, zero int) error
	// optimSetup places s (the optimizer's settings) in the group.
	optimSetup(s optim.Setup, b model.Backend) optim.Setup
	// setStep names the step in the group's collectives (their errors).
	setStep(step int)
	// slice is the prompts [lo, hi) of rollout counts n this rank generates.
	slice(n []int) (lo, hi int)
	// forwardBatches is the batches of rows this rank computes the old
	// and reference log-probs of: micro-batches of mb rows, or the rows
	// of the micro-batches it trains (spans).
	forwardBatches(spans []microSpan, rows, mb int) []microSpan
	// shareRows gives every rank every rank's scored rows, in plan order,
	// and rmet the verifier counts of the whole step (before + each
	// rank's).
	shareRows(rows []rowData, before reward.MetricsSnapshot, rmet *reward.Metrics) ([]rowData, error)
	// shareUpdate completes signal, kl, the rows' entropies and mismatch
	// figures, and recs with the other ranks' parts; recs come back in
	// (epoch, micro-batch) order.
	shareUpdate(spans []microSpan, rows []rowData, signal, kl []float64, recs []microRec, epochs int) ([]microRec, error)
	// shareValidation gives every rank the n validation prompts'
	// outcomes and rmet the whole validation's verifier counts.
	shareValidation(step, n int, recs []valPrompt, before reward.MetricsSnapshot, rmet *reward.Metrics) ([]valPrompt, error)
	// shareResume gives every rank rank 0's decision of where to resume
	// from (or its error).
	shareResume(dir string, m *checkpoint.Manifest, err error) (string, *checkpoint.Manifest, error)
	// stepContext is the context a step and a validation run under.
	stepContext(ctx context.Context) context.Context
	// stopRequested reports, at a step boundary, whether the run stops,
	// and why.
	stopRequested(ctx context.Context, step int) (bool, error, error)
	// agree makes rank 0's outcome of something only it does every
	// rank's; agreeAll fails every rank when any rank's err is set.
	agree(what string, err error) error
	agreeAll(what string, err error) error
	// checkState compares the ranks' state hashes (hashes) and fails on a
	// mismatch.
	checkState(step int, when string, hashes func() (string, string, error)) error
	// abort ends the group after a failure, so the other ranks fail at
	// their next collective instead of waiting for the time limit.
	abort()
	// describe is the group as the log's first lines name it ("": nothing
	// to say).
	describe() string
	close() error
}

// soloRanks is a one-process run: one rank, nothing exchanged.
type soloRanks struct{}

func (soloRanks) rank() int                                             { return 0 }
func (soloRanks) size() int                                             { return 1 }
func (soloRanks) open(model.Backend, *memplan.Budget, int) error        { return nil }
func (soloRanks) optimSetup(s optim.Setup, _ model.Backend) optim.Setup { return s }
func (soloRanks) setStep(int)                                           {}
func (soloRanks) slice(n []int) (lo, hi int)                            { return 0, len(n) }
func (soloRanks) stepContext(ctx context.Context) context.Context       { return ctx }
func (soloRanks) agree(_ string, err error) error                       { return err }
func (soloRanks) agreeAll(_ string, err error) error                    { return err }
func (soloRanks) abort()                                                {}
func (soloRanks) describe() string                                      { return "" }
func (soloRanks) close() error                                          { return nil }

func (soloRanks) forwardBatches(_ []microSpan, rows, mb int) []microSpan {
	var out []microSpan
	for lo := 0; lo < rows; lo += mb {
		out = append(out, microSpan{lo: lo, hi: min(lo+mb, rows)})
	}
	return out
}

func (soloRanks) shareRows(rows []rowData, _ reward.MetricsSnapshot, _ *reward.Metrics) ([]rowData, error) {
	return rows, nil
}

func (soloRanks) shareUpdate(_ []microSpan, _ []rowData, _, _ []float64, recs []microRec, _ int) ([]microRec, error) {
	return recs, nil
}

func (soloRanks) shareValidation(_, _ int, recs []valPrompt, _ reward.MetricsSnapshot, _ *reward.Metrics) ([]valPrompt, error) {
	return recs, nil
}

func (soloRanks) shareResume(dir string, m *checkpoint.Manifest, err error) (string, *checkpoint.Manifest, error) {
	return dir, m, err
}

// stopRequested: in one process the run stops when ctx is cancelled.
func (soloRanks) stopRequested(ctx context.Context, _ int) (bool, error, error) {
	return ctx.Err() != nil, ctx.Err(), nil
}

func (soloRanks) checkState(int, string, func() (string, string, error)) error { return nil }

// openRanks picks the rank group of a run placed by d (nil: one process).
func openRanks(d *Dist) rankGroup {
	if d == nil || d.Group == nil || d.Group.Size() <= 1 {
		return soloRanks{}
	}
	return &dataParallel{g: d.Group, rnk: d.Group.Rank(), n: d.Group.Size(), newReducer: d.NewReducer}
}

// closeReducer closes a reducer that holds resources (NCCL's).
func closeReducer(r Reducer) error {
	if c, ok := r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// DistTimeout is dist.timeout_s, the control plane's time limit.
func (c Config) DistTimeout() time.Duration {
	return time.Duration(c.Dist.TimeoutS * float64(time.Second))
}

// rank is this process's training rank (0 in a one-process run).
func (t *Trainer) rank() int { return t.group.rank() }

// stepContext is the context a step and a validation run under: where
// other processes take part, a signal must not abandon a step on one rank
// only, so the stop waits for the next step boundary (stopRequested).
func (t *Trainer) stepContext(ctx context.Context) context.Context {
	return t.rollouts.stepContext(t.group.stepContext(ctx))
}

var (
	_ rankGroup = soloRanks{}
	_ rankGroup = (*dataParallel)(nil)
)
