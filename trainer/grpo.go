// Package trainer runs GRPO with the Prompt-GDRO and Rollout-GDRO
// curricula. This file holds the GRPO core of docs/algorithm.md §5: group-normalised
// advantages, the dual-clip surrogate, the k3 KL penalty, token-mean
// aggregation per micro-batch, and the per-row loss signal of docs/algorithm.md §6.2.
//
// Departures from the GRPO paper, all following the verl reference the
// published runs used (docs/algorithm.md §5, §11 item 13):
//   - the group standard deviation is the unbiased one (n−1), ε = 1e−6,
//     and a group of one has μ = 0, σ = 1;
//   - the KL term is the k3 ("low_var_kl") estimator in the loss, not in
//     the reward, against the frozen initial policy;
//   - the loss is a token mean per micro-batch, and micro-batch losses are
//     averaged (divided by the accumulation count) over a mini-batch — so
//     longer responses and prompts with more rollouts weigh more. Two
//     variants are options: seq-mean-token-mean (each row's token mean,
//     averaged over rows) and prompt-mean-token-mean (each prompt weighs the
//     same whatever its rollout count n_i, docs/algorithm.md §11 item 14);
//   - advantage clipping is available but off by default (the reference
//     sets ±5 and never reads it; it cannot bind for n ≤ 12).
//
// Gradients: the model's backward consumes ∂loss/∂log π per token; this
// file computes it in closed form. At the ties of max/min (measure zero
// for continuous ratios) the whole gradient goes to the first branch.
package trainer

import (
	"errors"
	"fmt"
	"math"

	"github.com/gdrotrain/gdrotrain/internal/grpo"
)

// LossConfig holds the GRPO loss settings (docs/algorithm.md §5, §10).
type LossConfig struct {
	ClipLow     float64 `yaml:"clip_low" json:"clip_low"`       // ε_low, 0.2
	ClipHigh    float64 `yaml:"clip_high" json:"clip_high"`     // ε_high, 0.28
	DualClip    float64 `yaml:"dual_clip" json:"dual_clip"`     // c, 3.0; 0 disables
	KLCoef      float64 `yaml:"kl_coef" json:"kl_coef"`         // β_KL, 0.001
	AdvClip     float64 `yaml:"adv_clip" json:"adv_clip"`       // |A| cap; 0 disables (reference: off)
	AdvEps      float64 `yaml:"adv_eps" json:"adv_eps"`         // 1e-6
	Aggregation string  `yaml:"aggregation" json:"aggregation"` // token-mean | seq-mean-token-mean | prompt-mean-token-mean
	// RolloutCorrection measures and optionally corrects the gap between
	// the sampler's and the trainer's log-probs (correction.go).
	RolloutCorrection CorrectionConfig `yaml:"rollout_correction" json:"rollout_correction"`
	// Overlong handles responses that reach max_new_tokens (overlong.go).
	Overlong OverlongConfig `yaml:"overlong" json:"overlong"`
}

// DefaultLoss returns the reference settings.
func DefaultLoss() LossConfig {
	return LossConfig{ClipLow: 0.2, ClipHigh: 0.28, DualClip: 3, KLCoef: 0.001, AdvEps: 1e-6, Aggregation: "token-mean",
		RolloutCorrection: DefaultCorrection(), Overlong: DefaultOverlong()}
}

// Validate checks the loss settings.
func (c LossConfig) Validate() error {
	switch {
	case c.ClipLow < 0 || c.ClipLow >= 1:
		return fmt.Errorf("loss.clip_low must be in [0, 1), got %v", c.ClipLow)
	case c.ClipHigh < 0:
		return fmt.Errorf("loss.clip_high must be ≥ 0, got %v", c.ClipHigh)
	case c.DualClip != 0 && c.DualClip <= 1:
		return fmt.Errorf("loss.dual_clip must be 0 (off) or > 1, got %v", c.DualClip)
	case c.KLCoef < 0:
		return fmt.Errorf("loss.kl_coef must be ≥ 0, got %v", c.KLCoef)
	case c.AdvClip < 0:
		return fmt.Errorf("loss.adv_clip must be ≥ 0 (0: off), got %v", c.AdvClip)
	case c.AdvEps <= 0:
		return fmt.Errorf("loss.adv_eps must be > 0, got %v", c.AdvEps)
	case c.Aggregation != "token-mean" && c.Aggregation != "seq-mean-token-mean" && c.Aggregation != "prompt-mean-token-mean":
		return fmt.Errorf("loss.aggregation must be token-mean, seq-mean-token-mean or prompt-mean-token-mean, got %q", c.Aggregation)
	}
	return errors.Join(c.RolloutCorrection.Validate(), c.Overlong.Validate())
}

// Advantages returns GRPO advantages for rewards grouped by group[i] (any
// group ids; groups may have different sizes). It is internal/grpo's
// function, the one gdro-sim uses too: a group of one row keeps its raw
// reward (μ = 0, σ = 1), as in the reference (docs/algorithm.md §5.2).
func Advantages(rewards []float64, group []int, eps, clip float64) []float64 {
	return grpo.Advantages(rewards, group, eps, clip)
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

// Token computes the dual-clip surrogate and k3 KL of one token (docs/algorithm.md §5.4–5.5).
// aw is the (GDRO-weighted) advantage, a the unweighted one.
func (c LossConfig) Token(lp, lpOld, lpRef, aw, a float64) TokenTerms {
	var t TokenTerms
	delta := lp - lpOld
	dDelta := 1.0
	if delta < -20 || delta > 20 {
		delta, dDelta = math.Max(-20, math.Min(20, delta)), 0
		t.DeltaOutOfBounds = true
	}
	rho := math.Exp(delta)
	t.RatioForLogging, t.NegLogRatio = rho, -delta
	clipped := math.Max(1-c.ClipLow, math.Min(1+c.ClipHigh, rho))
	l1, l2 := -aw*rho, -aw*clipped
	lc, dlc := l1, -aw*rho*dDelta
	if l2 > l1 { // only when ρ is outside the clip range, where L2 is flat
		t.Clipped = true
		lc, dlc = l2, 0
	}
	t.Policy, t.DPolicy = lc, dlc
	if c.DualClip > 0 && aw < 0 && lc > -aw*c.DualClip {
		t.LowerClipped = true
		t.Policy, t.DPolicy = -aw*c.DualClip, 0
	}
	t.SignalTerm = math.Max(-a*rho, -a*math.Max(1-c.ClipLow, math.Min(1+c.ClipHigh, rho)))

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

// Row is one response in a micro-batch: per-token log-probs under the
// current, old and reference policies, and its advantages.
type Row struct {
	LogProbs, Old, Ref []float32
	Adv                float64 // unweighted GRPO advantage
	Weight             float64 // Prompt-GDRO multiplier (1 when unused)
	GroupSize          int     // rollouts of this row's prompt (prompt-mean-token-mean); 0 counts as 1
	// IS are the rollout correction's per-token importance weights on the
	// policy term (nil: all 1; correction.go).
	IS []float32
	// Masked drops the row from the loss (overlong filtering): no gradient,
	// and it counts in no aggregation denominator.
	Masked bool
}

// MicroStats accumulates logging statistics over tokens.
type MicroStats struct {
	Tokens                        int
	PolicyLoss, KL, PPOKL         float64 // sums over tokens
	ClipCount, LowerClipCount     int
	Loss                          float64   // the micro-batch loss before the 1/GA scale
	RowSignal, RowKL              []float64 // per row: ℓ_r (docs/algorithm.md §6.2) and the token-mean KL
	DeltaOutOfBounds              int
	RatioMin, RatioMax, RatioMean float64
}

// MicroBatch computes the loss of one micro-batch and, per row, ∂(loss/ga)/∂log π
// for every response token, plus the per-row loss signal (docs/algorithm.md §6.2).
func (c LossConfig) MicroBatch(rows []Row, ga int) ([][]float32, MicroStats) {
	st := MicroStats{RatioMin: math.Inf(1), RatioMax: math.Inf(-1)}
	grads := make([][]float32, len(rows))
	total, kept := 0, 0
	// prompts counts the prompts in the micro-batch, a prompt whose rows are
	// split over micro-batches counting by the fraction present.
	var prompts float64
	for _, r := range rows {
		if r.Masked {
			continue
		}
		total += len(r.LogProbs)
		kept++
		prompts += 1 / float64(max(r.GroupSize, 1))
	}
	var ratioSum float64
	for i, r := range rows {
		n := len(r.LogProbs)
		grads[i] = make([]float32, n)
		// Token-mean divides every token by the micro-batch token count;
		// seq-mean-token-mean by the row's count and the number of rows;
		// prompt-mean-token-mean by the row's count, its prompt's rollout
		// count and the number of prompts, so every prompt weighs the same
		// whatever its n_i (docs/algorithm.md §11 item 14).
		var denom float64
		switch c.Aggregation {
		case "seq-mean-token-mean":
			denom = float64(n * kept)
		case "prompt-mean-token-mean":
			denom = float64(n*max(r.GroupSize, 1)) * prompts
		default:
			denom = float64(total)
		}
		var signal, kl float64
		for k := 0; k < n; k++ {
			t := c.Token(float64(r.LogProbs[k]), float64(r.Old[k]), float64(r.Ref[k]), r.Adv*r.Weight, r.Adv)
			if r.IS != nil { // the weight is a constant of the step: it scales the term and its derivative
				w := float64(r.IS[k])
				t.Policy, t.DPolicy = t.Policy*w, t.DPolicy*w
			}
			// A masked row still gives the controllers its signal and KL,
			// and the logging sums its tokens; it only leaves the loss.
			if !r.Masked {
				st.Loss += (t.Policy + c.KLCoef*t.KL) / denom
				grads[i][k] = float32((t.DPolicy + c.KLCoef*t.DKL) / denom / float64(ga))
			}
			st.PolicyLoss += t.Policy
			st.KL += t.KL
			st.PPOKL += t.NegLogRatio
			ratioSum += t.RatioForLogging
			st.RatioMin, st.RatioMax = math.Min(st.RatioMin, t.RatioForLogging), math.Max(st.RatioMax, t.RatioForLogging)
			if t.Clipped {
				st.ClipCount++
			}
			if t.LowerClipped {
				st.LowerClipCount++
			}
			if t.DeltaOutOfBounds {
				st.DeltaOutOfBounds++
			}
			signal += t.SignalTerm
			kl += t.KL
		}
		n1 := math.Max(float64(n), 1) // |T_r| ≥ 1, as the reference enforces
		st.RowSignal = append(st.RowSignal, signal/n1)
		st.RowKL = append(st.RowKL, kl/n1)
		st.Tokens += n
	}
	if st.Tokens > 0 {
		st.RatioMean = ratioSum / float64(st.Tokens)
	}
	return grads, st
}
