package trainer

// The training loop: steps, metrics lines, periodic validation and weight
// snapshots, and a clean stop when the context is cancelled (SIGINT,
// SIGTERM): the step in flight finishes, the weights are written, and Run
// returns the context's error.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/progress"
)

// Run trains for train.steps steps.
func (t *Trainer) Run(ctx context.Context) error {
	cfg := t.Cfg
	hasVal := t.val.ds != nil
	if hasVal && cfg.Validation.BeforeTraining && t.step == 0 {
		if err := t.validateAndLog(ctx); err != nil {
			return err
		}
	}
	bar := progress.New(cfg.Train.Steps-t.step, "train steps")
	defer bar.Finish()
	lastVal := -1
	for t.step < cfg.Train.Steps {
		if err := ctx.Err(); err != nil {
			t.Log.Printf("stopping at step %d: %v", t.step, err)
			if serr := t.SaveCheckpoint(); serr != nil {
				return fmt.Errorf("stopped at step %d, and writing the checkpoint failed: %w", t.step, serr)
			}
			return ErrStopped
		}
		met, err := t.Step(context.WithoutCancel(ctx)) // a started step always finishes
		if err != nil {
			return err
		}
		if err := t.writeMetrics(met); err != nil {
			return err
		}
		bar.Add(1, int(met.ResponseLenMean*float64(met.NumRows)))
		if cfg.Train.LogEvery > 0 && t.step%cfg.Train.LogEvery == 0 {
			t.Log.Print(summary(met, cfg.Train.Steps))
		}
		if hasVal && cfg.Validation.Every > 0 && t.step%cfg.Validation.Every == 0 {
			if err := t.validateAndLog(ctx); err != nil {
				return err
			}
			lastVal = t.step
		}
		if cfg.Checkpoint.Every > 0 && t.step%cfg.Checkpoint.Every == 0 {
			if err := t.SaveCheckpoint(); err != nil {
				return err
			}
		}
	}
	if hasVal && lastVal != t.step {
		if err := t.validateAndLog(ctx); err != nil {
			return err
		}
	}
	if last, _, _ := checkpoint.Latest(t.checkpointRoot()); last == filepath.Join(t.checkpointRoot(), checkpoint.Name(t.step)) {
		return nil // the final step's checkpoint is already written
	}
	return t.SaveCheckpoint()
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

func (t *Trainer) validateAndLog(ctx context.Context) error {
	res, err := t.Validate(ctx)
	if err != nil {
		return err
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
	if r := m.StepRecord; r != nil {
		s += fmt.Sprintf(" | mean bin %.2f", r.MeanBin)
	}
	return s
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}
