package model

// KV-cached inference: prefill and incremental decode are the same call.
// Each cache slot holds one sequence's keys and values for every layer in a
// contiguous block of MaxLen rows; Step appends tokens to any set of slots
// (a long prompt to one, a single sampled token to each of many) and returns
// next-token logits, attending over everything the slot holds.

import "fmt"

// KVCache stores per-layer keys and values for Slots sequences.
type KVCache struct {
	Slots, MaxLen int
	K, V          []*Tensor // per layer (Slots·MaxLen, G, D), keys after k_norm and RoPE
	Len           []int     // tokens held per slot
	// Pages is the page accounting of a paged cache (NewPagedKVCache);
	// nil for a plain one, whose every row is always backed.
	Pages *KVPages
	b     Backend
}

// Release gives the cache's memory back (see MemoryPool); the cache must not
// be used afterwards.
func (kv *KVCache) Release() {
	if kv.Pages != nil && kv.Pages.mapper != nil {
		kv.Pages.mapper.Release()
		kv.Pages.mapper = nil
		kv.K, kv.V = nil, nil
	}
	if kv.b != nil {
		Release(kv.b, kv.K...)
		Release(kv.b, kv.V...)
		kv.K, kv.V, kv.b = nil, nil, nil
	}
}

// NewKVCache allocates a cache for slots sequences of up to maxLen tokens.
func (m *Model) NewKVCache(slots, maxLen int) *KVCache {
	c := m.Cfg
	kv := &KVCache{Slots: slots, MaxLen: maxLen, Len: make([]int, slots), b: m.B}
	alloc, _ := m.kvAlloc()
	for range m.P.Layers {
		kv.K = append(kv.K, alloc(slots*maxLen, c.NumKeyValueHeads, c.HeadDim))
		kv.V = append(kv.V, alloc(slots*maxLen, c.NumKeyValueHeads, c.HeadDim))
	}
	return kv
}

// kvAlloc returns the allocator of m's cache tensors on its backend and
// whether that format rounds what it stores (a bf16 or fp8 cache).
func (m *Model) kvAlloc() (alloc func(shape ...int) *Tensor, rounds bool) {
	if f, ok := m.fp8Cache(); ok {
		return f.NewFP8, true
	}
	if h := SamplerCapsOf(m.B).KV; h != nil && m.KVCacheBF16 {
		return h.NewHalf, true
	}
	return m.B.New, false
}

// freshAttention is attention over a packed batch's own keys and values
// (the training forward). In exact mode with a cache format that rounds
// (ExactKV), k and v go through the cache's write first: ScatterRows into
// a scratch of that format, attention over the scratch, and the rounded
// values copied back into a.kn and a.v (fp32) for the backward.
func (m *Model) freshAttention(a *layerActs, segs []Segment) {
	b := m.B
	alloc, rounds := m.kvAlloc()
	if !m.ExactKV || !rounds {
		b.Attention(a.att, a.lse, a.qn, a.kn, a.v, segs, m.attnScale())
		return
	}
	n, G, D := a.kn.Shape[0], m.Cfg.NumKeyValueHeads, m.Cfg.HeadDim
	rows := make([]int32, n)
	for i := range rows {
		rows[i] = int32(i)
	}
	sk, sv := alloc(n, G, D), alloc(n, G, D)
	b.ScatterRows(sk, a.kn, rows, false)
	b.ScatterRows(sv, a.v, rows, false)
	b.Attention(a.att, a.lse, a.qn, sk, sv, segs, m.attnScale())
	b.Copy(a.kn, sk)
	b.Copy(a.v, sv)
	Release(b, sk, sv)
}

// Reset empties slot s so a new sequence can use it (a paged cache gives
// its pages back).
func (kv *KVCache) Reset(s int) {
	kv.Len[s] = 0
	if kv.Pages != nil {
		// Shrinking never maps, so it cannot run out of pages; an unmap
		// failure is a broken device, surfaced by the next op.
		_ = kv.Pages.resize(s, 0)
	}
}

// Grow backs rows [0, n) of slot s with pages (a paged cache; a plain one
// always is), before a step writes them. It maps all the pages it needs or
// none, and fails with ErrNoPages when the budget lacks them. It does not
// change Len.
func (kv *KVCache) Grow(s, n int) error {
	if s < 0 || s >= kv.Slots || n > kv.MaxLen {
		return fmt.Errorf("grow slot %d to %d rows: cache has %d slots of %d rows", s, n, kv.Slots, kv.MaxLen)
	}
	if kv.Pages == nil || n <= kv.Pages.rows[s] {
		return nil
	}
	return kv.Pages.resize(s, n)
}

// Truncate cuts slot s back to its first n tokens (a paged cache gives
// back the pages past them).
func (kv *KVCache) Truncate(s, n int) error {
	if s < 0 || s >= kv.Slots || n < 0 || n > kv.Len[s] {
		return fmt.Errorf("truncate slot %d to %d tokens: cache has %d slots, the slot holds %d", s, n, kv.Slots, kv.Len[s])
	}
	kv.Len[s] = n
	if kv.Pages != nil {
		return kv.Pages.resize(s, n)
	}
	return nil
}

// backed is the rows of slot s a step may write.
func (kv *KVCache) backed(s int) int {
	if kv.Pages == nil {
		return kv.MaxLen
	}
	return kv.Pages.rows[s]
}

// CopySlot makes slot dst hold the same prefix as slot src, so rollouts of
// one prompt share a prefill instead of each recomputing it.
func (m *Model) CopySlot(kv *KVCache, dst, src int) error {
	if src < 0 || src >= kv.Slots {
		return fmt.Errorf("copy slot %d to %d: cache has %d slots", src, dst, kv.Slots)
	}
	return m.CopyPrefix(kv, dst, src, kv.Len[src])
}

// CopyPrefix makes slot dst hold the first n tokens of slot src (a prompt
// prefix under a rollout that has gone on decoding in src).
func (m *Model) CopyPrefix(kv *KVCache, dst, src, n int) error {
	if dst < 0 || dst >= kv.Slots || src < 0 || src >= kv.Slots || dst == src {
		return fmt.Errorf("copy slot %d to %d: cache has %d slots", src, dst, kv.Slots)
	}
	if n < 0 || n > kv.Len[src] {
		return fmt.Errorf("copy %d tokens of slot %d to %d: it holds %d", n, src, dst, kv.Len[src])
	}
	if kv.backed(dst) < n {
		return fmt.Errorf("copy %d tokens of slot %d to %d: pages back only %d rows of it (KVCache.Grow first)", n, src, dst, kv.backed(dst))
	}
	for l := range kv.K {
		m.B.Copy(kv.K[l].Rows(dst*kv.MaxLen, dst*kv.MaxLen+n), kv.K[l].Rows(src*kv.MaxLen, src*kv.MaxLen+n))
		m.B.Copy(kv.V[l].Rows(dst*kv.MaxLen, dst*kv.MaxLen+n), kv.V[l].Rows(src*kv.MaxLen, src*kv.MaxLen+n))
	}
	kv.Len[dst] = n
	return m.checkErr("copy slot")
}

// StepInput appends Tokens to cache slot Slot.
type StepInput struct {
	Slot   int
	Tokens []int32
}

// Step appends each input's tokens to its slot and returns, per input, the
// logits (V) that predict the token after its last one.
func (m *Model) Step(kv *KVCache, in []StepInput) ([][]float32, error) {
	return m.step(kv, in, false)
}

// StepLogits is Step with the logits (len(in), V) left on the backend, for
// samplers that reduce them there (see DeviceSampler); the caller releases
// them (model.Release).
func (m *Model) StepLogits(kv *KVCache, in []StepInput) (*Tensor, error) {
	return m.stepTensor(kv, in, false)
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() Backend { return m.B }

// Logits returns the logits (V) at every position of one sequence, computed
// through the KV-cache path in a single prefill.
func (m *Model) Logits(tokens []int32) ([][]float32, error) {
	kv := m.NewKVCache(1, len(tokens))
	defer kv.Release()
	return m.step(kv, []StepInput{{Slot: 0, Tokens: tokens}}, true)
}

func (m *Model) step(kv *KVCache, in []StepInput, all bool) ([][]float32, error) {
	logits, err := m.stepTensor(kv, in, all)
	if err != nil {
		return nil, err
	}
	V := m.Cfg.VocabSize
	host := make([]float32, logits.Numel())
	m.B.Download(logits, host)
	Release(m.B, logits)
	if err := m.checkErr("step"); err != nil {
		return nil, err
	}
	out := make([][]float32, logits.Numel()/V)
	for i := range out {
		out[i] = host[i*V : (i+1)*V]
	}
	return out, nil
}

// stepPlan is one cached step's index tables.
type stepPlan struct {
	ids, pos []int32 // (N) packed tokens and their positions
	rows     []int32 // (N) cache row each token's key and value go to
	heads    []int32 // (M) packed rows whose logits are wanted
	segs     []Segment
}

// add appends input s (its tokens after the kv.Len[s.Slot] its slot holds);
// all asks for logits at every position, not only the last.
func (p *stepPlan) add(kv *KVCache, s StepInput, vocab int, all bool) error {
	if len(s.Tokens) == 0 {
		return fmt.Errorf("no tokens")
	}
	past := kv.Len[s.Slot]
	if past+len(s.Tokens) > kv.MaxLen {
		return fmt.Errorf("slot %d would hold %d tokens, the cache holds at most %d", s.Slot, past+len(s.Tokens), kv.MaxLen)
	}
	if past+len(s.Tokens) > kv.backed(s.Slot) {
		return fmt.Errorf("slot %d would hold %d tokens, pages back only %d rows (KVCache.Grow first)", s.Slot, past+len(s.Tokens), kv.backed(s.Slot))
	}
	q0 := len(p.ids)
	for t, id := range s.Tokens {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("position %d: token %d outside the vocabulary [0, %d)", t, id, vocab)
		}
		p.ids = append(p.ids, id)
		p.pos = append(p.pos, int32(past+t))
		p.rows = append(p.rows, int32(s.Slot*kv.MaxLen+past+t))
		if all || t == len(s.Tokens)-1 {
			p.heads = append(p.heads, int32(q0+t))
		}
	}
	p.segs = append(p.segs, Segment{Q0: q0, QLen: len(s.Tokens), K0: s.Slot * kv.MaxLen, KLen: past + len(s.Tokens)})
	return nil
}

// stepTensor runs the cached forward and returns the logits on the backend.
func (m *Model) stepTensor(kv *KVCache, in []StepInput, all bool) (*Tensor, error) {
	var plan stepPlan
	seen := map[int]bool{}
	for i, s := range in {
		if s.Slot < 0 || s.Slot >= kv.Slots || seen[s.Slot] {
			return nil, fmt.Errorf("step: input %d names slot %d (cache has %d slots; each slot at most once per step)", i, s.Slot, kv.Slots)
		}
		seen[s.Slot] = true
		if err := plan.add(kv, s, m.Cfg.VocabSize, all); err != nil {
			return nil, fmt.Errorf("step: input %d: %w", i, err)
		}
	}
	logits := m.forwardCached(kv, plan)
	if err := m.checkErr("step"); err != nil {
		Release(m.B, logits)
		return nil, err
	}
	for _, s := range in {
		kv.Len[s.Slot] += len(s.Tokens)
	}
	return logits, nil
}

// forwardCached writes plan's keys and values to the cache and returns the
// logits (len(plan.heads), V) on the backend; the caller checks the
// backend's error and advances kv.Len.
func (m *Model) forwardCached(kv *KVCache, plan stepPlan) *Tensor {
	b, c := m.B, m.Cfg
	n, C := len(plan.ids), c.HiddenSize
	x := Scratch(b, n, C)
	b.Embedding(x, m.P.Embed, plan.ids)
	a := m.newLayerActs(n, false)
	kp := kvPlan{cacheK: kv.K, cacheV: kv.V, rows: plan.rows, segs: plan.segs}
	for l := range m.P.Layers {
		m.layerForward(l, a, x, x, plan.pos, kp)
	}
	h, hn := Scratch(b, len(plan.heads), C), Scratch(b, len(plan.heads), C)
	b.GatherRows(h, x, plan.heads)
	b.RMSNorm(hn, nil, h, m.P.FinalNorm, float32(c.RMSNormEps))
	logits := Scratch(b, len(plan.heads), c.VocabSize)
	b.MatMul(logits, hn, m.P.LMHead, false, true, false)
	Release(b, a.tensors()...)
	Release(b, x, h, hn)
	return logits
}

// checkErr returns (and clears) the backend's recorded error, wrapped with op.
func (m *Model) checkErr(op string) error {
	if err := m.B.Err(); err != nil {
		m.B.ResetErr()
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
