package main

// Training with generation ranks (dist.rollout_ranks R): the world's last R
// ranks generate, the others train (trainer/async.go). The whole world
// forms one group (the rollout exchange), the training ranks a second one
// of their own on the next port (everything else a data-parallel step
// sends, and NCCL's id); on CUDA training rank 0 and the generation ranks
// also form an NCCL communicator of their own for the weights.

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// trainWithGenerators runs this rank in its role.
func trainWithGenerators(cmd *cobra.Command, cfg trainer.Config, w dist.World, insecure bool, o trainer.Options, skipSelfTest bool) error {
	roles, err := dist.NewRoles(w, cfg.Dist.RolloutRanks)
	if err != nil {
		return err
	}
	world, err := joinGroup(cmd, w, cfg, insecure, os.Getenv)
	if err != nil {
		return err
	}
	defer world.Close()
	fmt.Fprintf(cmd.ErrOrStderr(), "data parallel: rank %d is the %s (%d training, %d generation ranks)\n",
		w.Rank, roles.Name(w.Rank), roles.Trainers(), roles.Rollout)
	o.Dist = &trainer.Dist{World: world, NewWeightLink: weightLinkFor(world, roles.Trainers(), cfg.DistTimeout())}
	if roles.Generator() {
		if err := selfTestDevice(cmd, cfg.Run.Device, cfg.Precision.MatMul, skipSelfTest); err != nil {
			return err
		}
		o.Backend = backend.Open
		g, err := trainer.OpenGenerator(cfg, cmd.ErrOrStderr(), o)
		if err != nil {
			world.Close() // the training ranks fail at once, naming this rank
			return err
		}
		defer g.Close()
		return g.Run(cmd.Context())
	}
	if roles.Trainers() > 1 {
		tw := roles.TrainingWorld()
		g, err := joinGroup(cmd, tw, cfg, insecure, os.Getenv)
		if err != nil {
			return fmt.Errorf("the training ranks' group (port %d): %w", tw.Port, err)
		}
		defer g.Close()
		o.Dist.Group, o.Dist.NewReducer = g, reducerFor(g, cfg.DistTimeout())
	}
	return openAndRun(cmd, cfg, o, skipSelfTest, func() { world.Close() })
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

// dryRunRoles prints the plans of a training rank (of W−R) and of a
// generation rank.
func dryRunRoles(cmd *cobra.Command, bud memplan.Budget, openErr error, world, rollout, zero int) error {
	if rollout >= world {
		return fmt.Errorf("--dry-run: dist.rollout_ranks = %d needs --world-size above it (got %d)", rollout, world)
	}
	gen := memplan.Generation(bud)
	bud.ForWorld(world-rollout, zero)
	fmt.Fprintf(cmd.OutOrStdout(), "training ranks (%d of %d):\n", world-rollout, world)
	fmt.Fprint(cmd.OutOrStdout(), bud.Report())
	fmt.Fprintf(cmd.OutOrStdout(), "generation ranks (%d of %d):\n", rollout, world)
	fmt.Fprint(cmd.OutOrStdout(), memplan.GenerationReport(gen))
	if openErr != nil {
		return fmt.Errorf("dry run: plans printed, but %w", openErr)
	}
	if bud.Check() != nil || gen.Check() != nil {
		return fmt.Errorf("dry run: the run does not fit (plans above)")
	}
	return nil
}
