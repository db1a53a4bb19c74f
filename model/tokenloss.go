package model

// The fused LM head (docs/algorithm.md §5.15). GRPO's loss is a sum over
// target tokens of a function of each token's own log-probability and of
// constants fixed before the training forward (the old and reference
// log-probs, the advantage, the importance weight, the aggregation's
// divisor), so ∂J/∂log π can be computed chunk by chunk as soon as the head
// has the chunk's logits. The forward then runs the head's backward on the
// same logits: no chunk is recomputed, no logits are kept, and the
// backward starts at the final norm. On a GPU that saves the recomputation's
// 2·M·V·C FLOPs (8.9 TFLOP at Qwen3-1.7B, 8 × 2k) and a write of the logits.

import "github.com/gdrotrain/gdrotrain/grpo"

// TokenLoss is the loss the fused head takes (grpo.TokenLoss): GRPO's
// math lives in grpo; this file is the model's side of it, where the
// derivatives are computed (on the device or through the host) and the
// head's backward runs.
type TokenLoss = grpo.TokenLoss

// tokenLossGrad computes the derivatives of target rows lo..hi into dl: by
// the backend when it can (TokenLossGrader), through the host otherwise
// (the reference, whose downloads are copies).
func (m *Model) tokenLossGrad(dl, logp *Tensor, l *TokenLoss, lo, hi int) {
	if g := TrainerCapsOf(m.B).TokenLoss; g != nil {
		g.TokenLossGrad(dl, logp, l, lo, hi)
		return
	}
	lp := make([]float32, hi-lo)
	m.B.Download(logp, lp)
	for i := range lp {
		lp[i] = l.Grad(lo+i, lp[i])
	}
	m.B.Upload(dl, lp)
}

// headGroupRows is how many target rows the fused head's weight-gradient
// product takes at once (whole chunks, at least one). Each such product
// reads and writes the whole fp32 head gradient (V × C: 8·V·C bytes, 2.5
// GB at Qwen3-1.7B), which a product over R rows pays for with 2·R·V·C
// FLOPs: R ≥ 4·F/B rows (≈ 1,100 on an H100: 742 TFLOP/s of bf16 products
// over 2.68 TB/s) to be bound by arithmetic. One chunk (883 rows at
// Qwen3's vocabulary) is below that, so the chunks' logit gradients are
// kept (bf16 under bf16 products) for ≈ 2,048 rows (3 chunks, 768 MiB more
// than one) and the product runs once per group. Tests shrink it.
var headGroupRows = 2048

// fusedHead is the forward's LM head with its backward (ForwardLoss): per
// chunk of target rows, the log-probs, entropies and log-sum-exps, then
// dl = ∂J/∂log π, then the head's backward on the same logits (as
// headBackward does it), the weight gradient's product once per group of
// chunks (headGroupRows). The pass keeps dxf for Backward, which starts at
// the final norm; the final-normed rows and the log-sum-exps are released,
// nothing else needing them.
func (m *Model) fusedHead(p *Pass, l *TokenLoss, grads *Params, logp, ent, dl *Tensor) {
	b, C, M := m.B, m.Cfg.HiddenSize, len(p.rows)
	// Chunks per weight-gradient product (with adapters the head is frozen: none).
	chunk, rows := HeadRows(m.Cfg, M, true, grads.LoRA == nil)
	group := rows / chunk
	p.dxf = b.New(len(p.ids), C)
	dlogits := m.headGradScratch(group * chunk)
	dh := Scratch(b, chunk, C)
	var hg *Tensor
	if grads.LoRA == nil {
		hg = Scratch(b, group*chunk, C)
	}
	glo := 0 // the first row of the group being filled
	flush := func(hi int) {
		if n := hi - glo; hg != nil && n > 0 {
			b.GatherRows(hg.Rows(0, n), p.xf, p.rows[glo:hi])
			b.MatMul(grads.LMHead, dlogits.Rows(0, n), hg.Rows(0, n), true, false, true)
		}
		glo = hi
	}
	m.headChunks(p, headFused, func(lo, hi int, logits, _ *Tensor) {
		lp := logp.Rows(lo, hi)
		b.LogSoftmaxGather(lp, p.headLSE.Rows(lo, hi), ent.Rows(lo, hi), logits, p.targets[lo:hi])
		m.tokenLossGrad(dl.Rows(lo, hi), lp, l, lo, hi)
		m.headChunkInputGrad(p, lo, hi, logits, dl.Rows(lo, hi), dlogits.Rows(lo-glo, hi-glo), dh, p.dxf)
		if hi-glo >= group*chunk || hi == M {
			flush(hi)
		}
	})
	Release(b, dlogits, dh, hg, p.xf, p.headLSE)
	p.xf, p.headLSE = nil, nil
}

// HeadRows returns how many target rows of logits and of logit gradients
// the LM head holds at once in a training pass of m target rows: one chunk
// of each, or with the fused head and a trained (not frozen) head weight,
// a group of chunks of gradients (headGroupRows). The memory plan uses it.
func HeadRows(c *Config, m int, fused, trainedHead bool) (logits, grads int) {
	chunk := min(headChunkRowsOf(c), max(m, 1))
	if !fused || !trainedHead {
		return chunk, chunk
	}
	group := max(1, min((headGroupRows+chunk-1)/chunk, (m+chunk-1)/chunk))
	return chunk, group * chunk
}
