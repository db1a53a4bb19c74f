package trainer

// The step's sampler/trainer mismatch figures (docs/algorithm.md §5.10):
// grpo.CorrectionConfig.Weights measures each row; this file sums the
// rows in row order into metrics.jsonl's figures.

import "math"

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

// samplerIsPolicy reports whether the sampler's log-probs are of the
// policy the trainer evaluates: comparable settings, or
// precision.exact_logprobs, where the sampler returns the untempered,
// unfiltered log-probability of each drawn token whatever it drew with.
func (c Config) samplerIsPolicy() bool {
	return c.Precision.ExactLogProbs || c.Sampling.samplerComparable()
}
