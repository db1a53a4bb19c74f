package trainer

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

// rowMismatch is one row's sampler/trainer comparison: sums over its
// response tokens, so that the step's figures can be formed in row order
// whichever rank computed them.
type rowMismatch struct {
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

// clampLog bounds a log-ratio before exp, as the loss bounds Δ (grpo.go).
func clampLog(x float64) float64 { return math.Max(-20, math.Min(20, x)) }

// Weights returns the importance weights of one row's response tokens
// (nil when the mode corrects nothing) and the row's mismatch figures.
// old and samp have one entry per response token.
func (c CorrectionConfig) Weights(old, samp []float32) ([]float32, rowMismatch, error) {
	if len(old) != len(samp) {
		return nil, rowMismatch{}, fmt.Errorf("rollout correction: %d trainer log-probs but %d sampler log-probs", len(old), len(samp))
	}
	m := rowMismatch{Measured: true, Tokens: len(old), WMin: math.Inf(1), WMax: math.Inf(-1)}
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

// MismatchMetrics are the step's sampler/trainer figures (metrics.jsonl),
// present when the sampler's log-probs are comparable with the trainer's
// (sampling at temperature 1 without top-k/top-p).
type MismatchMetrics struct {
	// AbsMean and AbsMax: |log π_old − log π_samp| per response token.
	AbsMean float64 `json:"mismatch_logp_abs_mean"`
	AbsMax  float64 `json:"mismatch_logp_abs_max"`
	// SeqLogRatioMean and SeqLogRatioAbsMax: the rows' sequence log-ratio
	// Σ_t (log π_old − log π_samp).
	SeqLogRatioMean   float64 `json:"mismatch_seq_log_ratio_mean"`
	SeqLogRatioAbsMax float64 `json:"mismatch_seq_log_ratio_abs_max"`
	// KL is KL(π_samp ‖ π_old) per token, by the k3 estimator r − 1 − log r
	// (unbiased for tokens drawn from π_samp, and never negative).
	KL float64 `json:"mismatch_kl"`
	// OutOfBand is the share of tokens whose ratio π_old/π_samp leaves
	// [loss.rollout_correction.low, high].
	OutOfBand float64 `json:"mismatch_out_of_band"`
	// The correction's weights over the step's tokens (all 1 in mode
	// none), and the shares of tokens it truncated and masked.
	ISWeightMean float64 `json:"is_weight_mean"`
	ISWeightMin  float64 `json:"is_weight_min"`
	ISWeightMax  float64 `json:"is_weight_max"`
	ISTruncated  float64 `json:"is_truncated_frac"`
	ISMasked     float64 `json:"is_masked_frac"`
}

// mismatchMetrics sums the rows' figures in row order (nil when no row
// has any).
func mismatchMetrics(rows []rowData) *MismatchMetrics {
	var mm MismatchMetrics
	var tokens, nrows, oob, trunc, masked int
	var abs, lr, k3, w float64
	wmin, wmax := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		m := r.mismatch
		if m == nil {
			continue
		}
		nrows++
		tokens += m.Tokens
		abs += m.AbsSum
		k3 += m.K3Sum
		lr += m.LogRatio
		oob += m.OutOfBand
		trunc += m.Truncated
		masked += m.Masked
		w += m.WSum
		mm.AbsMax = math.Max(mm.AbsMax, m.AbsMax)
		mm.SeqLogRatioAbsMax = math.Max(mm.SeqLogRatioAbsMax, math.Abs(m.LogRatio))
		if m.Tokens > 0 {
			wmin, wmax = math.Min(wmin, m.WMin), math.Max(wmax, m.WMax)
		}
	}
	if nrows == 0 {
		return nil
	}
	tk := float64(max(tokens, 1))
	mm.AbsMean, mm.KL, mm.OutOfBand = abs/tk, k3/tk, float64(oob)/tk
	mm.SeqLogRatioMean = lr / float64(nrows)
	mm.ISWeightMean, mm.ISTruncated, mm.ISMasked = w/tk, float64(trunc)/tk, float64(masked)/tk
	if tokens > 0 {
		mm.ISWeightMin, mm.ISWeightMax = wmin, wmax
	}
	return &mm
}

// samplerComparable reports whether the sampler's log-probs are of the
// policy the trainer evaluates: temperature 1, no top-k, no top-p. Other
// settings draw from a reshaped distribution on purpose, and its ratio to
// π_old measures the reshaping, not the kernels (docs/algorithm.md §5.10).
func (s SamplingConfig) samplerComparable() bool {
	return s.Temperature == 1 && s.TopK == 0 && s.TopP == 1
}
