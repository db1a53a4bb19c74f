package gdro

// replay.go: gdro-replay, the controllers driven by a logged trace.
//
// Trace format: JSON Lines, one object per step, blank lines ignored, unknown
// fields rejected:
//
//	{"step": 1, "prompts": [
//	  {"uid": "open-r1/DAPO-Math-17k-Processed:train:17",
//	   "correct": [true, false, false, true, …],   // per recorded rollout
//	   "reward":  [1, -1, -1, 1, …],               // optional if correct given
//	   "loss":    [0.013, -0.002, …],              // ℓ_r, docs/algorithm.md §6.2 (optional)
//	   "kl":      [0.0004, …]},                    // optional, surrogate_kl
//	  …]}
//
//   - step is optional; when present it must increase from line to line.
//   - Every prompt needs a non-empty uid and correct or reward (correct wins;
//     otherwise correct = reward > 0.5, docs/algorithm.md §3.5). All arrays of a prompt
//     have one entry per recorded rollout, in rollout order.
//   - loss is required when the configuration reads it (prompt.signal
//     surrogate or surrogate_kl with Prompt-GDRO on, rollout.utility neg_loss
//     or loss in paper mode); kl when prompt.signal is surrogate_kl.
//   - Record at least as many rollouts per prompt as the largest arm the
//     replayed configuration may allocate (n_max; n_mean without
//     Rollout-GDRO). Prompt i of a step uses its first n_i recorded rollouts.
//
// The losses in a trace were computed with the advantages of the group that
// was logged; replaying with other group sizes reuses them as they are (an
// approximation only the surrogate signals see).
//
// Output: one ReplayRecord per step — the StepRecord fields plus the
// per-prompt decisions uids, prompt_bin, prompt_n, prompt_mult.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// TraceStep is one line of a replay trace.
type TraceStep struct {
	Step    int           `json:"step,omitempty"`
	Prompts []TracePrompt `json:"prompts"`
}

// TracePrompt is one prompt's recorded rollouts (all arrays (k)).
type TracePrompt struct {
	UID     string    `json:"uid"`
	Correct []bool    `json:"correct,omitempty"`
	Reward  []float64 `json:"reward,omitempty"`
	Loss    []float64 `json:"loss,omitempty"`
	KL      []float64 `json:"kl,omitempty"`
}

// ReplayRecord is one output line of gdro-replay.
type ReplayRecord struct {
	*StepRecord
	UIDs       []string  `json:"uids"`        // (N)
	PromptBin  []int     `json:"prompt_bin"`  // (N) class per prompt
	PromptN    []int     `json:"prompt_n"`    // (N) rollouts used per prompt
	PromptMult []float64 `json:"prompt_mult"` // (N) advantage multiplier applied
}

// ReplaySummary condenses a replay.
type ReplaySummary struct {
	Steps   int     `json:"steps"`
	Prompts int     `json:"prompts"`
	Rows    int     `json:"rows"`
	MuFinal float64 `json:"mu_final"`
	Method  string  `json:"method"`
}

// Replay runs the controllers configured by cfg over the trace read from r
// and writes one ReplayRecord per step to w.
func Replay(cfg Config, r io.Reader, w io.Writer) (*ReplaySummary, error) {
	ctrl, err := New(cfg)
	if err != nil {
		return nil, err
	}
	needLoss := (cfg.Prompt.Enabled && cfg.Prompt.Signal != SignalReward) ||
		(cfg.Rollout.Enabled && cfg.Rollout.Mode == ModePaper && cfg.Rollout.Utility != UtilityVariance)
	needKL := cfg.Prompt.Enabled && cfg.Prompt.Signal == SignalSurrogateKL
	br := bufio.NewReader(r)
	bw := bufio.NewWriter(w)
	sum := &ReplaySummary{Method: ctrl.Method()}
	lastStep := 0
	for line := 1; ; line++ {
		raw, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, fmt.Errorf("trace line %d: %w", line, rerr)
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			var ts TraceStep
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ts); err != nil {
				return nil, fmt.Errorf("trace line %d: %w", line, err)
			}
			if ts.Step != 0 {
				if ts.Step <= lastStep {
					return nil, fmt.Errorf("trace line %d: step %d does not increase (previous %d)", line, ts.Step, lastStep)
				}
				lastStep = ts.Step
			}
			rec, err := replayStep(ctrl, &ts, needLoss, needKL)
			if err != nil {
				return nil, fmt.Errorf("trace line %d: %w", line, err)
			}
			if err := writeJSONLine(bw, rec); err != nil {
				return nil, err
			}
			sum.Steps++
			sum.Prompts += rec.NumPrompts
			sum.Rows += rec.NumRows
			if rr := rec.RolloutRecord; rr != nil {
				sum.MuFinal = rr.Mu + rr.DMu
			}
		}
		if rerr != nil { // io.EOF
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("gdro replay: %w", err)
	}
	if sum.Steps == 0 {
		// Nothing replayed is no result: an empty file, a wrong path to a
		// file being written, a pipe that delivered nothing.
		return nil, errors.New("the trace holds no step (empty, or blank lines only)")
	}
	return sum, nil
}

func replayStep(ctrl *Controller, ts *TraceStep, needLoss, needKL bool) (*ReplayRecord, error) {
	uids, err := traceUIDs(ts, needLoss, needKL)
	if err != nil {
		return nil, err
	}
	plan, err := ctrl.Plan(uids)
	if err != nil {
		return nil, err
	}
	w, err := ctrl.Weights(plan)
	if err != nil {
		return nil, err
	}
	rows, err := traceRows(ts, plan, needLoss, needKL)
	if err != nil {
		return nil, err
	}
	rec, err := ctrl.Observe(plan, rows)
	if err != nil {
		return nil, err
	}
	return &ReplayRecord{StepRecord: rec, UIDs: uids, PromptBin: plan.Classes, PromptN: plan.N, PromptMult: w.Prompt}, nil
}

// traceUIDs checks a trace step's prompts (each once, with rollouts and
// the arrays the configuration reads, of one length) and returns their
// UIDs in order.
func traceUIDs(ts *TraceStep, needLoss, needKL bool) ([]string, error) {
	if len(ts.Prompts) == 0 {
		return nil, fmt.Errorf("no prompts")
	}
	uids := make([]string, len(ts.Prompts))
	first := make(map[string]int, len(ts.Prompts))
	for i := range ts.Prompts {
		tp := &ts.Prompts[i]
		if tp.UID == "" {
			return nil, fmt.Errorf("prompts[%d]: missing uid", i)
		}
		// A prompt appears once per step: a repeat would be classified and
		// observed twice, which no training step does.
		if j, dup := first[tp.UID]; dup {
			return nil, fmt.Errorf("prompts[%d]: uid %s repeats prompts[%d] (a step lists each prompt once)", i, tp.UID, j)
		}
		first[tp.UID] = i
		uids[i] = tp.UID
		if err := checkTracePrompt(i, tp, needLoss, needKL); err != nil {
			return nil, err
		}
	}
	return uids, nil
}

// checkTracePrompt checks prompts[i]'s arrays.
func checkTracePrompt(i int, tp *TracePrompt, needLoss, needKL bool) error {
	k := len(tp.Correct)
	if k == 0 {
		k = len(tp.Reward)
	}
	if k == 0 {
		return fmt.Errorf("prompts[%d] (uid %s): needs correct or reward", i, tp.UID)
	}
	for _, f := range []struct {
		name string
		n    int
	}{{"correct", len(tp.Correct)}, {"reward", len(tp.Reward)}, {"loss", len(tp.Loss)}, {"kl", len(tp.KL)}} {
		if f.n != 0 && f.n != k {
			return fmt.Errorf("prompts[%d] (uid %s): %s has %d entries, other arrays %d", i, tp.UID, f.name, f.n, k)
		}
	}
	if needLoss && len(tp.Loss) == 0 {
		return fmt.Errorf("prompts[%d] (uid %s): missing loss, which the configuration reads", i, tp.UID)
	}
	if needKL && len(tp.KL) == 0 {
		return fmt.Errorf("prompts[%d] (uid %s): missing kl, which prompt.signal %q reads", i, tp.UID, SignalSurrogateKL)
	}
	return nil
}

// traceRows is the rows the controller observes: each prompt's first
// plan.N[i] recorded rollouts.
func traceRows(ts *TraceStep, plan *Plan, needLoss, needKL bool) (Rows, error) {
	R := plan.Rows()
	rows := Rows{Correct: make([]bool, 0, R)}
	if needLoss {
		rows.Loss = make([]float64, 0, R)
	}
	if needKL {
		rows.KL = make([]float64, 0, R)
	}
	for i := range ts.Prompts {
		tp := &ts.Prompts[i]
		n := plan.N[i]
		k := max(len(tp.Correct), len(tp.Reward))
		if k < n {
			return Rows{}, fmt.Errorf("prompts[%d] (uid %s): %d recorded rollouts, the allocation needs %d (record at least the largest arm per prompt)", i, tp.UID, k, n)
		}
		for j := 0; j < n; j++ {
			if len(tp.Correct) > 0 {
				rows.Correct = append(rows.Correct, tp.Correct[j])
			} else {
				rows.Correct = append(rows.Correct, tp.Reward[j] > 0.5)
			}
		}
		if needLoss {
			rows.Loss = append(rows.Loss, tp.Loss[:n]...)
		}
		if needKL {
			rows.KL = append(rows.KL, tp.KL[:n]...)
		}
	}
	return rows, nil
}
