package launch

// A job's memory plan (train --dry-run): one rank's of W, or a training
// and a generation rank's with dist.rollout_ranks.

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/backend"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Plan prints to out the memory plan of one rank of world ranks (ZeRO-1
// moments when dist.zero_stage is 1) against the device's memory, or
// against assumeGiB when given (no device is opened); log receives the
// device's messages. Without a GPU it still prints the plan, saying the
// device could not be opened. It fails when the run will not fit.
func Plan(out, log io.Writer, cfg trainer.Config, assumeGiB float64, world int) error {
	logf := func(format string, a ...any) { fmt.Fprintf(log, format+"\n", a...) }
	var bud memplan.Budget
	var err error
	if assumeGiB > 0 {
		if bud, err = trainer.PlanBudget(cfg); err != nil {
			return err
		}
		bud.Device += fmt.Sprintf(", assumed %.0f GiB", assumeGiB)
		bud.Available = int64(assumeGiB * (1 << 30))
	} else {
		_, bud, err = trainer.OpenBackend(cfg, backend.Open, logf)
		if err != nil && bud.Plan.Total() == 0 {
			return err
		}
	}
	if r := cfg.Dist.RolloutRanks; r > 0 {
		return planRoles(out, bud, err, world, r, cfg.Dist.ZeROStage)
	}
	bud.ForWorld(world, cfg.Dist.ZeROStage)
	fmt.Fprint(out, bud.Report())
	if err != nil {
		return fmt.Errorf("dry run: plan printed, but %w", err)
	}
	if bud.Check() != nil {
		return fmt.Errorf("dry run: the run does not fit (plan above)")
	}
	return nil
}

// planRoles prints the plans of a training rank (of W−R) and of a
// generation rank.
func planRoles(out io.Writer, bud memplan.Budget, openErr error, world, rollout, zero int) error {
	if rollout >= world {
		return fmt.Errorf("--dry-run: dist.rollout_ranks = %d needs --world-size above it (got %d)", rollout, world)
	}
	gen := memplan.Generation(bud)
	bud.ForWorld(world-rollout, zero)
	fmt.Fprintf(out, "training ranks (%d of %d):\n", world-rollout, world)
	fmt.Fprint(out, bud.Report())
	fmt.Fprintf(out, "generation ranks (%d of %d):\n", rollout, world)
	fmt.Fprint(out, memplan.GenerationReport(gen))
	if openErr != nil {
		return fmt.Errorf("dry run: plans printed, but %w", openErr)
	}
	if bud.Check() != nil || gen.Check() != nil {
		return fmt.Errorf("dry run: the run does not fit (plans above)")
	}
	return nil
}
