package launch

// The ranks' control plane, which its members join by proving they hold
// the job's token, and what rides on it: the gradient reducer (NCCL on
// CUDA, the control plane's fixed-order sum on the CPU) and the weights'
// link to the generation ranks.

import (
	"context"
	"fmt"
	"time"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// join forms the control plane of a world of several ranks (nil for one
// process). Its ranks prove they hold the job's token, read from the
// environment (dist.TokenEnv), unless o.Insecure opts out; without either
// it refuses to start. The token is never printed.
func (o Options) join(ctx context.Context, w dist.World) (*dist.Group, error) {
	if w.Size == 1 {
		return nil, nil
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.Log, "data parallel: "+format+"\n", args...)
	}
	do := dist.Options{Timeout: o.Config.DistTimeout(), Bind: o.Config.Dist.Bind, Logf: logf}
	how := "ranks prove they hold " + dist.TokenEnv
	switch v := o.Getenv(dist.TokenEnv); {
	case o.Insecure:
		how = "unauthenticated"
		ignored := ""
		if v != "" {
			ignored = "; " + dist.TokenEnv + " is ignored"
		}
		logf("--insecure-dist: the group is unauthenticated: any process that reaches rank 0's port can join it as a missing rank, read what it sends and add to its sums%s", ignored)
	case v == "":
		return nil, fmt.Errorf("data parallel: %s is not set: the ranks of a job prove to each other that they hold this secret, so that no other process joins the job (the Slurm scripts set it; by hand, run export %s=$(openssl rand -hex 32) once and start every rank from that shell), or give every rank --insecure-dist for an unauthenticated group", dist.TokenEnv, dist.TokenEnv)
	default:
		tok, err := dist.ParseToken(v)
		if err != nil {
			return nil, fmt.Errorf("data parallel: %w", err)
		}
		do.Token = tok
	}
	logf("%s: joining the group (%s)", w, how)
	// A signal while the group forms (a rank that died at start-up leaves
	// the others waiting for it up to dist.timeout_s) stops the wait: exit
	// status 3 with nothing to checkpoint, as a signal while loading.
	g, err := dist.JoinContext(ctx, w, do)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("data parallel: %v (before any step: nothing to save): %w", err, trainer.ErrStopped)
	}
	return g, err
}

// reducerFor makes the gradient reducer of backend b: NCCL on CUDA (the id
// travels over the control plane), the control plane's fixed-order sum on
// the CPU (optim.HostComm).
func reducerFor(g *dist.Group, timeout time.Duration) func(model.Backend) (trainer.Reducer, error) {
	return func(b model.Backend) (trainer.Reducer, error) {
		cb, ok := b.(*cuda.Backend)
		if !ok {
			return optim.HostComm{B: b, G: g}, nil
		}
		comm, err := cuda.OpenCommOver(cb, g, timeout)
		if err != nil {
			return nil, err
		}
		// Its AllReduceSum and Close make it the trainer's reducer, its ZeRO
		// collectives (optim.ShardComm) the optimizer's.
		return comm, nil
	}
}

// weightLinkFor makes the weights' device link of backend b: an NCCL
// communicator of training rank 0 and the generation ranks on CUDA (its
// id travels over the world's control plane), none on the CPU (the
// weights then travel in the rollout exchange).
func weightLinkFor(world *dist.Group, trainers int, timeout time.Duration) func(model.Backend) (trainer.WeightLink, error) {
	return func(b model.Backend) (trainer.WeightLink, error) {
		cb, ok := b.(*cuda.Backend)
		if !ok {
			return nil, nil
		}
		l, err := cuda.OpenWeightLink(cb, world, trainers, timeout)
		if err != nil || l == nil { // the training ranks but rank 0 hold none
			return nil, err
		}
		return l, nil
	}
}
