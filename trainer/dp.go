package trainer

// Data parallel (several ranks, one process per GPU, docs/data-parallel.md).
// Every rank holds the whole run's state — weights, controllers, data
// cursor — and keeps it identical to the others'; the optimizer's state is
// spread over the ranks as the run's optim.Strategy decides (ZeRO shards
// the moments, the fp32 masters and the gradients). This file is the
// step's exchange between the ranks: the prompts' slices, the rows and the
// update's outcomes, the stop flag and the state checks. A step:
//
//  1. Every rank reads the same prompts and asks its identical controller
//     for the plan: Rollout-GDRO's allocation is decided once, the same
//     everywhere, and no message is needed.
//  2. Each rank generates and scores the rollouts of a contiguous slice of
//     the prompts (sliced by rollout count, so the ranks get about as many
//     rows each). Sampling is keyed by (seed, step, uid, rollout index), so
//     the tokens do not depend on the slicing.
//  3. The rows (tokens, prompt, reward result) and the verifier's counts are
//     all-gathered in rank order: every rank then has the step's rows in
//     plan order, and computes advantages, GDRO weights and the generation
//     and reward metrics itself, exactly as one process would.
//  4. The micro-batches of each mini-batch keep the one-process layout and
//     are numbered through the step; rank r runs those numbered r mod W
//     (old and reference log-probs only for their rows), with the
//     accumulation count ga of the whole mini-batch, so the sum of the
//     ranks' gradients is the one-process gradient. The optimizer's
//     strategy sums them before the clip; every rank runs the same clip
//     and AdamW (on its ranges, under ZeRO).
//  5. Each row's loss signal, KL and entropy, and each micro-batch's logging
//     sums, are all-gathered from the rank that computed them and summed in
//     the one-process order, so gdro.Observe sees the whole batch and the
//     metrics line is the one process's.
//
// What differs from one process is only the order in which the reducer adds
// the ranks' partial gradients (float addition is not associative): the
// weights agree within rounding, and so do the continuous parts of the
// controller state that follow them. Between the ranks of one run
// everything is bitwise equal, which a hash of the controller state and a
// weight fingerprint checks every dist.state_check_every steps and at every
// checkpoint.
//
// Only rank 0 writes the run folder (metrics, validation lines, train.log,
// checkpoints); the others log to their own stderr with a "[rank r]" prefix.
// A signal on any rank does not abandon the step: at the next step boundary
// the ranks agree to stop, rank 0 writes the checkpoint while the others
// wait, and all return ErrStopped together. A resumed run may have another
// world size: each rank reads its ranges of the moments, whatever ranges
// the checkpoint's files hold.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/reward"
)

// dataParallel is a data-parallel run's rank group: its handle on the
// other training ranks.
type dataParallel struct {
	g      *dist.Group
	red    Reducer
	rnk, n int
	// newReducer makes red once the backend is open (Dist.NewReducer).
	newReducer func(model.Backend) (Reducer, error)
}

func (d *dataParallel) rank() int                  { return d.rnk }
func (d *dataParallel) size() int                  { return d.n }
func (d *dataParallel) setStep(step int)           { d.g.SetStep(step) }
func (d *dataParallel) slice(n []int) (lo, hi int) { return slicePrompts(n, d.rnk, d.n) }
func (d *dataParallel) abort()                     { d.g.Close() }

func (d *dataParallel) describe() string {
	return fmt.Sprintf("data parallel: %d ranks; rank 0 writes the run folder", d.n)
}

// open makes the gradient reducer for backend b and plans memory for the
// world's ZeRO stage.
func (d *dataParallel) open(b model.Backend, plan *memplan.Budget, zero int) error {
	if d.newReducer == nil {
		d.red = optim.HostComm{B: b, G: d.g}
	} else {
		r, err := d.newReducer(b)
		if err != nil {
			return fmt.Errorf("gradient reducer: %w", err)
		}
		d.red = r
	}
	plan.ForWorld(d.n, zero)
	return nil
}

// optimSetup: this rank of the data-parallel world with its collectives —
// ZeRO's the reducer's where it runs them (cuda.Comm), the control plane's
// otherwise.
func (d *dataParallel) optimSetup(s optim.Setup, b model.Backend) optim.Setup {
	s.Shard = optim.Shard{Rank: d.rnk, World: d.n}
	s.Reducer, s.Group = d.red, d.g
	s.Comm = optim.HostComm{B: b, G: d.g}
	if c, ok := d.red.(optim.ShardComm); ok {
		s.Comm = c
	}
	return s
}

// close closes the reducer.
func (d *dataParallel) close() error {
	err := closeReducer(d.red)
	d.red = nil
	return err
}

// forwardBatches: the rows of the micro-batches this rank trains.
func (d *dataParallel) forwardBatches(spans []microSpan, _, _ int) []microSpan {
	var out []microSpan
	for k, s := range spans {
		if owns(k, d.rnk, d.n) {
			out = append(out, s)
		}
	}
	return out
}

// slicePrompts returns the prompts [lo, hi) rank generates: a prompt
// belongs to the rank whose equal share of the step's rows holds its first
// row, so the slices are contiguous and about equal in rows.
func slicePrompts(n []int, rank, size int) (lo, hi int) {
	total := 0
	for _, ni := range n {
		total += ni
	}
	lo, hi = -1, -1
	start := 0
	for i, ni := range n {
		owner := min(size-1, start*size/max(total, 1))
		if owner == rank {
			if lo < 0 {
				lo = i
			}
			hi = i + 1
		}
		if owner > rank && lo < 0 {
			return i, i // no prompt of this rank's share starts a row
		}
		start += ni
	}
	if lo < 0 {
		return len(n), len(n)
	}
	return lo, hi
}

// microSpan is one micro-batch of a step's update: rows [lo, hi) of
// mini-batch mini, whose accumulation count is ga.
type microSpan struct {
	lo, hi, mini, ga int
}

// microBatches lays out the update: mini-batches of miniPrompts prompts,
// each cut into micro-batches of mb rows (the one-process layout, which the
// ranks share); a mini-batch without rows has no micro-batch.
func microBatches(n []int, miniPrompts, mb int) []microSpan {
	var bounds []int
	row := 0
	for i, ni := range n {
		if i%miniPrompts == 0 {
			bounds = append(bounds, row)
		}
		row += ni
	}
	bounds = append(bounds, row)
	var out []microSpan
	for b := 0; b+1 < len(bounds); b++ {
		lo, hi := bounds[b], bounds[b+1]
		ga := (hi - lo + mb - 1) / mb
		for m := lo; m < hi; m += mb {
			out = append(out, microSpan{lo: m, hi: min(m+mb, hi), mini: b, ga: ga})
		}
	}
	return out
}

// owns reports whether rank (of size) runs micro-batch k of the step.
func owns(k, rank, size int) bool { return k%size == rank }

// roundsMissing is how many rounds of the mini-batch of micro-batches
// [k0, k1) this rank has no micro-batch in: the most any rank runs minus
// its own count (0 in one process).
func roundsMissing(k0, k1, rank, size int) int {
	counts := make([]int, size)
	for k := k0; k < k1; k++ {
		counts[k%size]++
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	return most - counts[rank]
}

// wireRow is a row as the ranks exchange it after scoring.
type wireRow struct {
	Prompt, Start, Group int
	Tokens               []int32
	Sampler              []float32 // the sampler's log-probs
	SamplerEntropy       []float32 // their entropies (precision.exact_logprobs)
	SamplerVocab         []uint64  // their rows' digests (precision.exact_logprobs_check)
	Truncated            bool
	Score                float64
	Correct              bool
	Pred                 string
	Status               reward.Status
	Err                  string
}

// rowsMsg is one rank's rows and the verifier counts they added.
type rowsMsg struct {
	Rows     []wireRow
	Verifier reward.MetricsSnapshot
}

// shareRows gives every rank every rank's rows in rank (= plan) order,
// and the verifier counts of the whole step (before + each rank's delta).
func (d *dataParallel) shareRows(rows []rowData, before reward.MetricsSnapshot, rmet *reward.Metrics) ([]rowData, error) {
	now := rmet.Snapshot()
	msg := rowsMsg{Verifier: subCounts(now, before)}
	for _, r := range rows {
		msg.Rows = append(msg.Rows, toWire(r))
	}
	var parts []rowsMsg
	if err := d.allGather("rows", msg, &parts); err != nil {
		return nil, err
	}
	var all []rowData
	total := before
	for _, p := range parts {
		total = addCounts(total, p.Verifier)
		for _, w := range p.Rows {
			all = append(all, fromWire(w))
		}
	}
	rmet.Restore(total)
	return all, nil
}

func toWire(r rowData) wireRow {
	w := wireRow{Prompt: r.prompt, Start: r.start, Group: r.group, Tokens: r.tokens, Sampler: r.sampler, SamplerEntropy: r.samplerEnt, SamplerVocab: r.samplerVocab, Truncated: r.truncated,
		Score: r.result.Score, Correct: r.result.Correct, Pred: r.result.Pred, Status: r.result.Status}
	if r.result.Err != nil {
		w.Err = r.result.Err.Error()
	}
	return w
}

func fromWire(w wireRow) rowData {
	r := rowData{prompt: w.Prompt, start: w.Start, group: w.Group, tokens: w.Tokens, sampler: w.Sampler, samplerEnt: w.SamplerEntropy, samplerVocab: w.SamplerVocab, truncated: w.Truncated,
		result: reward.Result{Score: w.Score, Correct: w.Correct, Pred: w.Pred, Status: w.Status}}
	if w.Err != "" {
		r.result.Err = errors.New(w.Err)
	}
	return r
}

func subCounts(a, b reward.MetricsSnapshot) reward.MetricsSnapshot {
	return reward.MetricsSnapshot{Calls: a.Calls - b.Calls, Correct: a.Correct - b.Correct, NoAnswer: a.NoAnswer - b.NoAnswer,
		Budget: a.Budget - b.Budget, Panics: a.Panics - b.Panics}
}

func addCounts(a, b reward.MetricsSnapshot) reward.MetricsSnapshot {
	return reward.MetricsSnapshot{Calls: a.Calls + b.Calls, Correct: a.Correct + b.Correct, NoAnswer: a.NoAnswer + b.NoAnswer,
		Budget: a.Budget + b.Budget, Panics: a.Panics + b.Panics}
}

// microRec is one micro-batch's logging sums, kept so that the step's sums
// add them in the one-process order whichever rank ran them.
type microRec struct {
	Epoch, Index        int
	Tokens, Clip, Lower int
	KL, PPOKL, Policy   float64
}

// updateMsg is what one rank computed in the update: its rows' signals,
// KL and entropies, and its micro-batches' sums.
type updateMsg struct {
	Rows       []int
	Signal, KL []float64
	Entropy    [][]float32
	Mismatch   []grpo.RowMismatch // zero (not Measured) where the sampler's log-probs are not comparable
	Vocab      []vocabCheck       // zero where the full-distribution check did not run
	Micro      []microRec
}

// shareUpdate completes signal, kl, the rows' entropies and recs with the
// other ranks' parts; recs come back in (epoch, index) order.
func (d *dataParallel) shareUpdate(spans []microSpan, rows []rowData, signal, kl []float64, recs []microRec, epochs int) ([]microRec, error) {
	var msg updateMsg
	for k, s := range spans {
		if !owns(k, d.rnk, d.n) {
			continue
		}
		for i := s.lo; i < s.hi; i++ {
			msg.Rows = append(msg.Rows, i)
			msg.Signal, msg.KL = append(msg.Signal, signal[i]), append(msg.KL, kl[i])
			msg.Entropy = append(msg.Entropy, rows[i].entropy)
			var m grpo.RowMismatch // gob cannot send nil pointers in a slice
			if rows[i].mismatch != nil {
				m = *rows[i].mismatch
			}
			msg.Mismatch = append(msg.Mismatch, m)
			var v vocabCheck
			if rows[i].vocab != nil {
				v = *rows[i].vocab
			}
			msg.Vocab = append(msg.Vocab, v)
		}
	}
	msg.Micro = recs
	var parts []updateMsg
	if err := d.allGather("update results", msg, &parts); err != nil {
		return nil, err
	}
	byKey := map[[2]int]microRec{}
	for _, p := range parts {
		for j, i := range p.Rows {
			signal[i], kl[i], rows[i].entropy = p.Signal[j], p.KL[j], p.Entropy[j]
			if j < len(p.Mismatch) && p.Mismatch[j].Measured {
				m := p.Mismatch[j]
				rows[i].mismatch = &m
			}
			if j < len(p.Vocab) && p.Vocab[j].Rows > 0 {
				v := p.Vocab[j]
				rows[i].vocab = &v
			}
		}
		for _, r := range p.Micro {
			byKey[[2]int{r.Epoch, r.Index}] = r
		}
	}
	var out []microRec
	for e := 0; e < epochs; e++ {
		for k := range spans {
			r, ok := byKey[[2]int{e, k}]
			if !ok {
				return nil, fmt.Errorf("update results: no rank reported micro-batch %d of epoch %d", k, e)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// allGather gob-encodes v, all-gathers it and decodes every rank's part
// into *out (a *[]rowsMsg, *[]updateMsg or *[]valMsg).
func (d *dataParallel) allGather(name string, v any, out any) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return fmt.Errorf("%s: encode: %w", name, err)
	}
	parts, err := d.g.AllGather(name, buf.Bytes())
	if err != nil {
		return err
	}
	switch o := out.(type) {
	case *[]rowsMsg:
		return decodeParts(name, parts, o)
	case *[]updateMsg:
		return decodeParts(name, parts, o)
	case *[]valMsg:
		return decodeParts(name, parts, o)
	}
	return fmt.Errorf("%s: cannot decode into %T", name, out)
}

func decodeParts[T any](name string, parts [][]byte, out *[]T) error {
	*out = make([]T, len(parts))
	for r, p := range parts {
		if err := gob.NewDecoder(bytes.NewReader(p)).Decode(&(*out)[r]); err != nil {
			return fmt.Errorf("%s from rank %d: %w", name, r, err)
		}
	}
	return nil
}

// stepContext is the context a step and a validation run under: in a
// data-parallel run a signal must not abandon a step on one rank only, so
// the stop waits for the next step boundary (stopRequested).
func (d *dataParallel) stepContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}

// stopRequested reports, at a step boundary, whether the run stops: in a
// data-parallel run when any rank's ctx is cancelled (all ranks agree on
// the same answer; an all-gather rather than a max all-reduce, so the log
// names the ranks that were signalled).
func (d *dataParallel) stopRequested(ctx context.Context, step int) (bool, error, error) {
	d.g.SetStep(step)
	flag := []byte{0}
	if ctx.Err() != nil {
		flag[0] = 1
	}
	parts, err := d.g.AllGather("stop flag", flag)
	if err != nil {
		return false, nil, err
	}
	var who []int
	for r, p := range parts {
		if len(p) == 1 && p[0] == 1 {
			who = append(who, r)
		}
	}
	if len(who) == 0 {
		return false, nil, nil
	}
	return true, fmt.Errorf("stop requested on rank(s) %v: %w", who, context.Canceled), nil
}

// agree makes rank 0's outcome of something only it does (a checkpoint
// write) every rank's, and doubles as a barrier: the others wait for it.
func (d *dataParallel) agree(what string, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	got, berr := d.g.Broadcast(what, []byte(msg))
	switch {
	case berr != nil:
		return errors.Join(err, berr)
	case err != nil:
		return err
	case len(got) > 0:
		return fmt.Errorf("rank 0: %s: %s", what, got)
	}
	return nil
}

// agreeAll returns nil on every rank when no rank's err is set, else on
// every rank an error naming each failed rank and its error.
func (d *dataParallel) agreeAll(what string, err error) error {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	all, gerr := d.g.AllGather(what, []byte(msg))
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	var failed []string
	for r, m := range all {
		if len(m) > 0 {
			failed = append(failed, fmt.Sprintf("rank %d: %s", r, m))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s: %s", what, strings.Join(failed, "; "))
	}
	return nil
}

// stateHashes returns hashes of the controller state (with the step, update
// count and data cursor) and of a weight fingerprint: the 1-D parameters
// (every RMSNorm gain), which every update touches and which are small,
// and with sharded masters samples of the bf16 matrices (the strategy's
// Fingerprint).
func (t *Trainer) stateHashes() (ctrl, weights string, err error) {
	st, err := json.Marshal(struct {
		Step, Updates, OptimStep int
		Controller               any
		Cursor                   any
	}{t.step, t.updates, t.Opt.Steps(), t.Ctrl.State(), t.loader.Cursor()})
	if err != nil {
		return "", "", err
	}
	h := sha256.Sum256(st)
	wh := sha256.New()
	if t.Policy.A != nil {
		fingerprintAdapters(t.Policy, wh)
	}
	for _, np := range t.Policy.P.Named(t.Policy.Cfg) {
		if len(np.Shape) != 1 || t.Policy.A != nil {
			continue
		}
		host := make([]float32, (*np.Ptr).Numel())
		t.Policy.B.Download(*np.Ptr, host)
		for _, x := range host {
			binary.Write(wh, binary.LittleEndian, math.Float32bits(x))
		}
	}
	t.Opt.Fingerprint(wh)
	if err := t.Policy.B.Err(); err != nil {
		return "", "", err
	}
	return hex.EncodeToString(h[:8]), hex.EncodeToString(wh.Sum(nil)[:8]), nil
}

// checkState compares the state hashes of all ranks and stops the run on a
// mismatch, naming the ranks that differ from rank 0.
func (d *dataParallel) checkState(step int, when string, hashes func() (string, string, error)) error {
	ctrl, weights, err := hashes()
	if err != nil {
		return fmt.Errorf("state check at step %d: %w", step, err)
	}
	parts, err := d.g.AllGather("state hashes", []byte(ctrl+" "+weights))
	if err != nil {
		return err
	}
	var cs, ws []string
	for _, p := range parts {
		var c, w string
		fmt.Sscan(string(p), &c, &w)
		cs, ws = append(cs, c), append(ws, w)
	}
	var errs []error
	if bad := dist.DifferingRanks(cs); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("controller state (hash %v by rank) of rank(s) %v differs from rank 0's", cs, bad))
	}
	if bad := dist.DifferingRanks(ws); len(bad) > 0 {
		errs = append(errs, fmt.Errorf("weights (fingerprint %v by rank) of rank(s) %v differ from rank 0's", ws, bad))
	}
	if len(errs) > 0 {
		return fmt.Errorf("state check %s at step %d: %w (the ranks diverged: a bug or a non-deterministic rank; the last checkpoint is kept)",
			when, step, errors.Join(errs...))
	}
	return nil
}

// shareValidation gives every rank every rank's slice of the n validation
// prompts' outcomes, in rank order, and the validation's verifier counts.
func (d *dataParallel) shareValidation(step, n int, recs []valPrompt, before reward.MetricsSnapshot, rmet *reward.Metrics) ([]valPrompt, error) {
	var parts []valMsg
	if err := d.allGather(fmt.Sprintf("validation of step %d", step), valMsg{Prompts: recs, Verifier: subCounts(rmet.Snapshot(), before)}, &parts); err != nil {
		return nil, err
	}
	var all []valPrompt
	total := before
	for _, p := range parts {
		all = append(all, p.Prompts...)
		total = addCounts(total, p.Verifier)
	}
	rmet.Restore(total)
	if len(all) != n {
		return nil, fmt.Errorf("validation: the ranks returned %d prompts of %d", len(all), n)
	}
	return all, nil
}

// shareResume gives every rank rank 0's decision of where to resume from
// (or its error); the other ranks verify that checkpoint themselves.
func (d *dataParallel) shareResume(dir string, m *checkpoint.Manifest, err error) (string, *checkpoint.Manifest, error) {
	msg := "ok " + dir
	if err != nil {
		msg = "error " + err.Error()
	}
	got, berr := d.g.Broadcast("resume decision", []byte(msg))
	switch {
	case berr != nil:
		return "", nil, errors.Join(err, berr)
	case err != nil:
		return "", nil, err
	case strings.HasPrefix(string(got), "error "):
		return "", nil, fmt.Errorf("rank 0 could not start: %s", strings.TrimPrefix(string(got), "error "))
	}
	dir = strings.TrimPrefix(string(got), "ok ")
	if d.rnk == 0 || dir == "" {
		return dir, m, nil
	}
	if m, err = checkpoint.Verify(dir); err != nil {
		return "", nil, fmt.Errorf("resume (rank 0 chose %s): %w", dir, err)
	}
	return dir, m, nil
}
