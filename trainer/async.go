package trainer

// Generation and training at the same time (dist.rollout_ranks R,
// train.max_off_policy_steps k; docs/data-parallel.md "Generation ranks",
// docs/algorithm.md §5.13). The world's first W−R ranks train, the last R
// generate (Generator, below). Each step the training ranks and the
// generation ranks meet in one collective of the whole world's group, the
// rollout exchange: rank 0 sends a command (the next step's plan, with the
// weights it must be generated with when they are new, each version
// numbered and hashed), and each generation rank returns the rows of the
// command it last received, stamped with the version and hash of the
// weights that generated them. The training ranks check both on every row.
// Where the backend has a device link (CUDA: asynclink.go), the weights
// are not in the command: training rank 0 broadcasts them over NCCL right
// after the exchange, as bf16 where the products read bf16.
//
// With k = 0 a step sends its own plan with the weights of the step
// before, then waits for its rows in a second exchange: the synchronous
// run's trajectory, bit for bit (the generation ranks draw with the same
// keys; TestAsyncSyncMatchesOneProcess). With k = 1, step t's exchange
// receives step t's rows (generated with the weights of step t−2 while
// step t−1 trained) and sends step t+1's plan with the weights of step t−1;
// then step t trains while step t+1 generates. The plan of step t+1 is
// therefore made before step t is observed: the controllers plan one step
// ahead and observe in step order.
//
// Old log-probs: the training ranks compute them with the weights they
// hold (those of step t−1, the proximal policy of decoupled PPO), and the
// gap to the weights that generated the rows is corrected with the
// sampler's own log-probs through the rollout-correction weights
// π_old/π_samp (correction.go), which k = 1 therefore requires. Recomputing
// them with the generating weights instead would need a second copy of the
// policy on every training rank and a second forward, and would still
// leave the sampler/trainer kernel mismatch to correct.
//
// A checkpoint at step t records the plan in flight (step t+1), the
// version of its weights (t−1) and their hash, and holds those weights
// (rollout-weights.bin, written by rank 0, which keeps the bytes it sent).
// A resumed run sends the same plan with the same weights, and the
// generation ranks draw with keys of (step, prompt UID, rollout index,
// weight version), so they regenerate the same rows.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// rolloutWeightsFile holds, in a checkpoint of an asynchronous run, the
// weights of the rollouts in flight as they were sent: every trainable
// parameter in model.Params.Named order, little-endian float32 (or bf16
// where they travel so over a device link, asynclink.go).
const rolloutWeightsFile = "rollout-weights.bin"

// AsyncMetrics are a step's figures of the generation ranks (present with
// dist.rollout_ranks).
type AsyncMetrics struct {
	// WeightVersion is the step whose weights generated this step's rows
	// (0: the initial weights).
	WeightVersion int `json:"weight_version"`
	// OffPolicySteps is how many steps those weights lag the weights the
	// step trains: step − 1 − weight_version.
	OffPolicySteps int `json:"off_policy_steps"`
	// SyncBytes are the weight bytes sent to the generation ranks in this
	// step's exchanges (0 when their version did not change).
	SyncBytes int64 `json:"weight_sync_bytes"`
	// PackSeconds: rank 0 reading and hashing the weights it sent;
	// LoadSeconds: the slowest generation rank checking and loading them.
	PackSeconds float64 `json:"time_weight_pack_s"`
	LoadSeconds float64 `json:"time_weight_load_s"`
	// WaitSeconds is the time the training ranks spent in the step's
	// exchanges: waiting for the rows, and the transfer.
	WaitSeconds float64 `json:"time_rollout_wait_s"`
}

// flight is a step's plan sent (or to be sent) to the generation ranks,
// whose rows have not come back; checkpoints record it.
type flight struct {
	Step    int        `json:"step"`
	Version int        `json:"weight_version"`
	Hash    string     `json:"weights_sha256"`
	Epoch   int        `json:"epoch"`
	Sent    bool       `json:"sent"`
	Plan    *gdro.Plan `json:"plan"`
}

// asyncState is the rollout source of a run with generation ranks: the
// training ranks' side of the rollout exchange.
type asyncState struct {
	t        *Trainer // the run it feeds
	world    *dist.Group
	trainers int // W − R
	k        int // train.max_off_policy_steps
	// flight is the plan whose rows are still to come (k = 1, between steps).
	flight *flight
	// bytes (rank 0) are the weights of version bytesVersion, hashed
	// bytesHash: the newest version encoded, kept for the checkpoint.
	bytes        []byte
	bytesVersion int
	bytesHash    string
	// genHash is the hash of the weights the generation ranks hold ("": none).
	genHash string
	// link, on training rank 0 when the backend has one, carries the
	// weights on the device (asynclink.go); nil: in the exchange.
	link WeightLink
	met  AsyncMetrics
	// newLink makes link once the backend is open (Dist.NewWeightLink).
	newLink func(model.Backend) (WeightLink, error)
}

func newAsyncState(t *Trainer, cfg Config, d *Dist) (*asyncState, error) {
	r := cfg.Dist.RolloutRanks
	w := d.World
	if r < 1 || r >= w.Size() {
		return nil, fmt.Errorf("dist.rollout_ranks = %d with a world of %d ranks: want 1 … %d generation ranks", r, w.Size(), w.Size()-1)
	}
	trainers := w.Size() - r
	if w.Rank() >= trainers {
		return nil, fmt.Errorf("world rank %d is a generation rank (dist.rollout_ranks %d of %d): it runs OpenGenerator, not Open", w.Rank(), r, w.Size())
	}
	if g := d.Group; g != nil && (g.Size() != trainers || g.Rank() != w.Rank()) {
		return nil, fmt.Errorf("the training group is rank %d of %d but the world's training ranks are 0 … %d and this is world rank %d", g.Rank(), g.Size(), trainers-1, w.Rank())
	}
	if (d.Group == nil || d.Group.Size() == 1) && trainers > 1 {
		return nil, fmt.Errorf("%d training ranks (dist.rollout_ranks %d of %d) need their own group (Dist.Group)", trainers, r, w.Size())
	}
	return &asyncState{t: t, world: w, trainers: trainers, k: cfg.Train.MaxOffPolicySteps, bytesVersion: -1, newLink: d.NewWeightLink}, nil
}

// asyncAgrees: the settings of the generation ranks (async.go).
func (c Config) asyncAgrees() error {
	var p problems
	k := c.Train.MaxOffPolicySteps
	switch {
	case k < 0 || k > 1:
		p.add("train.max_off_policy_steps = %d: 0 (synchronous) or 1 (one step off-policy); more is not built", k)
	case k == 1 && c.Dist.RolloutRanks < 1:
		p.add("train.max_off_policy_steps 1 generates on ranks of their own: set dist.rollout_ranks ≥ 1")
	case k == 1 && !c.Loss.RolloutCorrection.Corrects():
		p.add("train.max_off_policy_steps 1 trains on rows generated one step earlier: set loss.rollout_correction.mode (token_tis, token_mis, seq_tis or seq_mis) to correct for it (docs/algorithm.md §5.13)")
	}
	if c.Dist.RolloutRanks > 0 && c.Train.DynamicSampling.Enabled {
		p.add("dist.rollout_ranks with train.dynamic_sampling: rounds planned from the rows of earlier rounds are not built on generation ranks")
	}
	return p.err()
}

// versionSeed is the sampling key of rows generated with the weights of
// step version for step: the run's seed when version is step−1 (a
// synchronous run's draws, bit for bit), else a key of the version too.
func versionSeed(seed uint64, step, version int) uint64 {
	if version == step-1 {
		return seed
	}
	return rng.Key(seed, rng.HashString("weight version"), uint64(version))
}

// rolloutCmd is rank 0's part of a rollout exchange.
type rolloutCmd struct {
	Work *rolloutWork // nil: nothing new to generate
	Stop bool         // the run is over: the generation ranks return
	// Stopped: by a signal (the generation ranks return ErrStopped too).
	Stopped bool
}

// rolloutWork is one step's generation: the plan's prompts and counts and
// the weights to generate with.
type rolloutWork struct {
	Step, Version int
	Hash          string // hex SHA-256 of the version's weights (their payload over a link)
	Weights       []byte // nil: the generation ranks hold this version, or Link
	UIDs          []string
	N             []int
	// Link: the weights follow over the device link right after the
	// exchange (asynclink.go).
	Link bool
}

// rolloutReply is a generation rank's part: the rows of the work it last
// received, in plan order, each stamped with the weights that made it.
type rolloutReply struct {
	Step, Version int
	Hash          string
	Rows          []wireRow
	Versions      []int // per row
	Verifier      reward.MetricsSnapshot
	GenSeconds    float64
	LoadSeconds   float64
	Preemptions   int
	Err           string
}

// encodeWeights reads every trainable parameter of m (Named order: the
// weights, or a LoRA run's adapters alone, the base being the same on
// every rank) as float32 little-endian and hashes them.
func encodeWeights(m *model.Model) ([]byte, string, error) {
	var n int
	named := m.Trainable().Named(m.Cfg)
	for _, np := range named {
		n += (*np.Ptr).Numel()
	}
	out := make([]byte, 0, 4*n)
	for _, np := range named {
		host := make([]float32, (*np.Ptr).Numel())
		m.B.Download(*np.Ptr, host)
		for _, x := range host {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
		}
	}
	if err := m.B.Err(); err != nil {
		return nil, "", fmt.Errorf("read the weights to send: %w", err)
	}
	return out, hashWeights(out), nil
}

func hashWeights(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// loadWeights writes encodeWeights' bytes into m.
func loadWeights(m *model.Model, b []byte) error {
	off := 0
	for _, np := range m.Trainable().Named(m.Cfg) {
		n := (*np.Ptr).Numel()
		if off+4*n > len(b) {
			return fmt.Errorf("weights: %d bytes end inside %s", len(b), np.Name)
		}
		host := make([]float32, n)
		for i := range host {
			host[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*i:]))
		}
		m.B.Upload(*np.Ptr, host)
		off += 4 * n
	}
	if off != len(b) {
		return fmt.Errorf("weights: %d bytes, the model has %d", len(b), off)
	}
	return m.B.Err()
}

// planFlight takes the next prompts and plans step (the controllers plan
// with what they have observed so far: steps before step−k), to be
// generated with the weights of step max(0, step−1−k).
func (a *asyncState) planFlight(step int) (*flight, error) {
	t := a.t
	prompts, epoch := t.loader.Next()
	uids := make([]string, len(prompts))
	for i, p := range prompts {
		uids[i] = p.UID
	}
	plan, err := t.Ctrl.Plan(uids)
	if err != nil {
		return nil, err
	}
	plan.Step = step // planned k steps ahead; observed as step
	return &flight{Step: step, Version: max(0, step-1-a.k), Epoch: epoch, Plan: plan}, nil
}

// work is the command for f. Rank 0 attaches the weights of f's version
// when the generation ranks do not hold them: the policy's own (version
// t.step−1 during a step, t.step between steps) or, after a resume, those
// the checkpoint kept.
func (a *asyncState) work(f *flight, during bool) (*rolloutWork, error) {
	t := a.t
	w := &rolloutWork{Step: f.Step, Version: f.Version, UIDs: f.Plan.UIDs, N: f.Plan.N}
	if t.rank() != 0 {
		return w, nil
	}
	if err := a.encodeVersion(f.Version, during); err != nil {
		return nil, err
	}
	f.Hash, w.Hash = a.bytesHash, a.bytesHash
	if a.bytesHash != a.genHash {
		w.Link = a.link != nil
		if !w.Link {
			w.Weights = a.bytes
		}
	}
	return w, nil
}

// encodeVersion makes a.bytes the weights of version v (rank 0).
func (a *asyncState) encodeVersion(v int, during bool) error {
	t := a.t
	if a.bytesVersion == v {
		return nil
	}
	held := t.step
	if during {
		held--
	}
	if v != held {
		return fmt.Errorf("step %d: the rollouts need the weights of step %d; the policy holds those of step %d and no checkpoint kept them", t.step, v, held)
	}
	t0 := time.Now()
	var b []byte
	var h string
	var err error
	if a.link != nil {
		ts, half := linkTensors(t.Policy, a.link.HalfProducts())
		if b, err = a.link.Payload(ts, half); err != nil {
			return fmt.Errorf("read the weights to send: %w", err)
		}
		h = hashWeights(b)
	} else if b, h, err = encodeWeights(t.Policy); err != nil {
		return err
	}
	a.bytes, a.bytesHash, a.bytesVersion = b, h, v
	a.met.PackSeconds += time.Since(t0).Seconds()
	return nil
}

// exchange runs one rollout exchange: rank 0's cmd out (the others pass
// nil), every generation rank's reply back (nil where it had none).
func (a *asyncState) exchange(cmd *rolloutCmd) (*rolloutCmd, []*rolloutReply, error) {
	t := a.t
	var blob []byte
	if t.rank() == 0 {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(cmd); err != nil {
			return nil, nil, fmt.Errorf("rollout exchange: encode: %w", err)
		}
		blob = buf.Bytes()
		if w := cmd.Work; w != nil && w.Link {
			a.met.SyncBytes += int64(len(a.bytes))
		} else if w != nil {
			a.met.SyncBytes += int64(len(w.Weights))
		}
	}
	a.world.SetStep(t.step)
	t0 := time.Now()
	parts, err := a.world.AllGather("rollouts", blob)
	a.met.WaitSeconds += time.Since(t0).Seconds()
	if err != nil {
		who := fmt.Sprintf("generation ranks %d … %d", a.trainers, a.world.Size()-1)
		if a.trainers == a.world.Size()-1 {
			who = fmt.Sprintf("generation rank %d", a.trainers)
		}
		return nil, nil, fmt.Errorf("rollout exchange with the %s: %w", who, err)
	}
	var got rolloutCmd
	if err := gob.NewDecoder(bytes.NewReader(parts[0])).Decode(&got); err != nil {
		return nil, nil, fmt.Errorf("rollout exchange: rank 0's command: %w", err)
	}
	replies := make([]*rolloutReply, len(parts)-a.trainers)
	for j, p := range parts[a.trainers:] {
		if len(p) == 0 {
			continue
		}
		var r rolloutReply
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&r); err != nil {
			return nil, nil, fmt.Errorf("rollout exchange: generation rank %d's rows: %w", a.trainers+j, err)
		}
		replies[j] = &r
	}
	return &got, replies, nil
}

// send runs an exchange that sends f (nil: nothing) and returns the
// replies; the training ranks learn f's weight hash from rank 0's command.
func (a *asyncState) send(f *flight, during bool) ([]*rolloutReply, error) {
	t := a.t
	cmd := &rolloutCmd{}
	if f != nil {
		w, err := a.work(f, during)
		if err != nil {
			return nil, err
		}
		cmd.Work = w
	}
	got, replies, err := a.exchange(cmd)
	if err != nil {
		return nil, err
	}
	if cmd.Work != nil && cmd.Work.Link { // rank 0: the weights follow, on the device
		t0 := time.Now()
		err := a.sendWeights(f.Version, during)
		a.met.WaitSeconds += time.Since(t0).Seconds()
		if err != nil {
			return nil, err
		}
	}
	if f != nil {
		if got.Work == nil || got.Work.Step != f.Step || got.Work.Version != f.Version {
			return nil, fmt.Errorf("step %d: rank 0 sent other work than this rank planned (step %d, version %d): the training ranks diverged", t.step, f.Step, f.Version)
		}
		f.Hash, f.Sent = got.Work.Hash, true
		a.genHash = got.Work.Hash
	}
	return replies, nil
}

// collect is the step's rows from the generation ranks, generated with
// the weights the step's flight named.
func (a *asyncState) collect(_ context.Context, met *StepMetrics) (stepBatch, error) {
	t := a.t
	a.met = AsyncMetrics{}
	t.phase(PhaseGenerate)
	var cur *flight
	var replies []*rolloutReply
	var err error
	if a.k == 0 {
		if cur, err = a.planFlight(t.step); err != nil {
			return stepBatch{}, err
		}
		if replies, err = a.send(cur, true); err != nil {
			return stepBatch{}, err
		}
		if err := noRows(replies, a.trainers); err != nil {
			return stepBatch{}, err
		}
		if replies, err = a.send(nil, true); err != nil {
			return stepBatch{}, err
		}
	} else {
		cur = a.flight
		if cur == nil || cur.Step != t.step || !cur.Sent {
			return stepBatch{}, fmt.Errorf("step %d: no rollouts in flight for it (the pipeline lost a step)", t.step)
		}
		// The next step's plan, before this step is observed; sent unless
		// the run ends here (the checkpoint still records it, so that a
		// longer resumed run continues as one that never stopped).
		next, err := a.planFlight(t.step + 1)
		if err != nil {
			return stepBatch{}, err
		}
		var out *flight
		if t.step < t.Cfg.Train.Steps {
			out = next
		} else if t.rank() == 0 {
			if err := a.encodeVersion(next.Version, true); err != nil {
				return stepBatch{}, err
			}
			next.Hash = a.bytesHash
		}
		if replies, err = a.send(out, true); err != nil {
			return stepBatch{}, err
		}
		a.flight = next
	}
	t.phase(PhaseScore)
	rows, err := a.acceptRows(cur, replies, met)
	if err != nil {
		return stepBatch{}, err
	}
	met.Epoch = cur.Epoch
	prompts := make([]data.Prompt, len(cur.Plan.UIDs))
	for i, u := range cur.Plan.UIDs {
		prompts[i] = t.train.byUID[u]
	}
	for i := range rows {
		rows[i].penalty = t.Cfg.Loss.Overlong.Penalty(len(rows[i].tokens)-rows[i].start, t.Cfg.Sampling.MaxNewTokens)
		rows[i].masked = t.Cfg.Loss.Overlong.Filter && rows[i].truncated
	}
	am := a.met
	am.WeightVersion, am.OffPolicySteps = cur.Version, t.step-1-cur.Version
	met.AsyncMetrics = &am
	return stepBatch{prompts: prompts, plan: cur.Plan, rows: rows, rounds: 1}, nil
}

// noRows checks that no generation rank returned rows where none were due.
func noRows(replies []*rolloutReply, trainers int) error {
	for j, r := range replies {
		if r != nil {
			if r.Err != "" {
				return fmt.Errorf("generation rank %d: %s", trainers+j, r.Err)
			}
			return fmt.Errorf("generation rank %d returned rows of step %d that no step waits for", trainers+j, r.Step)
		}
	}
	return nil
}

// acceptRows checks the generation ranks' replies against f — every row
// made for f's step with f's weight version and hash, the rows in plan
// order with the plan's counts — and returns the rows, adding the
// verifier counts and generation figures to the step's.
func (a *asyncState) acceptRows(f *flight, replies []*rolloutReply, met *StepMetrics) ([]rowData, error) {
	t := a.t
	var rows []rowData
	counts := t.rmet.Snapshot()
	for j, r := range replies {
		rank := a.trainers + j
		if r == nil {
			return nil, fmt.Errorf("step %d: generation rank %d returned no rows", f.Step, rank)
		}
		if r.Err != "" {
			return nil, fmt.Errorf("step %d: generation rank %d: %s", f.Step, rank, r.Err)
		}
		if r.Step != f.Step || r.Version != f.Version || r.Hash != f.Hash || len(r.Versions) != len(r.Rows) {
			return nil, fmt.Errorf("step %d: generation rank %d returned rows of step %d made with weights version %d (sha256 %.12s), want step %d with version %d (sha256 %.12s)",
				t.step, rank, r.Step, r.Version, r.Hash, f.Step, f.Version, f.Hash)
		}
		for i, w := range r.Rows {
			if r.Versions[i] != f.Version {
				return nil, fmt.Errorf("step %d: generation rank %d: row %d was generated with weights version %d, want %d", t.step, rank, i, r.Versions[i], f.Version)
			}
			rows = append(rows, fromWire(w))
		}
		counts = addCounts(counts, r.Verifier)
		met.GenSeconds = max(met.GenSeconds, r.GenSeconds)
		met.RolloutPreemptions += r.Preemptions
		a.met.LoadSeconds = max(a.met.LoadSeconds, r.LoadSeconds)
	}
	// Plan order: prompt i's N[i] rows, prompts in order.
	want := f.Plan.N
	i := 0
	for p, n := range want {
		for k := 0; k < n; k++ {
			if i >= len(rows) || rows[i].prompt != p || rows[i].group != n {
				return nil, fmt.Errorf("step %d: the generation ranks' rows do not follow the plan (%d rows, want %d; row %d)", t.step, len(rows), f.Plan.Rows(), i)
			}
			i++
		}
	}
	if i != len(rows) {
		return nil, fmt.Errorf("step %d: the generation ranks returned %d rows, the plan has %d", t.step, len(rows), i)
	}
	t.rmet.Restore(counts)
	return rows, nil
}

// start starts the pipeline at the start of Run: with k = 1 the
// first step's plan goes out now — a fresh plan, or the one a checkpoint
// recorded, with the weights it kept.
func (a *asyncState) start() error {
	t := a.t
	if a.k == 0 || t.step >= t.Cfg.Train.Steps {
		return nil
	}
	if a.flight == nil {
		f, err := a.planFlight(t.step + 1)
		if err != nil {
			return err
		}
		a.flight = f
	}
	replies, err := a.send(a.flight, false)
	if err != nil {
		return err
	}
	return noRows(replies, a.trainers)
}

// finish ends the generation ranks' loop when Run returns: a stop
// command after a clean end or a stop (rows still in flight are
// discarded: the checkpoint records their plan); after another error the
// world's group is closed, which fails the generation ranks at once.
func (a *asyncState) finish(err error) error {
	if err != nil && !errors.Is(err, ErrStopped) {
		a.world.Close()
		return err
	}
	if _, _, xerr := a.exchange(&rolloutCmd{Stop: true, Stopped: err != nil}); xerr != nil {
		return errors.Join(err, xerr)
	}
	return err
}

// save writes the weights of the rollouts in flight into a checkpoint
// folder (rank 0).
func (a *asyncState) save(dir string) error {
	if a.flight == nil {
		return nil
	}
	if a.bytesVersion != a.flight.Version || a.bytesHash != a.flight.Hash {
		return fmt.Errorf("checkpoint: the weights of the rollouts in flight (version %d) are not at hand (version %d kept)", a.flight.Version, a.bytesVersion)
	}
	return model.WriteFileAtomic(filepath.Join(dir, rolloutWeightsFile), a.bytes)
}

// resume restores the flight a checkpoint recorded; rank 0 reads its
// weights and checks their hash.
func (a *asyncState) resume(dir string, f *flight) error {
	t := a.t
	if a.k == 0 || f == nil {
		if a.k > 0 && t.step > 0 {
			return fmt.Errorf("resume %s: train.max_off_policy_steps %d, but the checkpoint records no rollouts in flight", dir, a.k)
		}
		return nil
	}
	f.Sent = false
	a.flight = f
	if t.rank() != 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, rolloutWeightsFile))
	if err != nil {
		return fmt.Errorf("resume %s: the weights of the rollouts in flight: %w", dir, err)
	}
	if h := hashWeights(b); h != f.Hash {
		return fmt.Errorf("resume %s: %s has sha256 %.12s, the state records %.12s for version %d", dir, rolloutWeightsFile, h, f.Hash, f.Version)
	}
	if a.link != nil {
		if ts, half := linkTensors(t.Policy, a.link.HalfProducts()); payloadSize(ts, half) != len(b) {
			return fmt.Errorf("resume %s: %s holds %d bytes, this run's weights travel in %d (a checkpoint of a run whose weights travelled in other types: the CPU's control plane sends float32, the device link bf16 matrices under bf16 products)",
				dir, rolloutWeightsFile, len(b), payloadSize(ts, half))
		}
	}
	a.bytes, a.bytesHash, a.bytesVersion = b, f.Hash, f.Version
	return nil
}

// Generator is a generation rank (dist.rollout_ranks): it holds the
// policy, the tokenizer, the training prompts and the verifier, and in a
// loop receives a plan with the weights to use, samples and scores its
// share of the rows, and returns them at the next exchange.
type Generator struct {
	cfg Config
	log *log.Logger
	// maker generates and scores with the rank's policy (policy), whose
	// weights each work's version replaces.
	maker   rolloutMaker
	policy  *model.Model
	train   promptSet
	rmet    reward.Metrics // the verifier's counts
	world   *dist.Group
	index   int // among the generation ranks
	count   int
	version int
	hash    string
	// link receives the weights on the device (asynclink.go); nil: they
	// come in the exchange.
	link WeightLink
	// onWork, when set (tests), runs as a work arrives; an error makes the
	// rank vanish (its group closed, nothing reported), as a killed one.
	onWork func(step int) error
}

// OpenGenerator prepares world rank o.Dist.World.Rank() as a generation
// rank: the backend, the policy (from model.path, until the first weights
// arrive), the tokenizer, the training prompts and the scorers.
func OpenGenerator(cfg Config, logw io.Writer, o Options) (*Generator, error) {
	cfg = cfg.Resolved()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if o.Dist == nil || o.Dist.World == nil {
		return nil, errors.New("a generation rank needs the world's group (Dist.World)")
	}
	w := o.Dist.World
	r := cfg.Dist.RolloutRanks
	trainers := w.Size() - r
	if r < 1 || trainers < 1 || w.Rank() < trainers {
		return nil, fmt.Errorf("world rank %d of %d is not a generation rank (dist.rollout_ranks %d: ranks %d … %d)", w.Rank(), w.Size(), r, trainers, w.Size()-1)
	}
	g := &Generator{cfg: cfg, version: -1, log: log.New(logw, fmt.Sprintf("[generation rank %d] ", w.Rank()), log.LstdFlags)}
	b, plan, err := OpenBackend(cfg, o.Backend, g.log.Printf)
	if err != nil {
		return nil, err
	}
	var link WeightLink
	if o.Dist.NewWeightLink != nil {
		if link, err = o.Dist.NewWeightLink(b); err != nil {
			return nil, fmt.Errorf("the weights' link: %w", err)
		}
	}
	if gpu := model.MemoryCapsOf(b).Reporter != nil; gpu && link == nil {
		return nil, errors.New("generation ranks on CUDA take their weights over a device link (Dist.NewWeightLink: NCCL), and none was given")
	}
	g.link = link
	if err := g.load(b, plan, o.Scorer); err != nil {
		if link != nil {
			link.Close()
		}
		return nil, err
	}
	g.world, g.index, g.count = w, w.Rank()-trainers, r
	return g, nil
}

// load loads what a generation rank holds on b: the policy, the
// tokenizer, the training prompts and the scorers (scorer, when set,
// scores every source).
func (g *Generator) load(b model.Backend, plan memplan.Budget, scorer reward.Scorer) error {
	cfg := g.cfg
	gp := memplan.Generation(plan)
	g.log.Printf("backend %s; generation rank memory plan: %s", b.Name(), gp.Plan)
	if err := gp.Check(); err != nil {
		return err
	}
	if err := g.loadPolicy(b); err != nil {
		return err
	}
	tok, err := tokenizer.Load(cfg.tokDir())
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	if g.train, err = loadPrompts(cfg, tok, g.log.Printf, cfg.Data.Train, "train"); err != nil {
		return err
	}
	scorers, err := buildScorers(cfg, scorer, &g.rmet, g.log.Printf, g.train)
	if err != nil {
		return err
	}
	g.maker = newRolloutMaker(&cfg, g.policy, tok, stopIDs(tok, g.policy.Cfg, cfg.Model.Path), g.train.ids, scorers)
	return nil
}

// loadPolicy loads the policy from model.path as the training ranks hold
// it for products, until the first weights arrive.
func (g *Generator) loadPolicy(b model.Backend) error {
	cfg := g.cfg
	p, err := model.Load(b, cfg.Model.Path)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	g.policy = p
	p.KVCacheBF16 = cfg.Precision.KVBF16(kvCacheGPU(b))
	p.KVCacheFP8 = cfg.Precision.KVFP8()
	p.ExactKV = cfg.Precision.ExactLogProbs
	if err := p.CheckKVCache(); err != nil {
		return err
	}
	if lc := cfg.LoRA.Model(); lc != nil {
		// The base from model.path, frozen as the training ranks freeze
		// it, adapters as they draw them; the sync sends the adapters
		// alone.
		if cfg.Precision.RefBF16() {
			if _, err := p.Freeze(); err != nil {
				return fmt.Errorf("lora: freeze the base weights: %w", err)
			}
		}
		p.A = model.NewAdapters(b, p.Cfg, lc)
		model.InitAdapters(b, p.Cfg, p.A, cfg.Run.Seed^loraSeedSalt)
	}
	if g.link != nil && g.link.HalfProducts() {
		// The matrices as products read them, bf16 alone: the link
		// writes them in place.
		if err := holdHalf(p); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	}
	if _, err := p.ShadowWeights(); err != nil { // a tied LM head's bf16 copy
		return fmt.Errorf("policy: %w", err)
	}
	if err := b.Err(); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return nil
}

// Run serves the training ranks until they send the stop (nil, or
// ErrStopped when a signal stopped them) or the exchange fails. Signals
// to this rank do not stop it: the training ranks decide, at a step
// boundary, and tell it.
func (g *Generator) Run(ctx context.Context) error {
	var reply []byte
	for {
		parts, err := g.world.AllGather("rollouts", reply)
		if err != nil {
			return fmt.Errorf("generation rank %d: %w", g.world.Rank(), err)
		}
		var cmd rolloutCmd
		if err := gob.NewDecoder(bytes.NewReader(parts[0])).Decode(&cmd); err != nil {
			g.world.Close()
			return fmt.Errorf("generation rank %d: rank 0's command: %w", g.world.Rank(), err)
		}
		switch {
		case cmd.Stop && cmd.Stopped:
			return ErrStopped
		case cmd.Stop:
			return nil
		case cmd.Work == nil:
			reply = nil
			continue
		}
		g.world.SetStep(cmd.Work.Step)
		if g.onWork != nil {
			if err := g.onWork(cmd.Work.Step); err != nil {
				g.world.Close()
				return err
			}
		}
		rep := g.generate(context.WithoutCancel(ctx), cmd.Work)
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(rep); err != nil {
			g.world.Close()
			return fmt.Errorf("generation rank %d: encode rows: %w", g.world.Rank(), err)
		}
		reply = buf.Bytes()
		if rep.Err != "" { // report it at the next exchange, then stop
			g.world.AllGather("rollouts", reply)
			g.world.Close()
			return fmt.Errorf("generation rank %d, step %d: %s", g.world.Rank(), cmd.Work.Step, rep.Err)
		}
	}
}

// generate loads the work's weights if they are new and generates and
// scores this rank's share of its plan.
func (g *Generator) generate(ctx context.Context, w *rolloutWork) *rolloutReply {
	rep := &rolloutReply{Step: w.Step, Version: w.Version, Hash: w.Hash}
	if w.Link {
		t0 := time.Now()
		if err := g.receive(w); err != nil {
			rep.Err = err.Error()
			return rep
		}
		g.version, g.hash = w.Version, w.Hash
		rep.LoadSeconds = time.Since(t0).Seconds()
	} else if w.Weights != nil {
		t0 := time.Now()
		if h := hashWeights(w.Weights); h != w.Hash {
			rep.Err = fmt.Sprintf("the weights of version %d arrived with sha256 %.12s, rank 0 sent %.12s", w.Version, h, w.Hash)
			return rep
		}
		if err := loadWeights(g.policy, w.Weights); err != nil {
			rep.Err = err.Error()
			return rep
		}
		g.version, g.hash = w.Version, w.Hash
		rep.LoadSeconds = time.Since(t0).Seconds()
	}
	if g.version != w.Version && g.hash == w.Hash && g.hash != "" {
		// A step that left the weights as they were (no gradient: every
		// group with equal rewards) makes a new version with the hash this
		// rank holds, and rank 0 sends nothing: the version advances
		// without a transfer.
		g.version = w.Version
	}
	if g.version != w.Version || g.hash != w.Hash {
		rep.Err = fmt.Sprintf("holds the weights of version %d (sha256 %.12s); step %d asks for version %d (sha256 %.12s)", g.version, g.hash, w.Step, w.Version, w.Hash)
		return rep
	}
	prompts := make([]data.Prompt, len(w.UIDs))
	for i, u := range w.UIDs {
		p, ok := g.train.byUID[u]
		if !ok {
			rep.Err = fmt.Sprintf("step %d: prompt %s is not in this rank's training data", w.Step, u)
			return rep
		}
		prompts[i] = p
	}
	lo, hi := slicePrompts(w.N, g.index, g.count)
	before := g.rmet.Snapshot()
	t0 := time.Now()
	rows, st, err := g.maker.generate(ctx, prompts, w.N, lo, hi, versionSeed(g.cfg.Run.Seed, w.Step, w.Version), w.Step)
	rep.Preemptions = st.Preemptions
	if err != nil {
		rep.Err = err.Error()
		return rep
	}
	g.maker.score(prompts, rows)
	rep.GenSeconds = time.Since(t0).Seconds()
	rep.Verifier = subCounts(g.rmet.Snapshot(), before)
	for _, r := range rows {
		rep.Rows = append(rep.Rows, toWire(r))
		rep.Versions = append(rep.Versions, w.Version)
	}
	return rep
}

// receive takes the weights of w's version over the link and checks
// their hash.
func (g *Generator) receive(w *rolloutWork) error {
	if g.link == nil {
		return fmt.Errorf("the weights of version %d come over a device link, and this rank has none", w.Version)
	}
	ts, half := linkTensors(g.policy, g.link.HalfProducts())
	if err := g.link.Receive(ts, half); err != nil {
		return fmt.Errorf("receive the weights of version %d: %w", w.Version, err)
	}
	got, err := g.link.Payload(ts, half)
	if err != nil {
		return fmt.Errorf("read back the weights of version %d: %w", w.Version, err)
	}
	if h := hashWeights(got); h != w.Hash {
		return fmt.Errorf("the weights of version %d arrived with sha256 %.12s, rank 0 sent %.12s", w.Version, h, w.Hash)
	}
	return nil
}

// Close releases the generation rank's link.
func (g *Generator) Close() error {
	if g.link == nil {
		return nil
	}
	return g.link.Close()
}

// inFlight is the flight a checkpoint records (nil: none).
func (a *asyncState) inFlight() *flight { return a.flight }

// open makes the weights' device link on backend b, where the job has one.
func (a *asyncState) open(b model.Backend) error {
	if a.newLink == nil {
		return nil
	}
	var err error
	if a.link, err = a.newLink(b); err != nil {
		return fmt.Errorf("the weights' link to the generation ranks: %w", err)
	}
	return nil
}

// stepContext: the generation ranks wait for the training ranks' command,
// so a signal stops the run at a step boundary only.
func (a *asyncState) stepContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// close closes the weights' link.
func (a *asyncState) close() error {
	if a.link == nil {
		return nil
	}
	err := a.link.Close()
	a.link = nil
	return err
}
