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

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/internal/grpo"
)

// TokenLoss is a loss whose derivative with respect to each target token's
// log-probability depends on that log-probability and on per-token
// constants alone: GRPO's clipped surrogate with the k3 KL, as the trainer
// computes it (grpo.Surrogate.Token, .Grad). The slices hold one entry per
// target row, in the pass's order (the sequences' Tokens[Start:] end to
// end).
type TokenLoss struct {
	grpo.Surrogate
	Old, Ref []float32 // the old and reference policies' log-probs
	IS       []float32 // the rollout correction's weights; nil: all 1
	Adv      []float64 // the (GDRO-weighted) advantage
	Denom    []float64 // the aggregation's divisor; 0 drops the token (w = 0)
	GA       float64   // the gradient-accumulation count
}

// Check validates the loss against m target rows.
func (l *TokenLoss) Check(m int) error {
	switch {
	case len(l.Old) != m || len(l.Ref) != m || len(l.Adv) != m || len(l.Denom) != m:
		return fmt.Errorf("token loss: %d target tokens but %d old, %d reference log-probs, %d advantages, %d divisors",
			m, len(l.Old), len(l.Ref), len(l.Adv), len(l.Denom))
	case l.IS != nil && len(l.IS) != m:
		return fmt.Errorf("token loss: %d target tokens but %d importance weights", m, len(l.IS))
	case !(l.GA >= 1):
		return fmt.Errorf("token loss: the accumulation count must be ≥ 1, got %v", l.GA)
	}
	return nil
}

// Grad is target row k's ∂J/∂log π at log-prob lp, as the trainer's
// MicroBatch computes it (the host's reference for the CUDA kernel).
func (l *TokenLoss) Grad(k int, lp float32) float32 {
	if l.Denom[k] == 0 {
		return 0
	}
	is := 1.0
	if l.IS != nil {
		is = float64(l.IS[k])
	}
	t := l.Token(float64(lp), float64(l.Old[k]), float64(l.Ref[k]), l.Adv[k], l.Adv[k])
	return l.Surrogate.Grad(t, is, l.Denom[k], l.GA)
}

// TokenLossGrader is implemented by backends that compute a TokenLoss's
// derivatives where the log-probs are (the CUDA backend, in a kernel):
// dl[i] = ∂J/∂log π of target row lo+i at logp[i], for i < hi−lo.
type TokenLossGrader interface {
	TokenLossGrad(dl, logp *Tensor, l *TokenLoss, lo, hi int)
}

// tokenLossGrad computes the derivatives of target rows lo..hi into dl: on
// the device when the backend can, through the host otherwise (the CPU
// backends, whose downloads are copies).
func (m *Model) tokenLossGrad(dl, logp *Tensor, l *TokenLoss, lo, hi int) {
	if g, ok := m.B.(TokenLossGrader); ok {
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

// fusedHead is the forward's LM head with its backward (ForwardLoss): per
// chunk of target rows, the log-probs, entropies and log-sum-exps, then
// dl = ∂J/∂log π, then the head's backward on the same logits (as
// headBackward does it). The pass keeps dxf for Backward, which starts at
// the final norm; the final-normed rows and the log-sum-exps are released,
// nothing else needing them.
func (m *Model) fusedHead(p *Pass, l *TokenLoss, grads *Params, logp, ent, dl *Tensor) {
	b, C := m.B, m.Cfg.HiddenSize
	chunk := min(m.headChunkRows(), max(len(p.rows), 1))
	p.dxf = b.New(len(p.ids), C)
	dlogits := m.headGradScratch(chunk)
	dh := Scratch(b, chunk, C)
	m.headChunks(p, headFused, func(lo, hi int, logits, h *Tensor) {
		lp := logp.Rows(lo, hi)
		b.LogSoftmaxGather(lp, p.headLSE.Rows(lo, hi), ent.Rows(lo, hi), logits, p.targets[lo:hi])
		m.tokenLossGrad(dl.Rows(lo, hi), lp, l, lo, hi)
		m.headChunkBackward(p, lo, hi, logits, h, dl.Rows(lo, hi), dlogits, dh, p.dxf, grads)
	})
	Release(b, dlogits, dh, p.xf, p.headLSE)
	p.xf, p.headLSE = nil, nil
}
