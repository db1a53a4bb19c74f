package launch

// Training with generation ranks (dist.rollout_ranks R): the world's last R
// ranks generate, the others train (trainer/async.go). The whole world
// forms one group (the rollout exchange), the training ranks a second one
// of their own on the next port (everything else a data-parallel step
// sends, and NCCL's id); on CUDA training rank 0 and the generation ranks
// also form an NCCL communicator of their own for the weights.

import (
	"context"
	"fmt"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// runRoles runs this rank of world w in its role.
func runRoles(ctx context.Context, o Options, w dist.World) error {
	cfg := o.Config
	roles, err := dist.NewRoles(w, cfg.Dist.RolloutRanks)
	if err != nil {
		return err
	}
	world, err := o.join(ctx, w)
	if err != nil {
		return err
	}
	defer world.Close()
	fmt.Fprintf(o.Log, "data parallel: rank %d is the %s (%d training, %d generation ranks)\n",
		w.Rank, roles.Name(w.Rank), roles.Trainers(), roles.Rollout)
	o.Trainer.Dist = &trainer.Dist{World: world, NewWeightLink: weightLinkFor(world, roles.Trainers(), cfg.DistTimeout())}
	if roles.Generator() {
		return generate(ctx, o, world)
	}
	if roles.Trainers() > 1 {
		tw := roles.TrainingWorld()
		g, err := o.join(ctx, tw)
		if err != nil {
			return fmt.Errorf("the training ranks' group (port %d): %w", tw.Port, err)
		}
		defer g.Close()
		o.Trainer.Dist.Group, o.Trainer.Dist.NewReducer = g, reducerFor(g, cfg.DistTimeout())
	}
	return openAndRun(ctx, o, func() { world.Close() })
}

// generate runs a generation rank until the training ranks stop it.
func generate(ctx context.Context, o Options, world *dist.Group) error {
	cfg := o.Config
	if err := selftest.ForDevice(cfg.Run.Device, cfg.Precision.MatMul, cfg.Precision.ExactLogProbs, o.SkipSelfTest, o.Log); err != nil {
		return err
	}
	o.Trainer.Backend = backend.Open
	g, err := trainer.OpenGenerator(cfg, o.Log, o.Trainer)
	if err != nil {
		world.Close() // the training ranks fail at once, naming this rank
		return err
	}
	defer g.Close()
	return g.Run(ctx)
}
