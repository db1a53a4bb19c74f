// Package rollout generates completions: batched prefill and KV-cached
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
// rollouts copy that slot and all sample their first token from the same
// prefill logits.
//
// Device-side reductions: when the model's backend implements
// model.RowSampler (the CUDA backend), a decode step downloads per row only
// what the draw needs — the top k logits for greedy and top-k sampling (the
// draw is then the same host arithmetic on the same numbers), or chunk sums
// plus one 1024-id chunk for unfiltered sampling (equal to the full-row
// draw up to float64 rounding of the normaliser) — instead of the whole
// vocabulary. Top-p without top-k downloads full rows.
//
// Device draws (Params.Graphs, on a model.StepGrapher backend): each
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
// boundary of the cumulative sum; over 12,288 draws on random logits
// (greedy, unfiltered, top-k, top-k + top-p) none differed on the emulator
// (cuda TestDeviceDrawMatchesHost, which allows 1 in 1,000). Greedy draws
// are the same argmax (lowest id among ties). Either way the tokens do not
// depend on the batch composition, the slot count or the order of prompts
// (the padding rows of a graph's bucket are computed and ignored).
package rollout

import (
	"context"
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
	CopySlot(kv *model.KVCache, dst, src int) error
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
	// Graphs runs decode steps as device graphs with the draw on the
	// device where the model can (GraphLM on a CUDA backend, and settings
	// the device draws: not top-p without top-k); elsewhere it is ignored.
	Graphs bool
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
	UID       string
	Index     int     // rollout index within its prompt, 0..N−1
	Tokens    []int32 // generated tokens, the stop token included when one was hit
	LogProbs  []float32
	Stopped   bool // ended on a stop token
	Truncated bool // hit MaxNewTokens without a stop token
}

// seqState is one in-flight rollout.
type seqState struct {
	slot int
	key  uint64
	out  *Completion
}

// Generate samples every request's completions and returns them grouped by
// request in order, rollouts in index order. bar may be nil.
func Generate(ctx context.Context, lm LM, reqs []Request, p Params, bar *progress.Bar) ([][]Completion, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	slots := p.MaxSlots
	if slots == 0 {
		slots = 64
	}
	maxPrompt := 0
	for i, r := range reqs {
		if len(r.Prompt) == 0 {
			return nil, fmt.Errorf("request %d (uid %q): empty prompt", i, r.UID)
		}
		if r.N < 0 || r.N > slots {
			return nil, fmt.Errorf("request %d (uid %q): %d rollouts, must be in [0, %d] (the slot count)", i, r.UID, r.N, slots)
		}
		maxPrompt = max(maxPrompt, len(r.Prompt))
	}
	graphed := p.Graphs && canGraph(lm, p)
	kvSlots := slots
	if graphed {
		kvSlots++ // the padding rows' spare slot (model.DecodeGraph), never handed out
	}
	kv := lm.NewKVCache(kvSlots, maxPrompt+p.MaxNewTokens)
	defer kv.Release()
	var dg *model.DecodeGraph
	if graphed {
		var err error
		if dg, err = lm.(GraphLM).NewDecodeGraph(kv, sampleParams(p)); err != nil {
			return nil, err
		}
		defer dg.Release()
	}
	out := make([][]Completion, len(reqs))
	stops := map[int32]bool{}
	for _, id := range p.StopIDs {
		stops[id] = true
	}
	var free []int
	for s := slots - 1; s >= 0; s-- {
		free = append(free, s)
	}
	var active []*seqState
	next := 0
	for next < len(reqs) || len(active) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Admit whole prompts while their rollouts fit in free slots.
		for next < len(reqs) && reqs[next].N <= len(free) {
			r := reqs[next]
			out[next] = make([]Completion, r.N)
			if r.N == 0 {
				next++
				continue
			}
			admitted, err := admit(lm, kv, r, out[next], &free, p)
			if err != nil {
				return nil, err
			}
			active = append(active, admitted...)
			next++
		}
		// Sample one token for every active rollout, retire finished ones,
		// and feed the rest back through the model in one decode step.
		var in []model.StepInput
		var kept []*seqState
		for _, s := range active {
			if done := s.finished(stops, p.MaxNewTokens); done {
				free = append(free, s.slot)
				bar.Add(1, len(s.out.Tokens))
				continue
			}
			kept = append(kept, s)
			in = append(in, model.StepInput{Slot: s.slot, Tokens: s.out.Tokens[len(s.out.Tokens)-1:]})
		}
		active = kept
		if len(in) == 0 {
			continue
		}
		if dg != nil {
			if err := stepGraphed(dg, in, active); err != nil {
				return nil, fmt.Errorf("decode: %w", err)
			}
			continue
		}
		readers := make([][]*seqState, len(active))
		for i, s := range active {
			readers[i] = []*seqState{s}
		}
		if err := stepAndSample(lm, kv, in, readers, p); err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
	}
	return out, nil
}

// DeviceLM is implemented by models whose logits can stay on their backend
// (model.Model); with a model.RowSampler backend the sampler reduces them
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
	_, graphs := g.Backend().(model.StepGrapher)
	ts, draws := g.Backend().(model.TokenSampler)
	return graphs && draws && ts.DeviceSamples(sampleParams(p))
}

func sampleParams(p Params) model.SampleParams {
	return model.SampleParams{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP}
}

// stepGraphed runs one graphed decode step: active[i] draws its next
// token from row i, on the device, with its own key and counter.
func stepGraphed(dg *model.DecodeGraph, in []model.StepInput, active []*seqState) error {
	draws := make([]model.Draw, len(active))
	for i, s := range active {
		draws[i] = model.Draw{Key: s.key, Counter: uint64(len(s.out.Tokens))}
	}
	toks, lps, err := dg.Step(in, draws)
	if err != nil {
		return err
	}
	for i, s := range active {
		s.push(toks[i], lps[i])
	}
	return nil
}

// sampleChunk is the id chunk of the device path for unfiltered sampling.
const sampleChunk = 1024

// stepAndSample runs one model step and draws a token for each rollout
// reading each row (readers[i] read row i).
func stepAndSample(lm LM, kv *model.KVCache, in []model.StepInput, readers [][]*seqState, p Params) error {
	dev, isDev := lm.(DeviceLM)
	var rs model.RowSampler
	if isDev {
		rs, isDev = dev.Backend().(model.RowSampler)
	}
	if !isDev {
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
	_, V := model.Matrix(t)
	switch {
	case p.Temperature == 0:
		ids, _ := rs.TopK(t, 1)
		if err := backendErr(b); err != nil {
			return err
		}
		for i, row := range readers {
			for _, s := range row {
				s.push(ids[i][0], 0)
			}
		}
	case p.TopK > 0 && p.TopK < V:
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
	case p.TopP >= 1:
		mx, sums := rs.ChunkSums(t, p.Temperature, sampleChunk)
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
				tok, lp, err := walks[k].walk(b, t, V, mx[i], sums[i], p.Temperature, got[k])
				if err != nil {
					return err
				}
				s.push(tok, lp)
				k++
			}
		}
	default: // top-p over the whole vocabulary needs the whole row
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

// admit prefills request r into one slot, copies it to the other rollouts'
// slots and samples each rollout's first token into dst.
func admit(lm LM, kv *model.KVCache, r Request, dst []Completion, free *[]int, p Params) ([]*seqState, error) {
	take := func() int {
		s := (*free)[len(*free)-1]
		*free = (*free)[:len(*free)-1]
		kv.Reset(s)
		return s
	}
	first := take()
	uidKey := rng.HashString(r.UID)
	var seqs []*seqState
	for i := 0; i < r.N; i++ {
		slot := first
		if i > 0 {
			slot = take()
		}
		dst[i] = Completion{UID: r.UID, Index: i}
		seqs = append(seqs, &seqState{slot: slot, key: rng.Key(p.Seed, uint64(p.Step), uidKey, uint64(i)), out: &dst[i]})
	}
	// Prefill once, every rollout draws its first token from that row, then
	// the other rollouts' slots receive copies of the prefilled cache.
	if err := stepAndSample(lm, kv, []model.StepInput{{Slot: first, Tokens: r.Prompt}}, [][]*seqState{seqs}, p); err != nil {
		return nil, fmt.Errorf("prefill uid %q: %w", r.UID, err)
	}
	for _, s := range seqs[1:] {
		if err := lm.CopySlot(kv, s.slot, first); err != nil {
			return nil, err
		}
	}
	return seqs, nil
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
		// Keep the smallest prefix whose mass reaches topP (at least one token).
		var cum float64
		keep := len(cands)
		for i := range probs {
			cum += probs[i] / sum
			if cum >= topP {
				keep = i + 1
				break
			}
		}
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
