package model

// Decode steps replayed as one device graph (the CUDA backend's CUDA
// graphs), with the next token drawn on the device.
//
// A graph replays fixed work on fixed memory, so a graphed step has a
// fixed shape: its rows are padded up to a bucket (powers of two up to the
// usable slot count), and the padding rows write to a spare cache slot —
// the cache's last, which the caller never hands out — and are ignored.
// Everything that varies from step to step (token ids, positions, cache
// rows, attention segments, the draws' keys) reaches the device as index
// tables the backend's ops upload; under a graph those land in one pinned
// block that the graph copies in as its first node, so the host only
// rewrites that block and launches the graph.
//
// Tokens are drawn on the device with the sampler's key and counter
// (rollout's determinism contract); see DeviceSampler.SampleTokens for how a device draw
// relates to the host's.
//
// With exact log-probs (SampleParams.ExactLogProbs, docs/algorithm.md
// §5.10) the graph goes on after the draw: LogSoftmaxGatherDrawn on the
// step's untempered logits, its targets the drawn tokens as they lie on
// the device, gives each row the log-prob and entropy the training
// forward's LogSoftmaxGather computes, and they come back with the tokens
// in the step's one download. Padding rows are computed and ignored.

import (
	"fmt"
	"math"
)

// Draw is the key and counter of a row's uniform number:
// rng.Uniform(Key, Counter) picks the row's token.
type Draw struct {
	Key, Counter uint64
}

// SampleParams are the sampling settings a device draw applies (as
// sampler.Sample: temperature 0 is greedy; then top-k, then top-p).
type SampleParams struct {
	Temperature float64
	TopK        int     // 0: off
	TopP        float64 // 1: off
	// ExactLogProbs is no draw setting but what a DecodeGraph's step
	// returns for each token: LogSoftmaxGather's untempered log-prob and
	// the row's entropy (precision.exact_logprobs) instead of the draw's
	// (tempered, filtered) log-prob. SampleTokens ignores it.
	ExactLogProbs bool
}

// GraphSet runs a decode loop's steps as graphs, one per key (a row
// bucket). Run calls step, which issues one step's ops and returns the
// small tensor to bring back: the first time for a key eagerly (sizing the
// graph's private memory), the second time captured into a graph that is
// then launched, afterwards with the backend recording nothing but the
// index tables step uploads, checked against the capture, and the graph
// relaunched. step must issue the same ops on the same shapes for a key
// each time (the backend refuses a replay otherwise and runs step eagerly).
// The returned words are the tensor's contents, after the step's one host
// synchronisation.
type GraphSet interface {
	Run(key string, step func() (*Tensor, error)) ([]uint32, error)
	// Release frees the graphs and their memory.
	Release()
}

// DecodeGraph runs a KV cache's decode steps as graphs with device
// sampling. The cache's last slot is the padding rows' spare and must
// never be handed out.
type DecodeGraph struct {
	m     *Model
	kv    *KVCache
	gs    GraphSet
	ts    DeviceSampler
	p     SampleParams
	spare int
	Steps map[int]int // graphed steps run per bucket (for tests and logs)
}

// NewDecodeGraph prepares graphed decoding of kv with sampling settings p.
// It fails when the backend cannot graph steps or draw with p.
func (m *Model) NewDecodeGraph(kv *KVCache, p SampleParams) (*DecodeGraph, error) {
	g := SamplerCapsOf(m.B).Device
	if g == nil {
		return nil, fmt.Errorf("decode graph: backend %s has no graphs", m.B.Name())
	}
	ts := g
	if !ts.DeviceSamples(p) {
		return nil, fmt.Errorf("decode graph: backend %s cannot draw with %+v on the device", m.B.Name(), p)
	}
	if kv.Slots < 2 {
		return nil, fmt.Errorf("decode graph: the cache needs a spare slot beside the sequences' (it has %d)", kv.Slots)
	}
	// Padding row j of a bucket writes row j mod MaxLen of the spare slot
	// (plan), and buckets hold at most Slots−1 rows: those rows must stay
	// backed in a paged cache, for good, since graphs replay the writes.
	if err := kv.Grow(kv.Slots-1, min(kv.Slots-1, kv.MaxLen)); err != nil {
		return nil, fmt.Errorf("decode graph: pages for the spare slot's padding rows: %w", err)
	}
	gs, err := g.NewGraphSet(kv.MaxLen, m.Cfg.RopeTheta, m.Cfg.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("decode graph: %w", err)
	}
	return &DecodeGraph{m: m, kv: kv, gs: gs, ts: ts, p: p, spare: kv.Slots - 1, Steps: map[int]int{}}, nil
}

// Release frees the graphs (not the cache).
func (g *DecodeGraph) Release() { g.gs.Release() }

// Bucket is the padded row count of a step of n rows: the next power of
// two, capped at the usable slot count (so at most log2(slots)+2 graphs).
// Powers of two waste at most half a step's rows on padding while rows
// finish, and keep the graphs (each holding its activations and logits)
// few.
func (g *DecodeGraph) Bucket(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return min(b, g.spare)
}

// Step appends one token to each input's slot (in[i].Tokens has length 1),
// and returns each row's drawn next token and its log-probability, and
// with exact log-probs each row's entropy (nil otherwise).
func (g *DecodeGraph) Step(in []StepInput, draws []Draw) (toks []int32, lps, ents []float32, err error) {
	if len(in) == 0 || len(in) != len(draws) || len(in) > g.spare {
		return nil, nil, nil, fmt.Errorf("decode graph: %d inputs, %d draws (at most %d rows)", len(in), len(draws), g.spare)
	}
	R := g.Bucket(len(in))
	plan, err := g.plan(in, draws, R)
	if err != nil {
		return nil, nil, nil, err
	}
	words, err := g.gs.Run(fmt.Sprintf("rows=%d", R), func() (*Tensor, error) { return g.body(plan, R) })
	if err != nil {
		return nil, nil, nil, fmt.Errorf("decode graph (%d rows in %d): %w", len(in), R, err)
	}
	for _, s := range in {
		g.kv.Len[s.Slot]++
	}
	g.Steps[R]++
	toks, lps = make([]int32, len(in)), make([]float32, len(in))
	for i := range in {
		toks[i] = int32(words[2*i])
		lps[i] = math.Float32frombits(words[2*i+1])
	}
	if g.p.ExactLogProbs {
		// words: the draws (R, 2), then LogSoftmaxGather's log-probs,
		// log-sum-exps and entropies, R of each.
		ents = make([]float32, len(in))
		for i := range in {
			lps[i] = math.Float32frombits(words[2*R+i])
			ents[i] = math.Float32frombits(words[4*R+i])
		}
	}
	return toks, lps, ents, nil
}

// body issues one step of R rows (plan) and returns the tensor to bring
// back: per row the drawn token's int32 bits and its log-prob, then with
// exact log-probs three vectors of R: LogSoftmaxGatherDrawn's log-probs,
// log-sum-exps and entropies.
func (g *DecodeGraph) body(plan graphPlan, R int) (*Tensor, error) {
	m, b := g.m, g.m.B
	logits := m.forwardCached(g.kv, plan.step) // (R, V)
	width := 2
	if g.p.ExactLogProbs {
		width = 5
	}
	out := Scratch(b, width*R)
	drawn := out.Rows(0, 2*R).View(R, 2)
	g.ts.SampleTokens(drawn, logits, plan.draws, g.p)
	if g.p.ExactLogProbs {
		vec := func(k int) *Tensor { return out.Rows(k*R, (k+1)*R) }
		g.ts.LogSoftmaxGatherDrawn(vec(2), vec(3), vec(4), logits, drawn)
	}
	Release(b, logits)
	if err := m.checkErr("decode graph step"); err != nil {
		Release(b, out)
		return nil, err
	}
	return out, nil
}

// graphPlan is a padded step's tables.
type graphPlan struct {
	step  stepPlan
	draws []Draw
}

// plan pads in to R rows: padding row j writes and reads one key at a row
// of the spare slot (row j mod MaxLen), at position 0, with token 0.
func (g *DecodeGraph) plan(in []StepInput, draws []Draw, R int) (graphPlan, error) {
	kv := g.kv
	var p graphPlan
	seen := map[int]bool{}
	for i, s := range in {
		if len(s.Tokens) != 1 {
			return p, fmt.Errorf("decode graph: input %d has %d tokens, a decode step takes 1", i, len(s.Tokens))
		}
		if s.Slot < 0 || s.Slot >= g.spare || seen[s.Slot] {
			return p, fmt.Errorf("decode graph: input %d names slot %d (slots 0..%d, each once; %d is the spare)", i, s.Slot, g.spare-1, g.spare)
		}
		seen[s.Slot] = true
		if err := p.step.add(kv, s, g.m.Cfg.VocabSize, false); err != nil {
			return p, fmt.Errorf("decode graph: input %d: %w", i, err)
		}
	}
	p.draws = append(p.draws, draws...)
	for j := len(in); j < R; j++ {
		row := g.spare*kv.MaxLen + j%kv.MaxLen
		q := len(p.step.ids)
		p.step.ids = append(p.step.ids, 0)
		p.step.pos = append(p.step.pos, 0)
		p.step.rows = append(p.step.rows, int32(row))
		p.step.heads = append(p.step.heads, int32(q))
		p.step.segs = append(p.step.segs, Segment{Q0: q, QLen: 1, K0: row, KLen: 1})
		p.draws = append(p.draws, Draw{})
	}
	return p, nil
}
