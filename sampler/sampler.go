// Package sampler generates completions: batched prefill and KV-cached
// decode over the model, with temperature / top-k / top-p / greedy sampling,
// stop tokens, a max_new_tokens cap (recorded as truncation), variable
// rollout counts per prompt and a shared prompt prefix.
//
// Determinism: the uniform number that picks token t of rollout r of prompt
// u at training step s is rng.Uniform(Key(seed, s, hash(u), r), t). It does
// not depend on which other sequences share the batch, on slot numbers or
// on the order prompts arrive in, so a resumed run samples exactly what the
// uninterrupted run sampled (the CPU backend computes each row of a batch
// independently of the others).
//
// Prefix sharing: a prompt is prefilled once into one cache slot; its n
// rollouts copy that prompt prefix (when a slot frees for them) and all
// sample their first token from the same prefill logits.
//
// Continuous batching, and paged KV memory with pre-emption (a pre-empted
// rollout is recomputed and draws the same tokens): see Generate.
//
// Device-side reductions: when the model's backend implements
// model.DeviceSampler (the CUDA backend), a decode step downloads per row only
// what the draw needs — the top k logits for greedy and top-k sampling (the
// draw is then the same host arithmetic on the same numbers), or chunk sums
// plus one 1024-id chunk for unfiltered sampling (equal to the full-row
// draw up to float64 rounding of the normaliser) — instead of the whole
// vocabulary. Top-p without top-k downloads full rows.
//
// Device draws (Params.Graphs, on a model.DeviceSampler backend): each
// decode step runs as one replayed CUDA graph that also draws the tokens,
// so a step is one graph launch and one host sync (the download of the
// tokens and log-probs). The prefill and each rollout's first token take
// the host path above. The device draw uses the same key and counter, and
// its uniform is rng.Uniform bit for bit (integer hashing, then the top 53
// bits scaled by 2⁻⁵³, exact in float64). What may differ is the inverse
// CDF: unfiltered, the device sums exp(z − max z) in float64 over 256
// contiguous id ranges and then the ranges in order, where the host sums
// one id after another, and the device's exp is not Go's math.Exp bit for
// bit; with top-k (and top-p) the device repeats the host's arithmetic on
// the same k logits, in the same order, with its own exp. A draw therefore
// picks the neighbouring token only when u·Σ lies within a few ulps of a
// boundary of the cumulative sum (cuda TestDeviceDrawMatchesHost bounds how
// often; what it measured is in docs/evidence.md and docs/gpu.md). Greedy
// draws are the same argmax (lowest id among ties). Either way the tokens do not
// depend on the batch composition, the slot count or the order of prompts
// (the padding rows of a graph's bucket are computed and ignored).
package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/gdrotrain/gdrotrain/internal/progress"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/model"
)

// LM is what the sampler needs from a model (model.Model implements it;
// tests use scripted models).
type LM interface {
	NewKVCache(slots, maxLen int) *model.KVCache
	// CopyPrefix makes slot dst hold the first n tokens of slot src.
	CopyPrefix(kv *model.KVCache, dst, src, n int) error
	Step(kv *model.KVCache, in []model.StepInput) ([][]float32, error)
}

// Params are the sampling settings.
type Params struct {
	Temperature  float64 // 0 means greedy
	TopP         float64 // 1 disables nucleus filtering
	TopK         int     // 0 disables top-k filtering
	MaxNewTokens int
	StopIDs      []int32 // any of these ends a completion (it is kept as the last token)
	Seed         uint64
	Step         int // training step, part of every sequence's random key
	MaxSlots     int // concurrent sequences (KV-cache slots); 0 means 64
	// KVBudgetBytes > 0 pages the KV cache within this many bytes
	// (sampling.kv_cache_gib), pre-empting rollouts when it is full (see
	// Generate); 0 allocates every slot at full length.
	KVBudgetBytes int64
	// KVPageBytes is the page of a paged cache per layer K/V range: 0 is
	// the backend's granularity (2 MiB on GPUs and on the CPU).
	KVPageBytes int64
	// Graphs runs decode steps as device graphs with the draw on the
	// device where the model can (GraphLM on a CUDA backend, and settings
	// the device draws: not top-p without top-k); elsewhere it is ignored.
	Graphs bool
	// ExactLogProbs (precision.exact_logprobs, docs/algorithm.md §5.10)
	// returns as each token's log-probability, and as its distribution's
	// entropy, what the backend's LogSoftmaxGather computes on the
	// untempered logits: the training forward's op, on logits a
	// batch-invariant backend (model.BatchInvariant) computes bit for bit
	// as the forward does. The token is drawn as without it. It needs a
	// DeviceLM; decode graphs run LogSoftmaxGather inside the graph, on the
	// tokens drawn there (model.SampleParams.ExactLogProbs).
	ExactLogProbs bool
	// VocabDigests (with ExactLogProbs; precision.exact_logprobs_check)
	// also returns each token's whole-vocabulary log-softmax row as a
	// digest (model.VocabDigest), for the trainer's full-distribution
	// check. The rows come to the host: decode steps run eagerly.
	VocabDigests bool
}

// Validate checks the settings.
func (p Params) Validate() error {
	switch {
	case p.Temperature < 0 || math.IsNaN(p.Temperature):
		return fmt.Errorf("temperature must be ≥ 0, got %v", p.Temperature)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("top_p must be in (0, 1], got %v", p.TopP)
	case p.TopK < 0:
		return fmt.Errorf("top_k must be ≥ 0, got %d", p.TopK)
	case p.MaxNewTokens < 1:
		return fmt.Errorf("max_new_tokens must be ≥ 1, got %d", p.MaxNewTokens)
	case p.MaxSlots < 0:
		return fmt.Errorf("max slots must be ≥ 0, got %d", p.MaxSlots)
	case p.KVBudgetBytes < 0 || p.KVPageBytes < 0:
		return fmt.Errorf("kv budget %d and page %d bytes must be ≥ 0", p.KVBudgetBytes, p.KVPageBytes)
	}
	return nil
}

// Request asks for N completions of one prompt.
type Request struct {
	UID    string
	Prompt []int32
	N      int
}

// Completion is one sampled continuation.
type Completion struct {
	UID      string
	Index    int     // rollout index within its prompt, 0..N−1
	Tokens   []int32 // generated tokens, the stop token included when one was hit
	LogProbs []float32
	// Entropy is each token's predictive distribution's entropy, with
	// Params.ExactLogProbs (nil otherwise).
	Entropy []float32
	// VocabDigests are each token's model.VocabDigest, with
	// Params.VocabDigests (nil otherwise).
	VocabDigests []uint64
	Stopped      bool // ended on a stop token
	Truncated    bool // hit MaxNewTokens without a stop token
}

// seqState is one rollout: waiting for a slot (slot < 0) with its first
// token drawn from its prompt's prefill, or decoding in a slot.
type seqState struct {
	slot     int
	key      uint64
	out      *Completion
	prompt   *promptState
	admitted int // admission order (the scheduler pre-empts the latest)
}

// promptState is an admitted prompt whose prefill lives in its home slot
// (the slot of the rollout decoding there now): rollouts that have not
// started copy their prompt prefix from it, so the home slot is reused
// (cut back to the prompt) rather than freed while any still wait.
type promptState struct {
	home    int         // −1 after its slot was pre-empted: the next rollout to start re-prefills
	length  int         // prompt tokens
	tokens  []int32     // the prompt
	waiting []*seqState // rollouts not started, in index order
}

// Generate samples every request's completions and returns them grouped by
// request in order, rollouts in index order. bar may be nil.
//
// Continuous batching: every model step decodes one token for each running
// rollout and, in the same step, prefills the prompts admitted into slots
// freed by rollouts that ended; a freed slot goes first to a waiting
// rollout of an admitted prompt (a copy of its prompt's prefix, no
// prefill), then to the next prompt. So the batch stays full while long
// responses run, a prompt may have more rollouts than there are slots, and
// a prompt's rollouts need not start together. Which rollouts share a step
// never changes a token (see the package comment).
//
// Paged KV memory (Params.KVBudgetBytes): the cache's memory follows the
// rollouts' lengths within a budget (model.NewPagedKVCache), and the
// scheduler admits and pre-empts by pages:
//   - before a step, every running rollout gets the page its next token
//     may need, oldest admission first; when the budget has none left, the
//     rollout admitted last is pre-empted: its slot and pages are freed
//     and it goes back to the front of the queue with the tokens it has
//     drawn (a prompt whose prefix lived in that slot re-prefills it for
//     its rollouts not yet started);
//   - a slot is handed out only when the budget has the pages of what
//     goes in (a prefill, or a prefix copy and its first decoded token)
//     plus a reserve of admitReserve pages, unless nothing else runs;
//   - a pre-empted rollout is re-admitted before anything new by a prefill
//     of its prompt and its tokens but the last (recomputed, as vLLM
//     does), and the next step decodes that last token as it would have.
//
// Draws are keyed by position, so a pre-empted rollout draws with the same
// uniforms as without pre-emption. Its recomputed keys and values come
// from a prefill instead of the decode steps that first wrote them, which
// sums attention in another order: the logits after them agree to float32
// rounding (1e-6 on the tiny model, model.TestRecomputeMatchesDecode), on
// the CPU as on the GPU, so a token can differ only where a draw lands
// that close to a boundary of the cumulative sum, the package comment's
// caveat for device draws. The tests see identical tokens under many
// pre-emptions (TestPreemptionMatchesOnCPUModel; on the emulator with
// graphs on and off, cuda TestPagedGenerateMatches).
func Generate(ctx context.Context, lm LM, reqs []Request, p Params, bar *progress.Bar) ([][]Completion, error) {
	out, _, err := GenerateStats(ctx, lm, reqs, p, bar)
	return out, err
}

// Stats describes how a Generate call used its cache.
type Stats struct {
	Steps       int // model steps
	Preemptions int // rollouts pre-empted for pages
	PeakPages   int // most KV pages in use at once (paged caches)
	PageMaps    int // pages mapped
	Recomputed  int // tokens prefilled again: pre-empted rollouts' and re-homed prompts'
	Rehomed     int // prompts re-prefilled for their rollouts not started after their home slot was pre-empted
}

// PagedLM is a model whose KV cache can be paged (model.Model).
type PagedLM interface {
	NewPagedKVCache(slots, maxLen int, pg model.KVPaging) (*model.KVCache, error)
}

// admitReserve is the free pages an admission must leave while other
// rollouts run, so that their next tokens seldom have to pre-empt what was
// just admitted (vLLM keeps a similar watermark).
const admitReserve = 1

// GenerateStats is Generate, also reporting how the cache was used.
func GenerateStats(ctx context.Context, lm LM, reqs []Request, p Params, bar *progress.Bar) ([][]Completion, Stats, error) {
	var st Stats
	maxPrompt, err := checkRequests(reqs, p)
	if err != nil {
		return nil, st, err
	}
	slots := p.MaxSlots
	if slots == 0 {
		slots = 64
	}
	if _, ok := lm.(DeviceLM); p.ExactLogProbs && !ok {
		return nil, st, fmt.Errorf("sampler: exact log-probs need a model whose logits stay on its backend (model.Model)")
	}
	maxLen := maxPrompt + p.MaxNewTokens
	kv, dg, err := openDecoding(lm, slots, maxLen, p)
	if err != nil {
		return nil, st, err
	}
	defer kv.Release()
	if dg != nil {
		defer dg.Release()
	}
	if err := checkBudget(kv.Pages, maxLen, p); err != nil {
		return nil, st, err
	}
	sc := newScheduler(lm, kv, reqs, slots, p, &st, bar)
	for sc.busy() {
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		dec, pre, err := sc.schedule()
		if err != nil {
			return nil, st, err
		}
		if err := runStep(lm, kv, dg, dec, pre, p); err != nil {
			return nil, st, err
		}
		sc.stepped()
	}
	if kv.Pages != nil {
		st.PeakPages, st.PageMaps = kv.Pages.Peak, kv.Pages.Maps
	}
	return sc.out, st, nil
}

// checkRequests validates p and reqs and returns the longest prompt.
func checkRequests(reqs []Request, p Params) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	maxPrompt := 0
	for i, r := range reqs {
		if len(r.Prompt) == 0 {
			return 0, fmt.Errorf("request %d (uid %q): empty prompt", i, r.UID)
		}
		if r.N < 0 {
			return 0, fmt.Errorf("request %d (uid %q): %d rollouts, must be ≥ 0", i, r.UID, r.N)
		}
		maxPrompt = max(maxPrompt, len(r.Prompt))
	}
	return maxPrompt, nil
}

// openDecoding makes the KV cache for slots rollouts of up to maxLen
// tokens and, when decode steps run as graphs, the decode graph (nil
// otherwise), whose padding rows take one more slot, never handed out.
func openDecoding(lm LM, slots, maxLen int, p Params) (*model.KVCache, *model.DecodeGraph, error) {
	// With exact log-probs a graphed step ends with LogSoftmaxGather on
	// its drawn tokens, inside the graph (model.DecodeGraph); the vocabulary
	// digests (a debugging check) need the rows on the host, so they keep
	// the eager exact path (exactLogProbs; docs/algorithm.md §5.10).
	graphed := p.Graphs && !p.VocabDigests && canGraph(lm, p)
	kvSlots := slots
	if graphed {
		kvSlots++ // the padding rows' spare slot (model.DecodeGraph)
	}
	kv, err := openCache(lm, kvSlots, maxLen, p)
	if err != nil || !graphed {
		return kv, nil, err
	}
	dg, err := lm.(GraphLM).NewDecodeGraph(kv, sampleParams(p))
	if err != nil {
		kv.Release()
		return nil, nil, err
	}
	return kv, dg, nil
}

// checkBudget refuses a paged cache (pg; nil when unpaged) whose budget
// cannot hold one rollout at full length beside the graph's spare slot
// (whose pages are already held). Where one such rollout always fits, the
// scheduler can always make progress, pre-empting down to one at worst.
func checkBudget(pg *model.KVPages, maxLen int, p Params) error {
	if pg == nil {
		return nil
	}
	if need := pg.SlotPages(maxLen); need+pg.Used > pg.Budget {
		return fmt.Errorf("sampling.kv_cache_gib = %.3g GiB is %d KV pages of %d KiB per layer K/V (%d MiB each in all); one rollout of up to %d tokens needs %d%s: raise sampling.kv_cache_gib (0 sizes the cache for every slot at full length) or lower sampling.max_new_tokens",
			float64(p.KVBudgetBytes)/(1<<30), pg.Budget, pg.PageBytes>>10, pg.Bytes(1)>>20, maxLen, need, spareNote(pg.Used))
	}
	return nil
}

// spareNote names the pages the decode graph's spare slot holds.
func spareNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" beside the %d the decode graph's spare slot holds", n)
}

// scheduler hands out slots and KV pages: it admits requests and their
// rollouts into free slots, pre-empts when the pages run out and retires
// finished rollouts, step by step (see Generate).
type scheduler struct {
	lm      LM
	kv      *model.KVCache
	p       Params
	st      *Stats
	bar     *progress.Bar
	stops   map[int32]bool
	reqs    []Request
	out     [][]Completion // (len(reqs)) a request's completions, made when it is admitted
	next    int            // requests admitted so far
	free    []int          // free slots
	active  []*seqState    // decoding, one token per step
	pending []*seqState    // prefilled in this step, decoding from the next
	waiting []*promptState // admitted prompts with rollouts not started, in admission order
	requeue []*seqState    // pre-empted, oldest admission first
	order   int            // admissions so far
	err     error          // why take failed
}

// newScheduler starts with every slot free, slot 0 handed out first.
func newScheduler(lm LM, kv *model.KVCache, reqs []Request, slots int, p Params, st *Stats, bar *progress.Bar) *scheduler {
	sc := &scheduler{lm: lm, kv: kv, p: p, st: st, bar: bar, stops: map[int32]bool{}, reqs: reqs, out: make([][]Completion, len(reqs))}
	for _, id := range p.StopIDs {
		sc.stops[id] = true
	}
	for s := slots - 1; s >= 0; s-- {
		sc.free = append(sc.free, s)
	}
	return sc
}

// busy reports whether anything runs or is still to be admitted.
func (sc *scheduler) busy() bool { return len(sc.active) > 0 || sc.queued() }

// queued reports whether any rollout or request waits for admission.
func (sc *scheduler) queued() bool {
	return sc.next < len(sc.reqs) || len(sc.waiting) > 0 || len(sc.requeue) > 0
}

// schedule makes the next step's batches: finished rollouts retired, the
// running ones' next tokens backed by pages (pre-empting the latest
// admitted when the budget has none) and decoded in dec, free slots handed
// out (see fill).
func (sc *scheduler) schedule() (dec, pre batch, err error) {
	if err := sc.retire(); err != nil {
		return dec, pre, err
	}
	if err := sc.growActive(); err != nil {
		return dec, pre, err
	}
	for _, s := range sc.active {
		dec.add(decodeInput(s), []*seqState{s})
	}
	if err := sc.fill(&dec, &pre); err != nil {
		return dec, pre, err
	}
	if len(dec.in) == 0 && len(pre.in) == 0 && sc.queued() {
		// Nothing runs and nothing could be admitted: a broken
		// invariant, reported rather than spun on.
		return dec, pre, fmt.Errorf("rollout: scheduler stalled with %d pre-empted, %d prompts waiting, %d not admitted, %d free slots",
			len(sc.requeue), len(sc.waiting), len(sc.reqs)-sc.next, len(sc.free))
	}
	return dec, pre, nil
}

// stepped counts a step run: the rollouts prefilled in it decode from now.
func (sc *scheduler) stepped() {
	sc.st.Steps++
	sc.active = append(sc.active, sc.pending...)
	sc.pending = nil
}

// decodeInput is the step input that decodes s's last drawn token.
func decodeInput(s *seqState) model.StepInput {
	return model.StepInput{Slot: s.slot, Tokens: s.out.Tokens[len(s.out.Tokens)-1:]}
}

// retire takes finished rollouts out of the running set: a home slot
// passes to its prompt's next waiting rollout, cut back to the prompt;
// other slots are freed.
func (sc *scheduler) retire() error {
	var kept []*seqState
	for _, s := range sc.active {
		if !s.finished(sc.stops, sc.p.MaxNewTokens) {
			kept = append(kept, s)
			continue
		}
		sc.bar.Add(1, len(s.out.Tokens))
		if ps := s.prompt; ps.home == s.slot && len(ps.waiting) > 0 {
			w := ps.waiting[0]
			ps.waiting = ps.waiting[1:]
			w.slot = s.slot
			if err := sc.kv.Truncate(s.slot, ps.length); err != nil {
				return err
			}
			sc.admit(w)
			kept = append(kept, w)
			continue
		} else if ps.home == s.slot {
			ps.home = -1
		}
		sc.release(s.slot)
	}
	sc.active = kept
	return nil
}

// fill hands out free slots until none is left or the next admission
// does not fit: pre-empted rollouts first (a prefill), then waiting
// rollouts (a prefix copy decoded in this step, or a prefill of the
// prompt where its home slot was pre-empted), then new prompts (a prefill
// in this step). Rollouts prefilled now decode from the next step.
func (sc *scheduler) fill(dec, pre *batch) error {
	sc.waiting = dropStarted(sc.waiting)
	for len(sc.free) > 0 {
		var admitted bool
		var err error
		if len(sc.requeue) > 0 {
			admitted, err = sc.readmit(pre)
		} else if ps := sc.nextWaiting(sc.waiting); ps != nil {
			admitted, err = sc.startWaiting(ps, dec, pre)
		} else if sc.next < len(sc.reqs) {
			admitted, err = sc.admitRequest(pre)
		}
		if err != nil || !admitted {
			return err
		}
	}
	return nil
}

// readmit gives the first pre-empted rollout a slot, prefilled with its
// prompt and its tokens but the last (which the next step decodes);
// false when its pages do not fit.
func (sc *scheduler) readmit(pre *batch) (bool, error) {
	s := sc.requeue[0]
	toks := append(append([]int32(nil), s.prompt.tokens...), s.out.Tokens[:len(s.out.Tokens)-1]...)
	if !sc.fits(len(toks)) {
		return false, nil
	}
	sc.requeue = sc.requeue[1:]
	if s.slot = sc.take(len(toks)); s.slot < 0 {
		return false, sc.err
	}
	pre.add(model.StepInput{Slot: s.slot, Tokens: toks}, nil)
	sc.st.Recomputed += len(toks)
	sc.pending = append(sc.pending, s)
	sc.admit(s)
	return true, nil
}

// startWaiting starts ps's next rollout in a slot of its own: a copy of
// the prompt's prefix from its home slot, decoded in this step, or, when
// the home slot was pre-empted, a prefill of the prompt, which becomes the
// new home; false when its pages do not fit.
func (sc *scheduler) startWaiting(ps *promptState, dec, pre *batch) (bool, error) {
	w := ps.waiting[0]
	if ps.home >= 0 {
		// The prefix, and the row of the token decoded now.
		if !sc.fits(ps.length + 1) {
			return false, nil
		}
		if w.slot = sc.take(ps.length + 1); w.slot < 0 {
			return false, sc.err
		}
		if err := sc.lm.CopyPrefix(sc.kv, w.slot, ps.home, ps.length); err != nil {
			return false, err
		}
		dec.add(decodeInput(w), []*seqState{w})
		sc.active = append(sc.active, w)
	} else {
		if !sc.fits(ps.length) {
			return false, nil
		}
		if w.slot = sc.take(ps.length); w.slot < 0 {
			return false, sc.err
		}
		ps.home = w.slot
		pre.add(model.StepInput{Slot: w.slot, Tokens: ps.tokens}, nil)
		sc.st.Recomputed += ps.length
		sc.st.Rehomed++
		sc.pending = append(sc.pending, w)
	}
	sc.admit(w)
	ps.waiting = ps.waiting[1:]
	sc.waiting = dropStarted(sc.waiting)
	return true, nil
}

// admitRequest admits the next request: its prompt is prefilled in a home
// slot, from whose logits all its rollouts draw their first token (a
// request of no rollouts takes no slot); false when its pages do not fit.
func (sc *scheduler) admitRequest(pre *batch) (bool, error) {
	r := sc.reqs[sc.next]
	if r.N > 0 && !sc.fits(len(r.Prompt)) {
		return false, nil
	}
	dst := make([]Completion, r.N)
	sc.out[sc.next] = dst
	sc.next++
	if r.N == 0 {
		return true, nil
	}
	home := sc.take(len(r.Prompt))
	if home < 0 {
		return false, sc.err
	}
	ps, seqs := newPrompt(r, dst, home, sc.p)
	pre.add(model.StepInput{Slot: ps.home, Tokens: r.Prompt}, seqs)
	sc.pending = append(sc.pending, seqs[0])
	sc.admit(seqs[0])
	if ps.waiting = seqs[1:]; len(ps.waiting) > 0 {
		sc.waiting = append(sc.waiting, ps)
	}
	return true, nil
}

// openCache makes the sampler's KV cache: paged within p.KVBudgetBytes
// (sampling.kv_cache_gib), or every slot at full length.
func openCache(lm LM, slots, maxLen int, p Params) (*model.KVCache, error) {
	if p.KVBudgetBytes <= 0 {
		return lm.NewKVCache(slots, maxLen), nil
	}
	plm, ok := lm.(PagedLM)
	if !ok {
		return nil, fmt.Errorf("sampling.kv_cache_gib is set but the model cannot page its KV cache")
	}
	return plm.NewPagedKVCache(slots, maxLen, model.KVPaging{BudgetBytes: p.KVBudgetBytes, PageBytes: p.KVPageBytes})
}

// admit stamps s as the latest admission (pre-emption takes the latest).
func (sc *scheduler) admit(s *seqState) {
	sc.order++
	s.admitted = sc.order
}

// fits reports whether a slot may be handed out for rows tokens now: the
// next free slot's pages for them plus the reserve, which is waived when
// nothing else runs or is being admitted (so one rollout always can).
func (sc *scheduler) fits(rows int) bool {
	pg := sc.kv.Pages
	if pg == nil {
		return true
	}
	reserve := admitReserve
	if len(sc.active) == 0 && len(sc.pending) == 0 {
		reserve = 0
	}
	return pg.Need(sc.free[len(sc.free)-1], rows)+reserve <= pg.Free()
}

// take hands out a free slot, emptied and backed for rows tokens; −1 with
// sc.err when the pages cannot be had (fits said they could).
func (sc *scheduler) take(rows int) int {
	s := sc.free[len(sc.free)-1]
	sc.free = sc.free[:len(sc.free)-1]
	sc.kv.Reset(s)
	if err := sc.kv.Grow(s, rows); err != nil {
		sc.err = fmt.Errorf("rollout: slot %d: %w", s, err)
		return -1
	}
	return s
}

// release empties slot s (its pages go back) and frees it.
func (sc *scheduler) release(s int) {
	sc.kv.Reset(s)
	sc.free = append(sc.free, s)
}

// growActive backs each running rollout's next token, oldest admission
// first, pre-empting the latest admitted while the budget has no page.
func (sc *scheduler) growActive() error {
	sort.SliceStable(sc.active, func(a, b int) bool { return sc.active[a].admitted < sc.active[b].admitted })
	for i := 0; i < len(sc.active); i++ {
		s := sc.active[i]
		for {
			err := sc.kv.Grow(s.slot, sc.kv.Len[s.slot]+1)
			if err == nil {
				break
			}
			if !errors.Is(err, model.ErrNoPages) || len(sc.active) == 1 {
				// Alone, a rollout always fits (Generate checked the
				// budget), so this is a broken invariant or device.
				return fmt.Errorf("rollout: pages for slot %d's token %d: %w", s.slot, sc.kv.Len[s.slot]+1, err)
			}
			last := len(sc.active) - 1
			sc.preempt(sc.active[last])
			sc.active = sc.active[:last]
			if last == i {
				break // s itself was the latest
			}
		}
	}
	return nil
}

// preempt frees s's slot and pages and queues it for re-admission, ahead
// of rollouts pre-empted earlier in this pass (which were admitted later).
func (sc *scheduler) preempt(s *seqState) {
	if s.prompt.home == s.slot {
		s.prompt.home = -1 // its rollouts not started re-prefill the prompt
	}
	sc.release(s.slot)
	s.slot = -1
	sc.requeue = append([]*seqState{s}, sc.requeue...)
	sc.st.Preemptions++
}

// batch is a step's inputs and, per input, the rollouts that draw from its
// logits (a prefill's: every rollout of the prompt).
type batch struct {
	in      []model.StepInput
	readers [][]*seqState
}

func (b *batch) add(in model.StepInput, readers []*seqState) {
	b.in, b.readers = append(b.in, in), append(b.readers, readers)
}

// runStep runs one step: decodes and prefills in one model call, or, with
// a decode graph, the decodes as one graph replay (the draw on the device)
// and the prefills, when any, as an eager call of their own.
func runStep(lm LM, kv *model.KVCache, dg *model.DecodeGraph, dec, pre batch, p Params) error {
	if dg == nil {
		all := batch{in: append(dec.in, pre.in...), readers: append(dec.readers, pre.readers...)}
		if len(all.in) == 0 {
			return nil
		}
		if err := stepAndSample(lm, kv, all.in, all.readers, p); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		return nil
	}
	if len(dec.in) > 0 {
		seqs := make([]*seqState, len(dec.readers))
		for i, r := range dec.readers {
			seqs[i] = r[0]
		}
		if err := stepGraphed(dg, dec.in, seqs); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
	}
	if len(pre.in) > 0 {
		if err := stepAndSample(lm, kv, pre.in, pre.readers, p); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
	}
	return nil
}

// dropStarted removes prompts whose rollouts have all started.
func dropStarted(ps []*promptState) []*promptState {
	var kept []*promptState
	for _, p := range ps {
		if len(p.waiting) > 0 {
			kept = append(kept, p)
		}
	}
	return kept
}

// nextWaiting is the first admitted prompt whose next rollout can start
// now: its prefix is in its home slot (not still to be prefilled in this
// step), or it has no home and the rollout re-prefills the prompt.
func (sc *scheduler) nextWaiting(ps []*promptState) *promptState {
	for _, p := range ps {
		if p.home < 0 || sc.kv.Len[p.home] >= p.length {
			return p
		}
	}
	return nil
}

// newPrompt admits request r into slot home: its rollouts' states (the
// first decodes in home; all draw their first token from the prefill).
func newPrompt(r Request, dst []Completion, home int, p Params) (*promptState, []*seqState) {
	ps := &promptState{home: home, length: len(r.Prompt), tokens: r.Prompt}
	uidKey := rng.HashString(r.UID)
	seqs := make([]*seqState, r.N)
	for i := range seqs {
		dst[i] = Completion{UID: r.UID, Index: i}
		seqs[i] = &seqState{slot: -1, key: rng.Key(p.Seed, uint64(p.Step), uidKey, uint64(i)), out: &dst[i], prompt: ps}
	}
	seqs[0].slot = home
	return ps, seqs
}

// DeviceLM is implemented by models whose logits can stay on their backend
// (model.Model); with a model.DeviceSampler backend the sampler reduces them
// there.
type DeviceLM interface {
	StepLogits(kv *model.KVCache, in []model.StepInput) (*model.Tensor, error)
	Backend() model.Backend
}

// GraphLM is a model whose decode steps can run as device graphs with the
// draw on the device (model.Model).
type GraphLM interface {
	DeviceLM
	NewDecodeGraph(kv *model.KVCache, p model.SampleParams) (*model.DecodeGraph, error)
}

// canGraph reports whether lm's decode steps can run as graphs with p.
func canGraph(lm LM, p Params) bool {
	g, ok := lm.(GraphLM)
	if !ok {
		return false
	}
	ds := model.SamplerCapsOf(g.Backend()).Device
	return ds != nil && ds.DeviceSamples(sampleParams(p))
}

func sampleParams(p Params) model.SampleParams {
	return model.SampleParams{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP, ExactLogProbs: p.ExactLogProbs}
}

// stepGraphed runs one graphed decode step: active[i] draws its next
// token from row i, on the device, with its own key and counter (and with
// exact log-probs gets LogSoftmaxGather's log-prob and entropy).
func stepGraphed(dg *model.DecodeGraph, in []model.StepInput, active []*seqState) error {
	draws := make([]model.Draw, len(active))
	for i, s := range active {
		draws[i] = model.Draw{Key: s.key, Counter: uint64(len(s.out.Tokens))}
	}
	toks, lps, ents, err := dg.Step(in, draws)
	if err != nil {
		return err
	}
	for i, s := range active {
		s.push(toks[i], lps[i])
		if ents != nil {
			s.out.Entropy = append(s.out.Entropy, ents[i])
		}
	}
	return nil
}

// sampleChunk is the id chunk of the device path for unfiltered sampling.
const sampleChunk = 1024

// stepAndSample runs one model step and draws a token for each rollout
// reading each row (readers[i] read row i).
func stepAndSample(lm LM, kv *model.KVCache, in []model.StepInput, readers [][]*seqState, p Params) error {
	dev, isDev := lm.(DeviceLM)
	var rs model.DeviceSampler
	if isDev {
		rs = model.SamplerCapsOf(dev.Backend()).Device
	}
	if !isDev || (rs == nil && !p.ExactLogProbs) {
		logits, err := lm.Step(kv, in)
		if err != nil {
			return err
		}
		for i, row := range readers {
			for _, s := range row {
				s.sample(logits[i], p)
			}
		}
		return nil
	}
	t, err := dev.StepLogits(kv, in)
	if err != nil {
		return err
	}
	b := dev.Backend()
	defer model.Release(b, t)
	if err := drawOnBackend(b, rs, t, readers, p); err != nil {
		return err
	}
	if p.ExactLogProbs {
		return exactLogProbs(b, t, readers, p)
	}
	return nil
}

// drawOnBackend draws each reader's token from logits t kept on the
// backend: on the device where it samples (rs), else from the rows
// downloaded to the host.
func drawOnBackend(b model.Backend, rs model.DeviceSampler, t *model.Tensor, readers [][]*seqState, p Params) error {
	_, V := model.Matrix(t)
	switch {
	case rs == nil:
		return drawFromRows(b, t, V, readers, p)
	case p.Temperature == 0:
		return drawGreedy(b, rs, t, readers)
	case p.TopK > 0 && p.TopK < V:
		return drawTopK(b, rs, t, readers, p)
	case p.TopP >= 1:
		return drawByChunks(b, rs, t, V, readers, p.Temperature)
	default: // top-p over the whole vocabulary needs the whole row
		return drawFromRows(b, t, V, readers, p)
	}
}

// exactLogProbs ends a step with Params.ExactLogProbs: each rollout's
// drawn token (however it was drawn) gets its untempered log-probability
// and its entropy from LogSoftmaxGather on the backend's logits, one
// gathered row per rollout, the op the training forward runs on its own
// logits; they replace the sampling distribution's log-prob. With
// Params.VocabDigests each token also gets its gathered row's digest (a
// debugging check: the rows come to the host).
func exactLogProbs(b model.Backend, t *model.Tensor, readers [][]*seqState, p Params) error {
	var rows, targets []int32
	var seqs []*seqState
	for i, row := range readers {
		for _, s := range row {
			rows = append(rows, int32(i))
			targets = append(targets, s.out.Tokens[len(s.out.Tokens)-1])
			seqs = append(seqs, s)
		}
	}
	if len(seqs) == 0 {
		return backendErr(b)
	}
	_, V := model.Matrix(t)
	n := len(seqs)
	res, rowsHost, err := gatherLogSoftmax(b, t, rows, targets, p.VocabDigests)
	if err != nil {
		return err
	}
	for k, s := range seqs {
		s.out.LogProbs[len(s.out.LogProbs)-1] = res[k]
		s.out.Entropy = append(s.out.Entropy, res[2*n+k])
		if p.VocabDigests {
			s.out.VocabDigests = append(s.out.VocabDigests, model.VocabDigest(rowsHost[k*V:(k+1)*V], res[n+k]))
		}
	}
	return nil
}

// exactResult is one exact step: the downloaded logits (one row of V per
// step input), the rows and targets picked from them, and res, three
// vectors of len(targets): LogSoftmaxGather's log-probs, log-sum-exps and
// entropies.
type exactResult struct {
	host          []float32
	V             int
	rows, targets []int32
	res           []float32
}

// row returns the logits of pick k.
func (r exactResult) row(k int) []float32 {
	i := int(r.rows[k])
	return r.host[i*r.V : (i+1)*r.V]
}

// exactStep runs one model step, downloads its logits, lets pick choose
// (row, target) pairs from them, and runs LogSoftmaxGather on the picked
// rows gathered on the backend: the sampler's exact path, which the
// full-distribution check (CheckVocab) runs too.
func exactStep(lm DeviceLM, kv *model.KVCache, in []model.StepInput, pick func(host []float32, V int) (rows, targets []int32)) (exactResult, error) {
	var r exactResult
	t, err := lm.StepLogits(kv, in)
	if err != nil {
		return r, err
	}
	b := lm.Backend()
	defer model.Release(b, t)
	_, r.V = model.Matrix(t)
	r.host = make([]float32, t.Numel())
	b.Download(t, r.host)
	r.rows, r.targets = pick(r.host, r.V)
	if len(r.rows) == 0 {
		return r, backendErr(b)
	}
	r.res, _, err = gatherLogSoftmax(b, t, r.rows, r.targets, false)
	return r, err
}

// gatherLogSoftmax gathers rows of logits t on the backend and runs
// LogSoftmaxGather on them with targets (len(rows) of each, at least one):
// the training forward's op on the sampler's logits. It returns three
// vectors of len(rows), the log-probs, log-sum-exps and entropies, and
// with withRows the gathered rows on the host too.
func gatherLogSoftmax(b model.Backend, t *model.Tensor, rows, targets []int32, withRows bool) (res, host []float32, err error) {
	_, V := model.Matrix(t)
	n := len(rows)
	g, out := model.Scratch(b, n, V), model.Scratch(b, 3*n)
	defer model.Release(b, g, out)
	b.GatherRows(g, t, rows)
	vec := func(k int) *model.Tensor { return out.Rows(k*n, (k+1)*n) }
	b.LogSoftmaxGather(vec(0), vec(1), vec(2), g, targets)
	res = make([]float32, 3*n)
	b.Download(out, res)
	if withRows {
		host = make([]float32, n*V)
		b.Download(g, host)
	}
	return res, host, backendErr(b)
}

// drawGreedy gives each reader its row's argmax, the top 1 of the device.
func drawGreedy(b model.Backend, rs model.DeviceSampler, t *model.Tensor, readers [][]*seqState) error {
	ids, _ := rs.TopK(t, 1)
	if err := backendErr(b); err != nil {
		return err
	}
	for i, row := range readers {
		for _, s := range row {
			s.push(ids[i][0], 0)
		}
	}
	return nil
}

// drawTopK draws from each row's top p.TopK logits, found on the device:
// the host draw on the same numbers.
func drawTopK(b model.Backend, rs model.DeviceSampler, t *model.Tensor, readers [][]*seqState, p Params) error {
	ids, vals := rs.TopK(t, p.TopK)
	if err := backendErr(b); err != nil {
		return err
	}
	for i, row := range readers {
		for _, s := range row {
			idx, lp := Sample(vals[i], p.Temperature, p.TopK, p.TopP, s.draw())
			s.push(ids[i][idx], lp)
		}
	}
	return nil
}

// drawByChunks draws unfiltered from softmax(row/temperature) by the
// rows' chunk sums and, per draw, the one chunk that holds it (see
// chunkWalk).
func drawByChunks(b model.Backend, rs model.DeviceSampler, t *model.Tensor, V int, readers [][]*seqState, temperature float64) error {
	mx, sums := rs.ChunkSums(t, temperature, sampleChunk)
	if err := backendErr(b); err != nil {
		return err
	}
	// Every draw's chunk is located from the sums first, then all the
	// chunks come back in one download (not one per draw).
	var walks []chunkWalk
	var rows, chunks []int32
	for i, row := range readers {
		for _, s := range row {
			w := locate(i, sums[i], s.draw())
			walks = append(walks, w)
			rows, chunks = append(rows, int32(i)), append(chunks, int32(w.c))
		}
	}
	got := rs.Chunks(t, rows, chunks, sampleChunk)
	if err := backendErr(b); err != nil {
		return err
	}
	k := 0
	for i, row := range readers {
		for _, s := range row {
			tok, lp, err := walks[k].walk(b, t, V, mx[i], sums[i], temperature, got[k])
			if err != nil {
				return err
			}
			s.push(tok, lp)
			k++
		}
	}
	return nil
}

// drawFromRows downloads the whole rows and draws on the host.
func drawFromRows(b model.Backend, t *model.Tensor, V int, readers [][]*seqState, p Params) error {
	host := make([]float32, t.Numel())
	b.Download(t, host)
	if err := backendErr(b); err != nil {
		return err
	}
	for i, row := range readers {
		for _, s := range row {
			s.sample(host[i*V:(i+1)*V], p)
		}
	}
	return nil
}

// chunkWalk is one draw from softmax(row/temperature) by the row's max and
// per-chunk sums: the chunk c holding u·Σ is located from the sums (cum is
// the sum of the chunks before it), then its logits are walked in id order.
type chunkWalk struct {
	r, c               int
	total, target, cum float64
}

// locate finds the chunk of row r that holds draw u.
func locate(r int, sums []float64, u float64) chunkWalk {
	w := chunkWalk{r: r}
	for _, x := range sums {
		w.total += x
	}
	w.target = u * w.total
	for w.c = 0; w.c < len(sums)-1 && w.cum+sums[w.c] <= w.target; w.c++ {
		w.cum += sums[w.c]
	}
	return w
}

// walk walks chunk w.c (its logits in first) and, should the walk end a
// hair short of the target (the chunk sums came from the device's exp),
// goes on as locate does from there: chunks skipped by their sums, the one
// holding the target downloaded and walked.
func (w chunkWalk) walk(b model.Backend, t *model.Tensor, V int, mx float64, sums []float64, temperature float64, first []float32) (int32, float32, error) {
	flat := t.View(t.Numel())
	chunk, cum, nChunks := first, w.cum, len(sums)
	for c := w.c; c < nChunks; c++ {
		lo := c * sampleChunk
		if c > w.c {
			if c < nChunks-1 && cum+sums[c] <= w.target {
				cum += sums[c]
				continue
			}
			chunk = make([]float32, min(V, lo+sampleChunk)-lo)
			b.Download(flat.Rows(w.r*V+lo, w.r*V+lo+len(chunk)), chunk)
			if err := backendErr(b); err != nil {
				return 0, 0, err
			}
		}
		for j, v := range chunk {
			q := math.Exp(float64(v)/temperature - mx)
			cum += q
			if w.target < cum || (c == nChunks-1 && j == len(chunk)-1) {
				return int32(lo + j), float32(math.Log(q / w.total)), nil
			}
		}
	}
	return 0, 0, fmt.Errorf("sampler: row %d: the chunk walk ended without a token (%d chunks)", w.r, nChunks)
}

// backendErr returns and clears the backend's recorded error.
func backendErr(b model.Backend) error {
	if err := b.Err(); err != nil {
		b.ResetErr()
		return err
	}
	return nil
}

// finished marks stop / truncation and reports whether the rollout is done.
func (s *seqState) finished(stops map[int32]bool, maxNew int) bool {
	toks := s.out.Tokens
	if len(toks) > 0 && stops[toks[len(toks)-1]] {
		s.out.Stopped = true
		return true
	}
	if len(toks) >= maxNew {
		s.out.Truncated = true
		return true
	}
	return false
}

// sample draws the next token from logits and appends it.
func (s *seqState) sample(logits []float32, p Params) {
	tok, lp := Sample(logits, p.Temperature, p.TopK, p.TopP, s.draw())
	s.push(tok, lp)
}

// draw is the uniform number that picks the rollout's next token.
func (s *seqState) draw() float64 { return rng.Uniform(s.key, uint64(len(s.out.Tokens))) }

// push appends a sampled token and its log-probability.
func (s *seqState) push(tok int32, lp float32) {
	s.out.Tokens = append(s.out.Tokens, tok)
	s.out.LogProbs = append(s.out.LogProbs, lp)
}

// Sample picks a token from logits with uniform draw u ∈ [0, 1) and returns
// it with its log-probability under the (filtered, tempered) sampling
// distribution. Temperature 0 is greedy (lowest id among ties, log-prob 0).
// Order of filters as in Hugging Face's generate: temperature, top-k, top-p.
func Sample(logits []float32, temperature float64, topK int, topP float64, u float64) (int32, float32) {
	if temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return int32(best), 0
	}
	type cand struct {
		id int32
		z  float64
	}
	cands := make([]cand, len(logits))
	mx := math.Inf(-1)
	for i, v := range logits {
		cands[i] = cand{int32(i), float64(v) / temperature}
		mx = math.Max(mx, cands[i].z)
	}
	if filtered := (topK > 0 && topK < len(cands)) || topP < 1; filtered {
		// Descending by logit, ties by id, so the kept set and the draw are
		// stable. Unfiltered sampling skips the sort and walks ids in order.
		sort.Slice(cands, func(a, b int) bool {
			if cands[a].z != cands[b].z {
				return cands[a].z > cands[b].z
			}
			return cands[a].id < cands[b].id
		})
		if topK > 0 && topK < len(cands) {
			cands = cands[:topK]
		}
	}
	probs := make([]float64, len(cands))
	var sum float64
	for i, c := range cands {
		probs[i] = math.Exp(c.z - mx)
		sum += probs[i]
	}
	if topP < 1 {
		keep := nucleus(probs, sum, topP)
		cands, probs = cands[:keep], probs[:keep]
		sum = 0
		for _, q := range probs {
			sum += q
		}
	}
	target := u * sum
	var cum float64
	for i, q := range probs {
		cum += q
		if target < cum || i == len(probs)-1 {
			return cands[i].id, float32(math.Log(q / sum))
		}
	}
	return cands[0].id, float32(math.Log(probs[0] / sum))
}

// nucleus is the length of the smallest prefix of probs (in descending
// order, summing to sum) whose mass reaches topP, at least one token.
func nucleus(probs []float64, sum, topP float64) int {
	var cum float64
	for i := range probs {
		cum += probs[i] / sum
		if cum >= topP {
			return i + 1
		}
	}
	return len(probs)
}
