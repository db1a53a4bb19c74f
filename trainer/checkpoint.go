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
	"bufio"
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
	if err := t.checkState("at the checkpoint"); err != nil {
		return err
	}
	// Every rank's part first: under ZeRO its moments file, and with
	// sharded masters the whole fp32 policy gathered on rank 0.
	ck := &rankCheckpoint{t: t}
	masters, err := t.Opt.SaveRanks(ck)
	if err != nil {
		return err
	}
	if t.rank() == 0 {
		err = t.writeCheckpoint(masters, ck.begun)
	}
	if err := t.agree(fmt.Sprintf("checkpoint of step %d", t.step), err); err != nil {
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
		Controller: t.Ctrl.State(), Cursor: t.loader.Cursor(), Reward: t.rmet.Snapshot(), ValidationDue: t.valDue, Rollouts: t.flightInCheckpoint()})
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
	if err := tokenizer.CopyFiles(t.tokDir(), dir); err != nil {
		return err
	}
	if err := t.saveRollouts(dir); err != nil {
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
	if t.rank() == 0 {
		_, err = checkpoint.Begin(root, t.step)
	}
	if err := t.agree(fmt.Sprintf("checkpoint folder of step %d", t.step), err); err != nil {
		return err
	}
	c.begun = true
	w, err := checkpoint.Join(root, t.step)
	if err == nil {
		err = write(w.Dir())
	}
	return t.agreeAll(fmt.Sprintf("%s of step %d", what, t.step), err)
}

func (c *rankCheckpoint) Agree(what string, err error) error { return c.t.agreeAll(what, err) }

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
	if err := t.loader.Restore(st.Cursor); err != nil {
		return fmt.Errorf("resume %s: data cursor: %w", dir, err)
	}
	t.rmet.Restore(st.Reward)
	t.step, t.updates = st.Step, st.Updates
	if err := t.resumeRollouts(dir, st.Rollouts); err != nil {
		return err
	}
	t.Opt.SetSteps(st.OptimStep)
	t.savedStep = st.Step
	t.valDue = st.ValidationDue && t.val.ds != nil
	t.Log.Printf("resumed from %s at step %d", dir, st.Step)
	return nil
}

// openJSONL opens a per-step log for appending, first cutting it back to the
// lines whose "step" is at most keep (all lines go when keep < 0).
func openJSONL(path string, keep int) (*os.File, error) {
	var kept []byte
	if keep >= 0 {
		if raw, err := os.ReadFile(path); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(raw))
			sc.Buffer(make([]byte, 1<<20), 1<<28)
			for sc.Scan() {
				var head struct {
					Step int `json:"step"`
				}
				if json.Unmarshal(sc.Bytes(), &head) != nil || head.Step > keep {
					break
				}
				kept = append(append(kept, sc.Bytes()...), '\n')
			}
		}
	}
	if err := model.WriteFileAtomic(path, kept); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
}
