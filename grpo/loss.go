package grpo

import (
	"errors"
	"fmt"
	"math"
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

// Surrogate is the loss's per-token settings, as Token and the model's
// fused head (TokenLoss) take them.
func (c LossConfig) Surrogate() Surrogate {
	return Surrogate{ClipLow: c.ClipLow, ClipHigh: c.ClipHigh, DualClip: c.DualClip, KLCoef: c.KLCoef}
}

// Token computes the dual-clip surrogate and k3 KL of one token (docs/algorithm.md §5.4–5.5).
// aw is the (GDRO-weighted) advantage, a the unweighted one.
func (c LossConfig) Token(lp, lpOld, lpRef, aw, a float64) TokenTerms {
	return c.Surrogate().Token(lp, lpOld, lpRef, aw, a)
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
	denoms := c.Denominators(rows)
	s := c.Surrogate()
	var ratioSum float64
	for i, r := range rows {
		n := len(r.LogProbs)
		grads[i] = make([]float32, n)
		denom := denoms[i]
		var signal, kl float64
		for k := 0; k < n; k++ {
			t := s.Token(float64(r.LogProbs[k]), float64(r.Old[k]), float64(r.Ref[k]), r.Adv*r.Weight, r.Adv)
			// The importance weight is a constant of the step: it scales
			// the policy term and its derivative (Grad).
			w := r.isWeight(k)
			pw := t.Policy * w
			// A masked row still gives the controllers its signal and KL,
			// and the logging sums its tokens; it only leaves the loss.
			if !r.Masked {
				st.Loss += (pw + c.KLCoef*t.KL) / denom
				grads[i][k] = s.Grad(t, w, denom, float64(ga))
			}
			st.PolicyLoss += pw
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

// TokenLoss is the loss of rows (their Old, Ref, Adv, Weight, IS, Masked,
// GroupSize; LogProbs unused) as the model's fused head takes it: one entry
// per response token, the rows end to end.
func (c LossConfig) TokenLoss(rows []Row, ga int) *TokenLoss {
	l := &TokenLoss{Surrogate: c.Surrogate(), GA: float64(ga)}
	denoms := c.Denominators(rows)
	anyIS := false
	for _, r := range rows {
		anyIS = anyIS || r.IS != nil
	}
	for i, r := range rows {
		l.Old = append(l.Old, r.Old...)
		l.Ref = append(l.Ref, r.Ref...)
		for k := range r.Old {
			l.Adv = append(l.Adv, r.Adv*r.Weight)
			l.Denom = append(l.Denom, denoms[i])
			if anyIS {
				l.IS = append(l.IS, float32(r.isWeight(k)))
			}
		}
	}
	return l
}

// isWeight is token k's rollout-correction weight (1 without one).
func (r Row) isWeight(k int) float64 {
	if r.IS == nil {
		return 1
	}
	return float64(r.IS[k])
}

// Denominators returns each row's aggregation divisor (0 for a masked row,
// which leaves the loss); a row's token count is len(Old), so they are
// known before the policy's forward (the fused head needs them there). Token-mean divides every token by the
// micro-batch's token count; seq-mean-token-mean by the row's count and the
// number of rows; prompt-mean-token-mean by the row's count, its prompt's
// rollout count and the number of prompts, so every prompt weighs the same
// whatever its n_i (docs/algorithm.md §11 item 14).
func (c LossConfig) Denominators(rows []Row) []float64 {
	total, kept := 0, 0
	// prompts counts the prompts in the micro-batch, a prompt whose rows are
	// split over micro-batches counting by the fraction present.
	var prompts float64
	for _, r := range rows {
		if r.Masked {
			continue
		}
		total += len(r.Old)
		kept++
		prompts += 1 / float64(max(r.GroupSize, 1))
	}
	out := make([]float64, len(rows))
	for i, r := range rows {
		n := len(r.Old)
		switch {
		case r.Masked:
			out[i] = 0
		case c.Aggregation == "seq-mean-token-mean":
			out[i] = float64(n * kept)
		case c.Aggregation == "prompt-mean-token-mean":
			out[i] = float64(n*max(r.GroupSize, 1)) * prompts
		default:
			out[i] = float64(total)
		}
	}
	return out
}
