package model

// The Qwen3 decoder, written once against Backend.
//
//	x   = embed(ids)
//	for each layer:
//	  h    = rmsnorm(x) ;  q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ   (one product)
//	  q, k = rope(rmsnorm_per_head(q)), rope(rmsnorm_per_head(k))
//	  x    = x + attention(q, k, v)·Woᵀ            (causal, GQA)
//	  h    = rmsnorm(x)
//	  x    = x + (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ        (gate and up: one product)
//	logits = rmsnorm(x)·Wlmᵀ                      (Wlm = Wembed when tied)
//
// Batching: sequences of different lengths are packed end to end into one
// (N, C) activation matrix with no padding; attention segments keep each
// sequence causal and private. Positions restart at 0 for every sequence.
// The LM head runs only on rows whose next-token log-probability is asked
// for, in chunks of rows, so the (M, V) logits never exist all at once.

import (
	"fmt"
	"math"
)

// Model is a Qwen3 model on a backend.
type Model struct {
	Cfg *Config
	B   Backend
	P   *Params
	// A holds the LoRA adapters (an adapter set, lora.go) added to P's
	// projections; nil for a plain model.
	A *Params
	// Recompute keeps only each layer's input from a training forward and
	// recomputes the layer's activations in the backward (activation
	// checkpointing): about (C + one layer's activations) per token instead
	// of every layer's, for one extra forward. Gradients are bitwise the
	// same, since the recomputation repeats the same ops on the same inputs.
	Recompute bool
	// frozen: Freeze moved the matrices (but the input embedding) to
	// read-only bf16 storage.
	frozen bool
	// KVCacheBF16 holds the KV cache in bf16 on backends that can
	// (KVFormats; CheckKVCache says why not): half the memory and the
	// decode bandwidth; new keys and values are rounded as they are
	// written.
	KVCacheBF16 bool
	// KVCacheFP8 holds it in e4m3 with a scale per token and KV head
	// (fp8.go) on backends that can (KVFormats; CheckKVCache says why
	// not): a quarter of fp32's memory and decode bandwidth.
	KVCacheFP8 bool
	// ExactKV (precision.exact_logprobs; the trainer sets it) gives the
	// training forward's attention the keys and values the sampler's
	// cache holds (KVCacheBF16, KVCacheFP8): each layer writes its fresh
	// k, v with the cache's own ScatterRows into a scratch of the cache's
	// format, and attention reads the scratch, so a bf16 cache's rounding
	// or an fp8 cache's per-(token, head) scales are the training
	// forward's too, by construction. The rounded values, widened back to
	// fp32, replace k and v for the backward: it differentiates the
	// attention the forward computed, and passes the gradient of the
	// rounded keys and values to the unrounded ones unchanged (straight
	// through; the rounding's derivative is taken as 1). Attention's
	// tensors (q, k, v, out) stay fp32 in training, as in decoding, so
	// the queries are the same too. Nothing changes with an fp32 cache
	// (the CPU's).
	ExactKV bool
}

// Load reads config.json and the weights of a Hugging Face folder.
func Load(b Backend, dir string) (*Model, error) {
	cfg, err := LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	p, err := LoadParams(b, cfg, dir)
	if err != nil {
		return nil, err
	}
	return &Model{Cfg: cfg, B: b, P: p}, nil
}

// Freeze moves the weight matrices (not the norms or the input embedding)
// to read-only bf16 storage when the backend supports it, for a model that is
// only ever run forward (the frozen reference policy). It reports whether
// anything was frozen; on backends without bf16 storage it does nothing.
func (m *Model) Freeze() (bool, error) {
	f := TrainerCapsOf(m.B).Half
	if f == nil {
		return false, nil
	}
	for _, np := range m.P.Named(m.Cfg) {
		// Norms stay float32 (tiny, read by RMSNorm), and so does the input
		// embedding: a bf16-product policy looks its rows up unrounded, so
		// a rounded table would make reference and policy differ at step 0.
		if len(np.Shape) < 2 || np.Ptr == &m.P.Embed {
			continue
		}
		if err := f.Freeze(*np.Ptr); err != nil {
			return false, fmt.Errorf("freeze %s: %w", np.Name, err)
		}
	}
	for i := range m.P.Layers { // the fused storages their views now share
		l := &m.P.Layers[i]
		if err := f.Freeze(l.GateUp); err != nil {
			return false, fmt.Errorf("freeze layer %d gate_up: %w", i, err)
		}
		if err := f.Freeze(l.QKV); err != nil {
			return false, fmt.Errorf("freeze layer %d qkv: %w", i, err)
		}
	}
	m.frozen = true
	return true, nil
}

// ShadowWeights gives every weight matrix (embedding and LM head
// included; not the norms) a bf16 copy for matrix products where the
// backend keeps them (HalfPrecision.Shadow): the policy under bf16 products, whose
// fp32 weights stay the optimizer's master copy. A matrix that is bf16
// already (HalfPrecision.HalfOnly: its fp32 master sharded over the ranks) needs
// none. It reports whether products read bf16 weights.
func (m *Model) ShadowWeights() (bool, error) {
	s := TrainerCapsOf(m.B).Half
	if s == nil {
		return false, nil
	}
	made := false
	// With adapters, they get copies, and of the base the matrices Freeze
	// left fp32 that a product reads: a tied LM head's (the input
	// embedding; untied, only lookups read it), or every matrix of a base
	// not frozen.
	named := m.P.Named(m.Cfg)
	if m.A != nil {
		if m.frozen && m.P.Tied {
			named = named[:1] // model.embed_tokens.weight
		} else if m.frozen {
			named = nil
		}
		named = append(named, m.A.Named(m.Cfg)...)
	}
	for _, np := range named {
		if len(np.Shape) < 2 {
			continue
		}
		if s.IsHalfOnly(*np.Ptr) {
			made = true
			continue
		}
		ok, err := s.Shadow(*np.Ptr)
		if err != nil {
			return false, fmt.Errorf("bf16 copy of %s: %w", np.Name, err)
		}
		made = made || ok
	}
	return made, nil
}

// HeadChunkElems bounds the logits materialised at once: rows per LM-head
// chunk = HeadChunkElems / V (at least 1). Each chunk reads the whole head
// matrix (V × C: 1.2 GB in fp32 for Qwen3's 151,936 × 2048), so chunks
// must be tall for the product to be bound by arithmetic, not by that
// read: 883 rows at Qwen3's vocabulary (2·883·C FLOPs per head element
// read, about the H100's ratio of bf16 FLOPs to bytes), for 512 MiB of
// fp32 logits (the backward holds a second chunk, of their gradient).
// docs/gpu.md has what shorter chunks cost a 1.7B training step.
const HeadChunkElems = 128 << 20

func (m *Model) headChunkRows() int { return headChunkRowsOf(m.Cfg) }

// headChunkRowsOf is the LM head's rows per chunk at c's vocabulary.
func headChunkRowsOf(c *Config) int { return max(1, headChunkElems/c.VocabSize) }

func (m *Model) attnScale() float32 { return float32(1 / math.Sqrt(float64(m.Cfg.HeadDim))) }

// layerActs are one layer's activations. A training pass keeps one set per
// layer for the backward; inference reuses a single set.
type layerActs struct {
	x     *Tensor // (N, C) layer input (a view of the previous layer's output)
	xn1   *Tensor // (N, C) input_layernorm(x)
	rstd1 *Tensor // (N)
	// qkv is the fused projection xn1·Wqkvᵀ: per token, the query heads
	// before q_norm, the key heads before k_norm, the value heads. SplitQKV
	// reads it once and writes the contiguous tensors attention reads.
	qkv   *Tensor // (N, (H+2G)·D)
	v     *Tensor // (N, G, D)
	qn    *Tensor // (N, H, D) after q_norm and RoPE
	kn    *Tensor // (N, G, D) after k_norm and RoPE
	rstdQ *Tensor // (N·H)
	rstdK *Tensor // (N·G)
	att   *Tensor // (N, H, D) attention output before o_proj
	lse   *Tensor // (N, H) attention log-sum-exp
	xMid  *Tensor // (N, C) x + attention branch
	xn2   *Tensor // (N, C) post_attention_layernorm(xMid)
	rstd2 *Tensor // (N)
	// The MLP's activations are kept transposed, one row per channel:
	// Wgu·xn2ᵀ puts gateᵀ over upᵀ, so one product computes both and each
	// is a row view.
	gu *Tensor // (2F, N) gateᵀ over upᵀ
	h  *Tensor // (F, N) (silu(gate) ⊙ up)ᵀ
	// lora holds the adapters' low-rank inputs (lora_pass.go); nil
	// without adapters.
	lora *loraActs
}

// gate and up are the row views of gu.
func (a *layerActs) gate() *Tensor { return a.gu.Rows(0, a.h.Shape[0]) }
func (a *layerActs) up() *Tensor   { return a.gu.Rows(a.h.Shape[0], 2*a.h.Shape[0]) }

// tensors lists the activations a layer owns: all but x, which is the
// previous layer's output (or the embedding) and released with it.
func (a *layerActs) tensors() []*Tensor {
	ts := []*Tensor{a.xn1, a.rstd1, a.qkv, a.v, a.qn, a.kn, a.rstdQ, a.rstdK, a.att, a.lse,
		a.xMid, a.xn2, a.rstd2, a.gu, a.h}
	if a.lora != nil {
		ts = append(ts, a.lora.tensors()...)
	}
	return ts
}

// newLayerActs allocates one layer's activations for n tokens. Every
// activation is overwritten by the op that produces it. Where the backend
// keeps activations in bf16 (HalfPrecision.ActivationHalf), the inputs of products
// (xn1, xn2, the MLP's h), the products' outputs (the fused q/k/v, gate
// and up) and, for a training pass (train), attention's inputs and output
// (qn, kn, v, att) are bf16: half the bytes saved for the backward and
// read by it. Statistics (rstd, lse) and the residual stream (xMid and the
// layer's input and output) stay fp32. Inference keeps attention's
// tensors fp32: they are not saved, and the cached-decoding kernels read
// fp32 queries; so does a training pass in exact mode (ExactKV), whose
// attention must see the decode step's fp32 queries.
func (m *Model) newLayerActs(n int, train bool) *layerActs {
	c, b := m.Cfg, m.B
	C, F, H, G, D := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	s := func(shape ...int) *Tensor { return Scratch(b, shape...) }
	half, att := s, s
	if as := TrainerCapsOf(b).Half; as != nil {
		half = as.ActivationHalf
		if train && !m.ExactKV {
			att = as.ActivationHalf
		}
	}
	return &layerActs{
		xn1: half(n, C), rstd1: s(n),
		qkv: half(n, (H+2*G)*D), v: att(n, G, D),
		qn: att(n, H, D), kn: att(n, G, D), rstdQ: s(n * H), rstdK: s(n * G),
		att: att(n, H, D), lse: s(n, H),
		xMid: s(n, C), xn2: half(n, C), rstd2: s(n),
		gu: half(2*F, n), h: half(F, n),
		// Inference owns its adapters' scratch; a training pass shares
		// one among its layers (Forward).
		lora: m.newLoRAActs(n, !train),
	}
}

// kvPlan says where attention reads keys and values. Without a cache a
// packed batch attends to its own fresh k, v; with one, the fresh k, v are
// first written to cache rows and attention reads the cache.
type kvPlan struct {
	cacheK, cacheV []*Tensor // per layer (S, G, D); nil without a cache
	rows           []int32   // (N) cache row of each packed token
	segs           []Segment
}

// layerForward runs decoder layer l on x (N, C), writing the result to out
// (which may alias x) and keeping intermediates in a.
func (m *Model) layerForward(l int, a *layerActs, x, out *Tensor, pos []int32, kv kvPlan) {
	b, c, w := m.B, m.Cfg, &m.P.Layers[l]
	n := x.Shape[0]
	H, D := c.NumAttentionHeads, c.HeadDim
	eps := float32(c.RMSNormEps)
	a.x = x

	b.RMSNorm(a.xn1, a.rstd1, x, w.InputNorm, eps)
	b.MatMul(a.qkv, a.xn1, w.QKV, false, true, false) // (N, (H+2G)·D) = xn1·Wqkvᵀ
	if a.lora != nil {
		m.loraQKV(l, a)
	}
	b.SplitQKV(a.qn, a.kn, a.v, a.rstdQ, a.rstdK, a.qkv, w.QNorm, w.KNorm, pos, c.RopeTheta, eps)
	if kv.cacheK == nil {
		m.freshAttention(a, kv.segs)
	} else {
		ck, cv := kv.cacheK[l], kv.cacheV[l]
		b.ScatterRows(ck, a.kn, kv.rows, false)
		b.ScatterRows(cv, a.v, kv.rows, false)
		b.Attention(a.att, a.lse, a.qn, ck, cv, kv.segs, m.attnScale())
	}
	// xMid = x + att·Woᵀ (+ the o adapter's term), xn2 = rmsnorm(xMid):
	// fused where the backend can (fused.go).
	br, acc := m.residualBranch(a.xMid, x)
	b.MatMul(br, a.att.View(n, H*D), w.O, false, true, acc)
	if a.lora != nil {
		m.loraO(l, a, a.att.View(n, H*D), br)
	}
	m.residualNorm(a.xMid, a.xn2, a.rstd2, x, br, w.PostNorm, eps)
	b.MatMul(a.gu, w.GateUp, a.xn2, false, true, false) // (2F, N) = Wgu·xn2ᵀ
	if a.lora != nil {
		m.loraGateUp(l, a)
	}
	b.SwiGLU(a.h, a.gate(), a.up())
	b.Copy(out, a.xMid)
	b.MatMul(out, a.h, w.Down, true, true, true) // out += hᵀ·Wdᵀ
	if a.lora != nil {
		m.loraDown(l, a, out)
	}
}

// Sequence is one training row: the tokens (prompt and response) and the
// index of the first token whose log-probability is wanted; log-probs are
// returned for Tokens[Start:], each conditioned on everything before it.
type Sequence struct {
	Tokens []int32
	Start  int
}

// Pass holds a training forward's results and what its backward needs.
type Pass struct {
	LogProbs [][]float32 // per sequence, len(Tokens)−Start: log π(token_t | tokens_<t)
	Entropy  [][]float32 // per sequence, the entropy of the same predictive distributions
	// DLogp (ForwardLoss only) is, per sequence, the ∂J/∂log π the fused
	// head used, as the device computed it: the trainer checks it against
	// its own.
	DLogp [][]float32

	ids     []int32 // (N)
	pos     []int32 // (N)
	segs    []Segment
	rows    []int32 // (M) packed row predicting each target
	targets []int32 // (M)
	layers  []*layerActs
	// recompute, when not nil, is the scratch set the backward refills
	// from each layer's saved input (Model.Recompute).
	recompute *layerActs
	loraTmp   *Tensor  // the adapters' term scratch (loraActs.tmp); nil without
	m         *Model   // the model that made the pass, for Release
	xL        *Tensor  // (N, C) last layer output
	xf        *Tensor  // (N, C) final-normed
	rstdF     *Tensor  // (N)
	headLSE   *Tensor  // (M)
	headLast  *Tensor  // the forward's last LM-head chunk of logits, for the backward (head.go)
	dxf       *Tensor  // (N, C) the fused head's gradient of xf (ForwardLoss), for the backward
	spans     [][2]int // per sequence, its [from, to) range of the M rows
}

// pack lays sequences end to end and lists the rows whose next token is a target.
func (m *Model) pack(seqs []Sequence) (*Pass, error) {
	p := &Pass{}
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("sequence %d is empty", i)
		}
		if s.Start < 1 || s.Start > len(s.Tokens) {
			return nil, fmt.Errorf("sequence %d: start %d must be in [1, %d]", i, s.Start, len(s.Tokens))
		}
		q0 := len(p.ids)
		p.segs = append(p.segs, Segment{Q0: q0, QLen: len(s.Tokens), K0: q0, KLen: len(s.Tokens)})
		from := len(p.rows)
		for t, id := range s.Tokens {
			if id < 0 || int(id) >= m.Cfg.VocabSize {
				return nil, fmt.Errorf("sequence %d: token %d at position %d outside the vocabulary [0, %d)", i, id, t, m.Cfg.VocabSize)
			}
			p.ids = append(p.ids, id)
			p.pos = append(p.pos, int32(t))
			if t >= s.Start {
				p.rows = append(p.rows, int32(q0+t-1))
				p.targets = append(p.targets, id)
			}
		}
		p.spans = append(p.spans, [2]int{from, len(p.rows)})
	}
	return p, nil
}

// Forward runs a training forward over packed sequences and returns the
// per-token log-probabilities (and entropies) of Tokens[Start:]. The pass
// holds the activations the backward needs: hand it to Backward, which
// releases them, or call its Release when only the log-probs are wanted.
func (m *Model) Forward(seqs []Sequence) (*Pass, error) {
	return m.forward(seqs, nil, nil)
}

// ForwardLoss is Forward for a training pass whose loss is a TokenLoss
// (tokenloss.go): the LM head's backward runs in the forward, chunk by
// chunk on the logits it has just made, accumulating the head's gradient
// into grads (those Backward will get). Hand the pass to Backward with nil
// log-prob gradients.
func (m *Model) ForwardLoss(seqs []Sequence, loss *TokenLoss, grads *Params) (*Pass, error) {
	if loss == nil || grads == nil {
		return nil, fmt.Errorf("forward: the fused head needs a token loss and the gradients")
	}
	if (m.A != nil) != (grads.LoRA != nil) {
		return nil, fmt.Errorf("forward: the model has adapters %v but the gradients are an adapter set %v (LoRA trains the adapters alone)", m.A != nil, grads.LoRA != nil)
	}
	return m.forward(seqs, loss, grads)
}

// forward is Forward, with the fused head when loss is not nil.
func (m *Model) forward(seqs []Sequence, loss *TokenLoss, grads *Params) (*Pass, error) {
	return m.forwardTap(seqs, loss, grads, nil)
}

// forwardTap is forward, copying the head's logits at tap's picks (nil:
// none; ForwardVocab) as the unfused head computes them.
func (m *Model) forwardTap(seqs []Sequence, loss *TokenLoss, grads *Params, tap *vocabTap) (*Pass, error) {
	p, err := m.pack(seqs)
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	if loss != nil {
		if err := loss.Check(len(p.rows)); err != nil {
			return nil, fmt.Errorf("forward: %w", err)
		}
	}
	p.m = m
	b, c := m.B, m.Cfg
	n, C := len(p.ids), c.HiddenSize
	x := Scratch(b, n, C)
	b.Embedding(x, m.P.Embed, p.ids)
	kv := kvPlan{segs: p.segs}
	var shared *layerActs // with Recompute, one set serves every layer
	if m.Recompute {
		shared = m.newLayerActs(n, true)
	}
	p.loraTmp = m.newLoRATmp(n) // the adapters' term scratch, shared by the layers
	for l := range m.P.Layers {
		a := shared
		if a == nil {
			a = m.newLayerActs(n, true)
		}
		if a.lora != nil {
			a.lora.tmp = p.loraTmp
		}
		out := Scratch(b, n, C)
		m.layerForward(l, a, x, out, p.pos, kv)
		if m.Recompute {
			p.layers = append(p.layers, &layerActs{x: x})
		} else {
			p.layers = append(p.layers, a)
		}
		x = out
	}
	p.recompute = shared
	p.xL, p.xf, p.rstdF = x, Scratch(b, n, C), Scratch(b, n)
	b.RMSNorm(p.xf, p.rstdF, x, m.P.FinalNorm, float32(c.RMSNormEps))

	// The log-probs, entropies and (fused) their gradients share one
	// buffer, so the host waits once for all three.
	M := len(p.rows)
	out := Scratch(b, 3*max(M, 1))
	vec := func(i int) *Tensor { return &Tensor{Shape: []int{M}, Off: out.Off + i*max(M, 1), Store: out.Store} }
	logp, ent, dl := vec(0), vec(1), vec(2)
	p.headLSE = Scratch(b, M)
	if loss == nil {
		m.headChunks(p, headForward, func(lo, hi int, logits, _ *Tensor) {
			b.LogSoftmaxGather(logp.Rows(lo, hi), p.headLSE.Rows(lo, hi), ent.Rows(lo, hi), logits, p.targets[lo:hi])
			tap.take(b, c.VocabSize, lo, hi, logits)
		})
	} else {
		m.fusedHead(p, loss, grads, logp, ent, dl)
	}
	host := make([]float32, 3*max(M, 1))
	if M > 0 {
		b.Download(out, host)
	}
	Release(b, out)
	if err := m.checkErr("forward"); err != nil {
		p.Release()
		return nil, err
	}
	hostLP, hostEnt, hostDL := host[:M], host[max(M, 1):max(M, 1)+M], host[2*max(M, 1):2*max(M, 1)+M]
	for _, sp := range p.spans {
		p.LogProbs = append(p.LogProbs, hostLP[sp[0]:sp[1]])
		p.Entropy = append(p.Entropy, hostEnt[sp[0]:sp[1]])
		if loss != nil {
			p.DLogp = append(p.DLogp, hostDL[sp[0]:sp[1]])
		}
	}
	return p, nil
}

// Release gives back every tensor the pass still holds (Backward does it
// itself; a forward-only pass is released by its caller). It may be called
// more than once.
func (p *Pass) Release() {
	if p.m == nil {
		return
	}
	b := p.m.B
	for l := range p.layers {
		p.releaseLayer(l)
	}
	if p.recompute != nil {
		Release(b, p.recompute.tensors()...)
	}
	Release(b, p.xL, p.xf, p.rstdF, p.headLSE, p.headLast, p.loraTmp, p.dxf)
	p.layers, p.recompute, p.xL, p.xf, p.rstdF, p.headLSE, p.headLast, p.loraTmp, p.dxf = nil, nil, nil, nil, nil, nil, nil, nil, nil
}

// releaseLayer gives back layer l's saved activations and its input (the
// previous layer's output, which nothing needs once layer l's backward has
// run: layer l−1's backward reads its own saved tensors).
func (p *Pass) releaseLayer(l int) {
	a := p.layers[l]
	if a == nil {
		return
	}
	if a != p.recompute && a.xn1 != nil {
		Release(p.m.B, a.tensors()...)
	}
	Release(p.m.B, a.x)
	p.layers[l] = nil
}
