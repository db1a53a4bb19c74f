package grpo

// Rollout correction (docs/algorithm.md §5.10): the sampler draws with its
// own kernels (decode attention over a bf16 KV cache, bf16 weights on the
// GPU) while the trainer recomputes the old log-probs through the training
// forward, so the distribution the tokens came from (π_samp) is not quite
// the one the loss treats as the behaviour policy (π_old). The sampler's
// per-token log-probs are kept with each row; this file measures the gap
// every step and, when loss.rollout_correction.mode asks, turns it into
// per-token importance weights that multiply the policy term of the loss.
//
// The weights are constants of the step (no gradient flows through them):
// they depend on π_old and π_samp only, both fixed before the update.

import (
	"fmt"
	"math"
)

// Rollout-correction modes.
const (
	CorrectNone     = "none"      // measure only
	CorrectTokenTIS = "token_tis" // w_t = min(r_t, cap)
	CorrectTokenMIS = "token_mis" // w_t = r_t if low ≤ r_t ≤ high, else 0
	CorrectSeqTIS   = "seq_tis"   // every token: min(Π_t r_t, cap)
	CorrectSeqMIS   = "seq_mis"   // every token: Π_t r_t if low ≤ Π_t r_t ≤ high, else 0
)

// CorrectionConfig is loss.rollout_correction.
type CorrectionConfig struct {
	// Mode: none (measure the sampler/trainer mismatch, change nothing),
	// token_tis (truncated importance sampling per token, weight
	// min(π_old/π_samp, cap)), token_mis (masked: a token whose ratio
	// leaves [low, high] is dropped from the policy term, the others keep
	// their ratio as weight), seq_tis (the sequence ratio Π_t π_old/π_samp,
	// truncated at cap, weighs every token of the row) or seq_mis (whole
	// rows whose sequence ratio leaves [low, high] are dropped). Needs
	// sampling at temperature 1 without top-k/top-p (the trainer's
	// log-probs are of the untempered, unfiltered policy).
	Mode string `yaml:"mode" json:"mode"`
	// Cap is C of the truncated modes (token_tis, seq_tis): weights above it
	// are set to it.
	Cap float64 `yaml:"cap" json:"cap"`
	// Low is the lower end of the masked modes' band (token_mis, seq_mis),
	// and of the band of the mismatch_out_of_band metric in every mode.
	Low float64 `yaml:"low" json:"low"`
	// High is the upper end of the same band.
	High float64 `yaml:"high" json:"high"`
}

// DefaultCorrection measures the mismatch and corrects nothing (the paper
// configs' behaviour); cap 2 and the band [0.5, 2] are the values verl's
// rollout correction documents as its defaults.
func DefaultCorrection() CorrectionConfig {
	return CorrectionConfig{Mode: CorrectNone, Cap: 2, Low: 0.5, High: 2}
}

// Validate checks loss.rollout_correction.
func (c CorrectionConfig) Validate() error {
	var p problems
	switch c.Mode {
	case CorrectNone, CorrectTokenTIS, CorrectTokenMIS, CorrectSeqTIS, CorrectSeqMIS:
	default:
		p.add("loss.rollout_correction.mode %q: want none, token_tis, token_mis, seq_tis or seq_mis", c.Mode)
	}
	if !(c.Cap >= 1) {
		p.add("loss.rollout_correction.cap = %v must be ≥ 1", c.Cap)
	}
	if !(c.Low > 0 && c.Low <= 1 && c.High >= 1) {
		p.add("loss.rollout_correction.low = %v and high = %v must satisfy 0 < low ≤ 1 ≤ high", c.Low, c.High)
	}
	return p.err()
}

// Corrects reports whether the mode changes the loss.
func (c CorrectionConfig) Corrects() bool { return c.Mode != CorrectNone && c.Mode != "" }

// RowMismatch is one row's sampler/trainer comparison: sums over its
// response tokens, so that the step's figures can be formed in row order
// whichever rank computed them.
type RowMismatch struct {
	Measured  bool // the row's figures exist (the data-parallel exchange's nil)
	Tokens    int
	AbsSum    float64 // Σ_t |log π_old − log π_samp|
	AbsMax    float64 // max_t of the same
	LogRatio  float64 // Σ_t (log π_old − log π_samp): the sequence log-ratio
	K3Sum     float64 // Σ_t (r_t − 1 − log r_t): KL(π_samp ‖ π_old) estimate
	OutOfBand int     // tokens whose ratio leaves [low, high]
	// The weights the correction gave the row's tokens.
	WSum, WMin, WMax float64
	Truncated        int // tokens whose weight was cut to cap
	Masked           int // tokens whose weight was set to 0
}

// clampLog bounds a log-ratio before exp, as the loss bounds Δ (token.go).
func clampLog(x float64) float64 { return math.Max(-20, math.Min(20, x)) }

// Weights returns the importance weights of one row's response tokens
// (nil when the mode corrects nothing) and the row's mismatch figures.
// old and samp have one entry per response token.
func (c CorrectionConfig) Weights(old, samp []float32) ([]float32, RowMismatch, error) {
	if len(old) != len(samp) {
		return nil, RowMismatch{}, fmt.Errorf("rollout correction: %d trainer log-probs but %d sampler log-probs", len(old), len(samp))
	}
	m := RowMismatch{Measured: true, Tokens: len(old), WMin: math.Inf(1), WMax: math.Inf(-1)}
	for k := range old {
		d := float64(old[k]) - float64(samp[k])
		r := math.Exp(clampLog(d))
		m.AbsSum += math.Abs(d)
		m.AbsMax = math.Max(m.AbsMax, math.Abs(d))
		m.LogRatio += d
		m.K3Sum += r - 1 - clampLog(d)
		if r < c.Low || r > c.High {
			m.OutOfBand++
		}
	}
	if !c.Corrects() || len(old) == 0 {
		if len(old) > 0 {
			m.WSum, m.WMin, m.WMax = float64(len(old)), 1, 1
		}
		return nil, m, nil
	}
	w := make([]float32, len(old))
	seq := math.Exp(clampLog(m.LogRatio))
	for k := range old {
		r := math.Exp(clampLog(float64(old[k]) - float64(samp[k])))
		x := r // the ratio the mode weighs by: the token's or the row's
		if c.Mode == CorrectSeqTIS || c.Mode == CorrectSeqMIS {
			x = seq
		}
		switch c.Mode {
		case CorrectTokenTIS, CorrectSeqTIS: // truncate at the cap
			if x > c.Cap {
				x = c.Cap
				m.Truncated++
			}
		case CorrectTokenMIS, CorrectSeqMIS: // mask outside the band
			if x < c.Low || x > c.High {
				x = 0
				m.Masked++
			}
		}
		w[k] = float32(x)
		m.WSum += x
		m.WMin, m.WMax = math.Min(m.WMin, x), math.Max(m.WMax, x)
	}
	return w, m, nil
}
