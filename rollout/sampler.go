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
	kv := lm.NewKVCache(slots, maxPrompt+p.MaxNewTokens)
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
		logits, err := lm.Step(kv, in)
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		for i, s := range active {
			s.sample(logits[i], p)
		}
	}
	return out, nil
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
	logits, err := lm.Step(kv, []model.StepInput{{Slot: first, Tokens: r.Prompt}})
	if err != nil {
		return nil, fmt.Errorf("prefill uid %q: %w", r.UID, err)
	}
	uidKey := rng.HashString(r.UID)
	var seqs []*seqState
	for i := 0; i < r.N; i++ {
		slot := first
		if i > 0 {
			slot = take()
			if err := lm.CopySlot(kv, slot, first); err != nil {
				return nil, err
			}
		}
		dst[i] = Completion{UID: r.UID, Index: i}
		s := &seqState{slot: slot, key: rng.Key(p.Seed, uint64(p.Step), uidKey, uint64(i)), out: &dst[i]}
		seqs = append(seqs, s)
	}
	for _, s := range seqs {
		s.sample(logits[0], p)
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
	u := rng.Uniform(s.key, uint64(len(s.out.Tokens)))
	tok, lp := Sample(logits, p.Temperature, p.TopK, p.TopP, u)
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
