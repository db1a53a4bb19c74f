package model

// The backward of J = Σ_t w_t · log π(token_t) with respect to every
// parameter. GRPO's trainer computes w_t (the derivative of its clipped
// surrogate with respect to each token's log-probability) and calls Backward;
// the model needs nothing else from the loss. Gradients accumulate (+=) into
// grads so micro-batches add up; activation gradients are overwritten.

import "fmt"

// Backward accumulates dJ/dθ into grads, where dLogp[i][t] = ∂J/∂LogProbs[i][t].
// It consumes the pass: each layer's activations are released as soon as
// the layer's backward has run, and the rest at the end.
func (m *Model) Backward(p *Pass, dLogp [][]float32, grads *Params) error {
	return m.BackwardFlush(p, dLogp, grads, nil)
}

// BackwardFlush is Backward that calls flush (when not nil) with each
// group of parameters whose gradients are complete, as soon as they are
// (GradParts: the head, then each layer from the last, then the
// embedding); ZeRO-2 sends them to their ranks there (optim/zero2.go).
func (m *Model) BackwardFlush(p *Pass, dLogp [][]float32, grads *Params, flush GradFlush) error {
	if p.m == nil || (len(p.layers) == 0 && len(m.P.Layers) > 0) {
		return fmt.Errorf("backward: the pass was already released (each forward serves one backward)")
	}
	defer p.Release()
	defer PauseExact(m.B)() // only the forward is on the log-prob's path
	if (m.A != nil) != (grads.LoRA != nil) {
		return fmt.Errorf("backward: the model has adapters %v but the gradients are an adapter set %v (LoRA trains the adapters alone)", m.A != nil, grads.LoRA != nil)
	}
	b, c := m.B, m.Cfg
	n, C := len(p.ids), c.HiddenSize
	lora := grads.LoRA != nil
	fg := frozenGrads{}
	if lora {
		fg = frozenGrads{C: b.New(C), D: b.New(c.HeadDim)}
		defer Release(b, fg.C, fg.D)
	}
	finalNorm := grads.FinalNorm
	if lora {
		finalNorm = fg.C
	}
	dxf := p.dxf // the fused head's gradient of the final-normed rows (ForwardLoss)
	p.dxf = nil
	switch {
	case dxf != nil && dLogp != nil:
		Release(b, dxf)
		return fmt.Errorf("backward: the pass ran the LM head's backward in its forward (ForwardLoss): pass nil log-prob gradients")
	case dxf == nil:
		var err error
		if dxf, err = m.headBackward(p, dLogp, grads); err != nil {
			return err
		}
	}

	dx := Scratch(b, n, C)
	m.shadowGrad(dx)
	b.RMSNormBackward(dx, finalNorm, dxf, p.xL, m.P.FinalNorm, p.rstdF)
	Release(b, dxf, p.xL, p.xf, p.rstdF, p.headLSE)
	p.xL, p.xf, p.rstdF, p.headLSE = nil, nil, nil, nil
	var parts GradParts
	send := func(named []int) error {
		if flush == nil {
			return nil
		}
		if err := m.checkErr("backward"); err != nil {
			return err
		}
		return flush(named)
	}
	if flush != nil {
		parts = PartsOfNamed(grads.Named(c), c.NumHiddenLayers)
	}
	s := m.newLayerGrads(n)
	var scratchOut *Tensor
	if p.recompute != nil {
		scratchOut = Scratch(b, n, C)
	}
	defer func() { Release(b, append(s.tensors(), dx, scratchOut)...) }()
	if err := send(parts.Head); err != nil {
		return fmt.Errorf("backward: gradients of the head: %w", err)
	}
	for l := len(p.layers) - 1; l >= 0; l-- {
		a := p.layers[l]
		if p.recompute != nil {
			// Refill the layer's activations from its saved input; the
			// output goes to scratch so the next layer's input survives.
			a = p.recompute
			m.layerForward(l, a, p.layers[l].x, scratchOut, p.pos, kvPlan{segs: p.segs})
		}
		if lora {
			m.layerBackward(l, a, s, dx, p, fg.layer(), &grads.Adapters[l])
		} else {
			m.layerBackward(l, a, s, dx, p, &grads.Layers[l], nil)
		}
		p.releaseLayer(l)
		if flush != nil {
			if err := send(parts.Layers[l]); err != nil {
				return fmt.Errorf("backward: gradients of layer %d: %w", l, err)
			}
		}
	}
	if !lora {
		b.EmbeddingBackward(grads.Embed, dx, p.ids)
	}
	if err := send(parts.Embed); err != nil {
		return fmt.Errorf("backward: gradients of the embedding: %w", err)
	}
	return m.checkErr("backward")
}

// headBackward is the LM head's backward from the loss's ∂J/∂log π:
// chunk by chunk (the last chunk's logits kept from the forward, the others
// recomputed), dlogits = dlogp·(onehot − softmax), dWlm += dlogitsᵀ·h,
// dxf[rows] += dlogits·Wlm. It returns dxf (n, C). With adapters the head
// is frozen and its gradient skipped.
func (m *Model) headBackward(p *Pass, dLogp [][]float32, grads *Params) (*Tensor, error) {
	if len(dLogp) != len(p.spans) {
		return nil, fmt.Errorf("backward: %d gradient rows for %d sequences", len(dLogp), len(p.spans))
	}
	M := len(p.rows)
	host := make([]float32, 0, M)
	for i, sp := range p.spans {
		if len(dLogp[i]) != sp[1]-sp[0] {
			return nil, fmt.Errorf("backward: sequence %d has %d log-probs but %d gradients", i, sp[1]-sp[0], len(dLogp[i]))
		}
		host = append(host, dLogp[i]...)
	}
	b, c := m.B, m.Cfg
	n, C := len(p.ids), c.HiddenSize
	dl := Scratch(b, M)
	b.Upload(dl, host)
	dxf := b.New(n, C)
	chunk := min(m.headChunkRows(), max(M, 1))
	dlogits := m.headGradScratch(chunk)
	dh := Scratch(b, chunk, C)
	hc := Scratch(b, chunk, C)
	m.headChunks(p, headBackward, func(lo, hi int, logits, h *Tensor) {
		if h == nil { // the kept chunk: its rows were not gathered now
			h = hc.Rows(0, hi-lo)
			b.GatherRows(h, p.xf, p.rows[lo:hi])
		}
		m.headChunkBackward(p, lo, hi, logits, h, dl.Rows(lo, hi), dlogits, dh, dxf, grads)
	})
	Release(b, dl, dlogits, dh, hc)
	return dxf, nil
}

// headChunkBackward is the head's backward on target rows lo..hi whose
// logits and final-normed rows h are given, from their dl = ∂J/∂log π:
// dlogits, dWlm += dlogitsᵀ·h (unless the head is frozen), dxf[rows] +=
// dlogits·Wlm. dlogits and dh are chunk-sized scratch.
func (m *Model) headChunkBackward(p *Pass, lo, hi int, logits, h, dl, dlogits, dh, dxf *Tensor, grads *Params) {
	dlc := dlogits.Rows(0, hi-lo)
	m.headChunkInputGrad(p, lo, hi, logits, dl, dlc, dh, dxf)
	if grads.LoRA == nil {
		m.B.MatMul(grads.LMHead, dlc, h, true, false, true)
	}
}

// headChunkInputGrad writes the logits' gradient of target rows lo..hi
// into dlc (hi−lo, V) and adds their part of dxf: dxf[rows] += dlc·Wlm.
func (m *Model) headChunkInputGrad(p *Pass, lo, hi int, logits, dl, dlc, dh, dxf *Tensor) {
	b := m.B
	dhc := dh.Rows(0, hi-lo)
	b.LogSoftmaxGatherBackward(dlc, dl, logits, p.headLSE.Rows(lo, hi), p.targets[lo:hi])
	b.MatMul(dhc, dlc, m.P.LMHead, false, false, false)
	b.ScatterRows(dxf, dhc, p.rows[lo:hi], true)
}

// frozenGrads are where a LoRA backward's norm gradients land (the ops
// accumulate them as they go; nothing reads them): C and D floats.
type frozenGrads struct{ C, D *Tensor }

// layer is the gradient layer of a frozen model: its norms' sinks, and no
// weight matrices (layerBackward skips theirs).
func (f frozenGrads) layer() *Layer {
	return &Layer{InputNorm: f.C, PostNorm: f.C, QNorm: f.D, KNorm: f.D}
}

// layerGrads are scratch activation gradients reused across layers.
type layerGrads struct {
	dxMid, dxn *Tensor // (N, C)
	dh         *Tensor // (F, N) transposed, as the MLP's activations
	dgu        *Tensor // (2F, N) dgateᵀ over dupᵀ (bf16 where activations are)
	datt, dqn  *Tensor // (N, H, D)
	dkn, dv    *Tensor // (N, G, D)
	dqkv       *Tensor // (N, (H+2G)·D) the fused projection's gradient (bf16 where activations are)
	lora       *loraGrads
}

func (s *layerGrads) tensors() []*Tensor {
	ts := []*Tensor{s.dxMid, s.dxn, s.dh, s.dgu, s.datt, s.dqn, s.dkn, s.dv, s.dqkv}
	if s.lora != nil {
		ts = append(ts, s.lora.tensors()...)
	}
	return ts
}

func (m *Model) newLayerGrads(n int) *layerGrads {
	c, b := m.Cfg, m.B
	C, F, H, G, D := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	// Each is overwritten by the first op that writes it in layerBackward.
	// The gradients of the two products whose activations are bf16 (gate
	// and up, q/k/v: dgu and dqkv) are read by products alone, which round
	// them to bf16 anyway: where the backend keeps bf16 activations
	// (HalfPrecision.ActivationHalf) they are written in bf16, rounded once by the op
	// that computes them, instead of in fp32 and rounded by each product.
	s := func(shape ...int) *Tensor { return Scratch(b, shape...) }
	half := s
	if hp := TrainerCapsOf(b).Half; hp != nil {
		half = hp.ActivationHalf
	}
	dxMid := s(n, C)
	m.shadowGrad(dxMid)
	return &layerGrads{
		dxMid: dxMid, dxn: s(n, C),
		dh: s(F, n), dgu: half(2*F, n),
		datt: s(n, H, D), dqn: s(n, H, D),
		dkn: s(n, G, D), dv: s(n, G, D), dqkv: half(n, (H+2*G)*D),
		lora: m.newLoRAGrads(n),
	}
}

// shadowGrad gives a residual gradient (dx, dxMid) a bf16 copy where the
// backend keeps them (HalfPrecision.Shadow, under bf16 products): products read it
// (each of dx and dxMid feeds a weight gradient and an input gradient),
// and the fused norm backward that writes the gradient writes the copy in
// the same pass, where a product would otherwise round it to bf16 in a
// pass of its own (the weight gradient's: its other operand is a bf16
// activation). The fp32 gradient stays what the residual adds read.
func (m *Model) shadowGrad(t *Tensor) {
	if sh := TrainerCapsOf(m.B).Half; sh != nil {
		if _, err := sh.Shadow(t); err != nil {
			return // the backend recorded it; Err reports it at the end
		}
	}
}

// layerBackward takes dx = ∂J/∂(layer output) and overwrites it with
// ∂J/∂(layer input), accumulating parameter gradients into g, or, for a
// model with adapters, into ga (g then holds only the norms' sinks and the
// weight matrices' gradients are skipped).
func (m *Model) layerBackward(l int, a *layerActs, s *layerGrads, dx *Tensor, p *Pass, g *Layer, ga *LayerLoRA) {
	b, c, w := m.B, m.Cfg, &m.P.Layers[l]
	n := dx.Shape[0]
	H, D := c.NumAttentionHeads, c.HeadDim
	weights := ga == nil

	// out = xMid + h·Wdᵀ with h = silu(xn2·Wgᵀ) ⊙ xn2·Wuᵀ, xn2 = rmsnorm(xMid);
	// h, gate, up and their gradients are held transposed (layerActs).
	F := a.h.Shape[0]
	if weights {
		b.MatMul(g.Down, dx, a.h, true, true, true) // dWd += dxᵀ·hᵀᵀ
	}
	b.MatMul(s.dh, w.Down, dx, true, true, false) // dhᵀ = Wdᵀ·dxᵀ
	if ga != nil {
		m.loraDownBackward(l, a, s, dx, ga)
	}
	b.SwiGLUBackward(s.dgu.Rows(0, F), s.dgu.Rows(F, 2*F), s.dh, a.gate(), a.up())
	if weights {
		b.MatMul(g.GateUp, s.dgu, a.xn2, false, false, true) // dWgu += dguᵀ·xn2
	}
	b.MatMul(s.dxn, s.dgu, w.GateUp, true, false, false) // dxn = dgu·Wgu
	if ga != nil {
		m.loraGateUpBackward(l, a, s, ga)
	}
	// dxMid = the norm's input gradient + dx (the residual), fused where the backend can.
	RMSNormBackwardAdd(b, s.dxMid, g.PostNorm, s.dxn, a.xMid, w.PostNorm, a.rstd2, dx)

	// xMid = x + att·Woᵀ.
	if weights {
		b.MatMul(g.O, s.dxMid, a.att.View(n, H*D), true, false, true)
	}
	b.MatMul(s.datt.View(n, H*D), s.dxMid, w.O, false, false, false)
	if ga != nil {
		m.loraOBackward(l, a, s, a.att.View(n, H*D), s.datt.View(n, H*D), ga)
	}
	b.AttentionBackward(s.dqn, s.dkn, s.dv, s.datt, a.qn, a.kn, a.v, a.att, a.lse, p.segs, m.attnScale())
	// qkv = xn1·Wqkvᵀ, split into qn, kn (normed, rotated) and v.
	b.SplitQKVBackward(s.dqkv, g.QNorm, g.KNorm, s.dqn, s.dkn, s.dv, a.qkv, w.QNorm, w.KNorm, a.rstdQ, a.rstdK, p.pos, c.RopeTheta)
	if weights {
		b.MatMul(g.QKV, s.dqkv, a.xn1, true, false, true) // dWqkv += dqkvᵀ·xn1
	}
	b.MatMul(s.dxn, s.dqkv, w.QKV, false, false, false) // dxn = dqkv·Wqkv
	if ga != nil {
		m.loraQKVBackward(l, a, s, ga)
	}
	// dx (the output's gradient) has been read for the last time: the
	// input's gradient overwrites it, the residual dxMid added in.
	RMSNormBackwardAdd(b, dx, g.InputNorm, s.dxn, a.x, w.InputNorm, a.rstd1, s.dxMid)
}

// PauseExact turns a batch-invariant backend's exact mode off and returns
// what turns it back on (a no-op where it was off). Exact mode
// (precision.exact_logprobs) needs only the forward that gives π_θ and the
// sampler's decode to agree; the backward, and the reference policy's
// forward, run the backend's faster shape-tuned kernels.
func PauseExact(b Backend) (resume func()) {
	bi, ok := b.(BatchInvariant)
	if !ok || !bi.IsBatchInvariant() {
		return func() {}
	}
	bi.SetBatchInvariant(false)
	return func() { bi.SetBatchInvariant(true) }
}
