package grpo

// The loss as the model's fused LM head takes it (docs/algorithm.md §5.15):
// one entry per target token, the rows end to end, so the head can form
// ∂J/∂log π chunk by chunk where the log-probs are. The model calls Grad
// (or a backend's kernel mirroring it, model.TokenLossGrader); building it
// from a micro-batch's rows is LossConfig.TokenLoss.

import "fmt"

// TokenLoss is a loss whose derivative with respect to each target token's
// log-probability depends on that log-probability and on per-token
// constants alone: GRPO's clipped surrogate with the k3 KL, as MicroBatch
// computes it (Surrogate.Token, .Grad). The slices hold one entry per
// target row, in the pass's order (the sequences' Tokens[Start:] end to
// end).
type TokenLoss struct {
	Surrogate
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

// Grad is target row k's ∂J/∂log π at log-prob lp, as LossConfig's
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
