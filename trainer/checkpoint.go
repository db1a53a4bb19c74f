package trainer

// Checkpoints and exact resume. A checkpoint holds everything the loop needs
// to continue as if it had never stopped: the float32 policy (as a Hugging
// Face folder), the AdamW moments and step, the controllers' and
// classifier's state, the data cursor, the step and update counters and the
// verifier's counters. Randomness needs no state: every draw is keyed by
// (seed, step, prompt UID, rollout index). The reference model is recorded
// by path and hash, not copied. On resume, metrics.jsonl and
// validation.jsonl are cut back to the checkpoint's step, so the resumed run
// rewrites exactly the lines the uninterrupted run wrote.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// ErrStopped is returned by Run when a signal stopped the run and its last
// complete state is safe (in a checkpoint, or before the first step, the
// run's start); the batch script requeues the job (exit status 3).
var ErrStopped = errors.New("stopped by a signal; the last complete step is checkpointed: continue with --resume auto")

// State is the trainer's resumable state (the manifest's "state").
type State struct {
	Step       int                    `json:"step"`
	Updates    int                    `json:"optimizer_updates"`
	OptimStep  int                    `json:"adamw_step"`
	Controller gdro.State             `json:"controller"`
	Cursor     data.Cursor            `json:"data_cursor"`
	Reward     reward.MetricsSnapshot `json:"verifier_counts"`
	// ValidationDue: the run stopped during this step's validation, which
	// the resumed run does first. Absent (false) in older checkpoints.
	ValidationDue bool `json:"validation_due,omitempty"`
	// FirstStep is the first step the run folder's metrics.jsonl holds: 1,
	// or one past the step of a checkpoint from elsewhere the run started
	// from. Absent (0: taken as 1) in older checkpoints.
	FirstStep int `json:"first_step,omitempty"`
	// Rollouts is the plan the generation ranks were given and have not
	// returned (train.max_off_policy_steps 1, async.go), with the version
	// and hash of its weights, which the checkpoint holds in
	// rollout-weights.bin. Absent in a synchronous run.
	Rollouts *flight `json:"rollouts_in_flight,omitempty"`
}

// checkpointRoot is RUN/checkpoints.
func (t *Trainer) checkpointRoot() string { return filepath.Join(t.Dir, "checkpoints") }

// SaveCheckpoint writes a complete checkpoint of the current step and prunes
// old ones. In a data-parallel run every rank calls it: the ranks first
// compare their state hashes, rank 0 writes, and the others wait for its
// outcome (their state is the same, so there is nothing else to write).
func (t *Trainer) SaveCheckpoint() error {
	checkpointing.Add(1)
	defer checkpointing.Add(-1)
	t.phase(PhaseCheckpoint)
	if err := t.group.checkState(t.step, "at the checkpoint", t.stateHashes); err != nil {
		return err
	}
	// Every rank's part first: under ZeRO its moments file, and with
	// sharded masters the whole fp32 policy gathered on rank 0.
	ck := &rankCheckpoint{t: t}
	masters, err := t.Opt.SaveRanks(ck)
	if err != nil {
		return err
	}
	if t.group.rank() == 0 {
		err = t.writeCheckpoint(masters, ck.begun)
	}
	if err := t.group.agree(fmt.Sprintf("checkpoint of step %d", t.step), err); err != nil {
		return err
	}
	t.savedStep = t.step
	return nil
}

// checkpointing counts the SaveCheckpoint calls in progress in this process.
var checkpointing atomic.Int32

// Checkpointing reports whether a checkpoint is being written in this
// process: the command's signal handler then lets it finish whatever
// signal follows (cmd/gdrotrain/main.go).
func Checkpointing() bool { return checkpointing.Load() > 0 }

// writeCheckpoint writes the checkpoint folder and prunes old ones; the
// parameters in masters (fp32 masters gathered from the ranks) are
// written from there rather than downloaded. begun: the folder holds the
// ranks' files already (rankCheckpoint.PerRank).
func (t *Trainer) writeCheckpoint(masters map[string][]float32, begun bool) error {
	begin := checkpoint.Begin
	if begun {
		begin = checkpoint.Join
	}
	w, err := begin(t.checkpointRoot(), t.step)
	if err != nil {
		return err
	}
	if err := t.writeCheckpointFiles(w.Dir(), masters); err != nil {
		w.Abort()
		return err
	}
	state, err := json.Marshal(State{Step: t.step, Updates: t.updates, OptimStep: t.Opt.Steps(),
		Controller: t.Ctrl.State(), Cursor: t.loader.Cursor(), Reward: t.rmet.Snapshot(), ValidationDue: t.valDue, Rollouts: t.rollouts.inFlight(), FirstStep: t.firstStep})
	if err != nil {
		w.Abort()
		return fmt.Errorf("checkpoint state: %w", err)
	}
	cfg, err := json.Marshal(t.Cfg)
	if err != nil {
		w.Abort()
		return err
	}
	pe := t.Cfg.Checkpoint.PermanentEvery
	dir, err := w.Commit(checkpoint.Manifest{Reference: t.refID, Config: cfg, State: state,
		Permanent: pe > 0 && t.step%pe == 0})
	if err != nil {
		w.Abort()
		return err
	}
	t.Log.Printf("checkpoint: %s", dir)
	return checkpoint.Prune(t.checkpointRoot(), t.Cfg.Checkpoint.Keep)
}

// writeCheckpointFiles writes the policy folder files (the parameters in
// masters from there) and the optimizer state the ranks hold alike.
func (t *Trainer) writeCheckpointFiles(dir string, masters map[string][]float32) error {
	if t.Policy.A != nil {
		// A PEFT adapter folder over model.path (its identity and weights'
		// hash in the manifest): the base is never copied.
		if err := model.SaveAdapters(t.Policy.B, t.Policy.Cfg, t.Policy.A, dir, t.refID.Path, model.F32); err != nil {
			return err
		}
	} else if err := model.WriteFolderWith(dir, t.Policy.Cfg, t.Policy.B, t.Policy.P, model.F32, 0, masters); err != nil {
		return err
	}
	if err := tokenizer.CopyFiles(t.Cfg.tokDir(), dir); err != nil {
		return err
	}
	if err := t.rollouts.save(dir); err != nil {
		return err
	}
	return t.Opt.SaveShared(dir)
}

// rankCheckpoint is the checkpoint of the current step as the optimizer's
// strategy writes its part of it (optim.Checkpoint). begun: rank 0 has
// begun the folder for the ranks' files, and joins it to write the rest.
type rankCheckpoint struct {
	t     *Trainer
	begun bool
}

func (c *rankCheckpoint) Step() int { return c.t.step }

// PerRank has every rank write its files into the checkpoint folder rank 0
// begins (checkpoint.Join), before rank 0 writes the rest and commits; it
// returns once every rank has written, or with every rank's failure.
func (c *rankCheckpoint) PerRank(what string, write func(dir string) error) error {
	t := c.t
	root := t.checkpointRoot()
	var err error
	if t.group.rank() == 0 {
		_, err = checkpoint.Begin(root, t.step)
	}
	if err := t.group.agree(fmt.Sprintf("checkpoint folder of step %d", t.step), err); err != nil {
		return err
	}
	c.begun = true
	w, err := checkpoint.Join(root, t.step)
	if err == nil {
		err = write(w.Dir())
	}
	return t.group.agreeAll(fmt.Sprintf("%s of step %d", what, t.step), err)
}

func (c *rankCheckpoint) Agree(what string, err error) error { return c.t.group.agreeAll(what, err) }

var _ optim.Checkpoint = (*rankCheckpoint)(nil)

// resume restores the state of checkpoint dir (verified, and its config and
// reference model checked by findResume).
func (t *Trainer) resume(dir string, m *checkpoint.Manifest) error {
	var st State
	if err := json.Unmarshal(m.State, &st); err != nil {
		return fmt.Errorf("resume %s: state: %w", dir, err)
	}
	if st.Step != m.Step {
		return fmt.Errorf("resume %s: the trainer state is for step %d but the manifest says step %d (edited?)", dir, st.Step, m.Step)
	}
	// The weights through the optimizer, which may hold their fp32
	// masters; the moments of any world size.
	if err := t.Opt.LoadWeights(dir); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := t.Opt.LoadMoments(dir); err != nil {
		return fmt.Errorf("resume %s: %w", dir, err)
	}
	if err := t.Ctrl.Restore(st.Controller); err != nil {
		return fmt.Errorf("resume %s: controller: %w", dir, err)
	}
	if err := t.restoreCursor(dir, st.Cursor); err != nil {
		return err
	}
	t.rmet.Restore(st.Reward)
	t.step, t.updates = st.Step, st.Updates
	t.firstStep = max(st.FirstStep, 1)
	if err := t.rollouts.resume(dir, st.Rollouts); err != nil {
		return err
	}
	t.Opt.SetSteps(st.OptimStep)
	t.savedStep = st.Step
	t.valDue = st.ValidationDue && t.val.ds != nil
	t.Log.Printf("resumed from %s at step %d", dir, st.Step)
	return nil
}

// logCheck says what start checks in a per-step log it cuts back to a
// resumed checkpoint's step.
type logCheck struct {
	// everyStep: one line per step (metrics.jsonl), from first to the
	// checkpoint's step; validation.jsonl has lines at some steps only.
	everyStep bool
	first     int  // the run folder's first step (State.FirstStep)
	repair    bool // Options.RepairMetrics
	logf      func(string, ...any)
}

// openJSONL opens a per-step log for appending, first cutting it back to the
// lines whose "step" is at most keep (all lines go when keep < 0). On a
// resume the lines kept must be whole: a line that is not a step's JSON
// object (but for a last line cut short by a kill), a missing file, or a
// missing, repeated or out-of-order step of metrics.jsonl is refused, naming
// the file and line, unless c.repair, which keeps the valid lines, drops the
// others and logs what it dropped and which steps have no line.
func openJSONL(path string, keep int, c logCheck) (*os.File, error) {
	var kept []byte
	if keep >= 0 {
		var err error
		if kept, err = keptLines(path, keep, c); err != nil {
			return nil, err
		}
	}
	if err := model.WriteFileAtomic(path, kept); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
}

// repairHint is how to continue past a damaged per-step log.
const repairHint = "HINT: restore the file from a copy, or resume with --repair-metrics to keep its valid lines and continue without the others"

// keptLines returns the lines of path that a run resumed at step keep
// keeps (see openJSONL).
func keptLines(path string, keep int, c logCheck) ([]byte, error) {
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && (!c.everyStep || keep < c.first):
		return nil, nil // no line is owed
	case errors.Is(err, os.ErrNotExist) && c.repair:
		c.logf("--repair-metrics: %s is missing: no metrics line for %s", path, stepRange(c.first, keep))
		return nil, nil
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("resume at step %d: %s is missing, so there would be no metrics line for %s. %s", keep, path, stepRange(c.first, keep), repairHint)
	case err != nil:
		return nil, fmt.Errorf("resume: %w", err)
	}
	var kept []byte
	lines := bytes.SplitAfter(raw, []byte("\n"))
	next, reached := c.first, false // the step the next metrics line must have; a line for step keep was kept
	for i, line := range lines {
		n := i + 1
		body := bytes.TrimSpace(line)
		if len(body) == 0 {
			continue
		}
		var head struct {
			Step *int `json:"step"`
		}
		if err := json.Unmarshal(body, &head); err != nil || head.Step == nil {
			why := "no \"step\""
			if err != nil {
				why = err.Error()
			}
			switch {
			case reached:
				return kept, nil // past the checkpoint's step: dropped with what follows
			case i == len(lines)-1 && !bytes.HasSuffix(line, []byte("\n")):
				c.logf("resume: dropping the last line of %s (line %d), cut short by a kill: %s", path, n, why)
				return kept, nil
			case c.repair:
				c.logf("--repair-metrics: dropping line %d of %s: %s", n, path, why)
				continue
			}
			return nil, fmt.Errorf("resume at step %d: %s line %d is not a step's JSON object (%s); resuming would drop every line after it. %s", keep, path, n, why, repairHint)
		}
		step := *head.Step
		if step > keep {
			break
		}
		if c.everyStep && step != next {
			switch {
			case c.repair && step < next:
				c.logf("--repair-metrics: dropping line %d of %s: step %d again after step %d", n, path, step, next-1)
				continue
			case c.repair:
				c.logf("--repair-metrics: %s has no line for %s (line %d has step %d)", path, stepRange(next, step-1), n, step)
			case step < next:
				return nil, fmt.Errorf("resume at step %d: %s line %d has step %d after step %d (two runs' lines mixed?). %s", keep, path, n, step, next-1, repairHint)
			default:
				return nil, fmt.Errorf("resume at step %d: %s line %d has step %d, but there is no line for %s (lines deleted?). %s", keep, path, n, step, stepRange(next, step-1), repairHint)
			}
		}
		kept = append(append(kept, body...), '\n')
		next, reached = step+1, reached || step == keep
	}
	if c.everyStep && next <= keep {
		if !c.repair {
			return nil, fmt.Errorf("resume at step %d: %s ends before step %d: there is no line for %s (lines deleted?). %s", keep, path, keep, stepRange(next, keep), repairHint)
		}
		c.logf("--repair-metrics: %s has no line for %s", path, stepRange(next, keep))
	}
	return kept, nil
}

// stepRange writes steps a…b.
func stepRange(a, b int) string {
	if a == b {
		return fmt.Sprintf("step %d", a)
	}
	return fmt.Sprintf("steps %d–%d", a, b)
}

// restoreCursor continues the data where the checkpoint left it, on the
// very same rows: ids and content (data.Cursor.Content). Changed content is
// refused unless --allow-config-change; a checkpoint too old to record it is
// resumed with a log line saying what could not be checked.
func (t *Trainer) restoreCursor(dir string, c data.Cursor) error {
	now := t.loader.Cursor().Content
	switch {
	case c.Content == "":
		t.Log.Printf("resume %s: the checkpoint predates content fingerprints of the training data: its row ids match data.train, but whether their prompts and answers changed cannot be checked (the next checkpoint records it)", dir)
	case c.Content != now && t.allowConfigChange:
		t.Log.Printf("resume: --allow-config-change: the prompts or answers of data.train changed since %s (content fingerprint %s → %s); continuing on the new content", dir, c.Content, now)
		c.Content = now
	}
	err := t.loader.Restore(c)
	if errors.Is(err, data.ErrContentChanged) {
		return fmt.Errorf("resume %s: %w. HINT: resume with the data files the run started with, start a new run, or pass --allow-config-change to continue on the changed rows", dir, err)
	}
	if err != nil {
		return fmt.Errorf("resume %s: data cursor: %w", dir, err)
	}
	return nil
}
