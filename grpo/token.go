package grpo

import "math"

// Surrogate holds the settings one token's loss terms depend on
// (docs/algorithm.md §5.4–5.5): the asymmetric ratio clip, the dual clip
// (0: off) and the k3 KL's coefficient.
type Surrogate struct {
	ClipLow, ClipHigh, DualClip, KLCoef float64
}

// TokenTerms are one token's loss pieces and derivatives.
type TokenTerms struct {
	Policy, KL       float64 // L and the clamped k3 value
	DPolicy, DKL     float64 // ∂L/∂log π, ∂k/∂log π
	Clipped          bool    // L2 > L1 (the ratio clip is active)
	LowerClipped     bool    // the dual clip is active (Ã < 0 and Lc > −c·Ã)
	NegLogRatio      float64 // −Δ, averaged into ppo_kl
	SignalTerm       float64 // max(−A·ρ, −A·clip(ρ)) with the unweighted A (docs/algorithm.md §6.2)
	RatioForLogging  float64
	DeltaOutOfBounds bool
}

// Token computes the dual-clip surrogate and k3 KL of one token
// (docs/algorithm.md §5.4–5.5). aw is the (GDRO-weighted) advantage, a the
// unweighted one. At the ties of max/min the whole gradient goes to the
// first branch. The CUDA backend's token_loss_grad kernel
// (cuda/kernels/loss.cu) mirrors the derivative branch for branch: change
// both together.
func (s Surrogate) Token(lp, lpOld, lpRef, aw, a float64) TokenTerms {
	var t TokenTerms
	delta := lp - lpOld
	dDelta := 1.0
	if delta < -20 || delta > 20 {
		delta, dDelta = math.Max(-20, math.Min(20, delta)), 0
		t.DeltaOutOfBounds = true
	}
	rho := math.Exp(delta)
	t.RatioForLogging, t.NegLogRatio = rho, -delta
	clipped := math.Max(1-s.ClipLow, math.Min(1+s.ClipHigh, rho))
	l1, l2 := -aw*rho, -aw*clipped
	lc, dlc := l1, -aw*rho*dDelta
	if l2 > l1 { // only when ρ is outside the clip range, where L2 is flat
		t.Clipped = true
		lc, dlc = l2, 0
	}
	t.Policy, t.DPolicy = lc, dlc
	if s.DualClip > 0 && aw < 0 && lc > -aw*s.DualClip {
		t.LowerClipped = true
		t.Policy, t.DPolicy = -aw*s.DualClip, 0
	}
	t.SignalTerm = math.Max(-a*rho, -a*math.Max(1-s.ClipLow, math.Min(1+s.ClipHigh, rho)))

	d := lpRef - lp
	dd := -1.0 // ∂d/∂log π
	if d < -20 || d > 20 {
		d, dd = math.Max(-20, math.Min(20, d)), 0
	}
	k := math.Exp(d) - d - 1
	dk := (math.Exp(d) - 1) * dd
	if k < -10 || k > 10 {
		k, dk = math.Max(-10, math.Min(10, k)), 0
	}
	t.KL, t.DKL = k, dk
	return t
}

// Grad is the derivative the model's backward consumes for one token,
// ∂(loss/ga)/∂log π: the policy term's derivative scaled by the rollout
// correction's importance weight is (1 without one), plus the KL's, over
// the aggregation's divisor and the accumulation count. The explicit
// float64 conversions keep a compiler from fusing the products into FMAs
// (Go may on arm64), so every platform rounds as the CUDA kernel does.
func (s Surrogate) Grad(t TokenTerms, is, denom, ga float64) float32 {
	pol, kl := float64(t.DPolicy*is), float64(s.KLCoef*t.DKL)
	return float32((pol + kl) / denom / ga)
}
