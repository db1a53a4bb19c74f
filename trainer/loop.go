package trainer

// The training loop: steps, metrics lines, periodic validation and weight
// snapshots, and a clean stop when the context is cancelled (SIGINT,
// SIGTERM, SIGUSR1, SIGHUP) at any moment:
//   - during a step's generation, scoring or old/reference log-probs (before
//     the weights change), the step is abandoned: its state (step counter,
//     data cursor, controllers, verifier counts) is rolled back, so the
//     checkpoint holds the last complete step and the resumed run redoes it
//     exactly;
//   - during the update, the step finishes;
//   - during a validation, the validation is abandoned and marked due in the
//     checkpoint; the resumed run validates first;
//   - during a checkpoint write, the write finishes;
// then the last complete step is checkpointed (unless that checkpoint
// exists, or no step has run yet: the start needs none) and Run returns
// ErrStopped, which the command turns into exit status 3.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/internal/progress"
)

// Run trains for train.steps steps. In a data-parallel run every rank
// calls Run; a rank that fails closes its connections, so the others fail
// at their next collective instead of waiting for the time limit.
func (t *Trainer) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrStopped) {
			t.group.abort()
		}
	}()
	defer func() { err = t.rollouts.finish(err) }() // the generation ranks end with the run
	if err := t.rollouts.start(); err != nil {
		return err
	}
	cfg := t.Cfg
	sctx := t.stepContext(ctx)
	if t.valDue {
		if err := t.evaluateAndLog(sctx); err != nil {
			return t.stopOr(ctx, err)
		}
	}
	bar := progress.New(max(cfg.Train.Steps-t.step, 0), "train steps")
	defer bar.Finish()
	for t.step < cfg.Train.Steps {
		stop, cause, err := t.group.stopRequested(ctx, t.step)
		if err != nil {
			return err
		}
		if stop {
			return t.stop(cause)
		}
		met, err := t.Step(sctx)
		if err != nil {
			return t.stopOr(ctx, err)
		}
		if err := t.writeMetrics(met); err != nil {
			return err
		}
		bar.Add(1, int(met.ResponseLenMean*float64(met.NumRows)))
		if cfg.Train.LogEvery > 0 && t.step%cfg.Train.LogEvery == 0 {
			t.Log.Print(summary(met, cfg.Train.Steps))
		}
		every := cfg.Validation.Every
		t.valDue = t.val.ds != nil && ((every > 0 && t.step%every == 0) || t.step == cfg.Train.Steps)
		if t.valDue {
			if err := t.evaluateAndLog(sctx); err != nil {
				return t.stopOr(ctx, err)
			}
		}
		if n := cfg.Dist.StateCheckEvery; n > 0 && t.step%n == 0 {
			if err := t.group.checkState(t.step, "every "+fmt.Sprint(n)+" steps", t.stateHashes); err != nil {
				return err
			}
		}
		if cfg.Checkpoint.Every > 0 && t.step%cfg.Checkpoint.Every == 0 {
			if err := t.SaveCheckpoint(); err != nil {
				return err
			}
		}
	}
	if t.savedStep == t.step {
		return nil // the final step's checkpoint is already written
	}
	return t.SaveCheckpoint()
}

// stopOr stops cleanly when err is the context's cancellation (a step or a
// validation abandoned on a signal), and returns err otherwise.
func (t *Trainer) stopOr(ctx context.Context, err error) error {
	if cause := ctx.Err(); cause != nil && errors.Is(err, cause) {
		return t.stop(cause)
	}
	return err
}

// stop checkpoints the last complete step and returns ErrStopped.
func (t *Trainer) stop(cause error) error {
	if t.step == 0 {
		t.Log.Printf("stopping before the first step (%v): nothing to checkpoint yet; --resume auto starts the run from step 0", cause)
		return ErrStopped
	}
	t.Log.Printf("stopping at step %d: %v", t.step, cause)
	if t.savedStep != t.step {
		if err := t.SaveCheckpoint(); err != nil {
			return fmt.Errorf("stopped at step %d, and writing the checkpoint failed: %w", t.step, err)
		}
	}
	return ErrStopped
}

func (t *Trainer) writeMetrics(met *StepMetrics) error {
	line, err := json.Marshal(met)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	if _, err := t.metrics.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write metrics.jsonl: %w", err)
	}
	return nil
}

func (t *Trainer) evaluateAndLog(ctx context.Context) error {
	res, err := t.Evaluate(ctx)
	if err != nil {
		return err
	}
	t.valDue = false
	if t.savedStep == t.step {
		t.savedStep = -1 // that checkpoint still owes this validation (and its verifier counts): rewrite it at the end
	}
	var parts []string
	for name, b := range res.Benchmarks {
		parts = append(parts, fmt.Sprintf("%s %.3f", name, b.MeanAcc))
	}
	t.Log.Printf("validation step %d: mean@%d %.3f, pooled pass@%d %.3f, worst group %s %.3f (%s)",
		res.Step, res.N, res.MeanAcc, res.N, res.PooledPass, res.WorstGroup, res.WorstAcc, strings.Join(sorted(parts), ", "))
	return nil
}

// summary is the one-line step log.
func summary(m *StepMetrics, steps int) string {
	s := fmt.Sprintf("step %d/%d | acc %.3f reward %+.3f | len %.1f trunc %.2f | kl %.2e clip %.3f | gnorm %.3f | %.1fs (gen %.1fs, %.0f tok/s)",
		m.Step, steps, m.AccMean, m.RewardMean, m.ResponseLenMean, m.TruncationRate, m.KL, m.ClipFrac, m.GradNorm,
		m.StepSeconds, m.GenSeconds, m.GenTokensPerSec)
	if mm := m.MismatchMetrics; mm != nil {
		s += fmt.Sprintf(" | mismatch |Δ| %.1e kl %.1e w %.2f", mm.AbsMean, mm.KL, mm.ISWeightMean)
	}
	if d := m.DynamicSamplingMetrics; d != nil {
		s += fmt.Sprintf(" | kept %d/%d groups, %d rounds", d.KeptPrompts, d.GeneratedPrompts, d.Rounds)
		if d.CapHit {
			s += " (cap)"
		}
	}
	if o := m.OverlongMetrics; o != nil {
		s += fmt.Sprintf(" | overlong filtered %.2f penalty %+.3f", o.FilteredFrac, o.PenaltyMean)
	}
	if r := m.StepRecord; r != nil {
		s += fmt.Sprintf(" | mean bin %.2f", r.MeanBin)
	}
	return s
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}
