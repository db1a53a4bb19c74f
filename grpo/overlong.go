package grpo

// Overlong responses (docs/algorithm.md §5.11): a response that reaches
// sampling.max_new_tokens was cut, not finished, so its reward says little
// about the answer it would have given. DAPO (Yu et al., 2025, §3.4)
// offers two remedies, both options here and off by default:
//   - overlong filtering: the truncated rows leave the loss (their group's
//     advantages are computed with them, as DAPO does, so the other rows
//     are unchanged);
//   - the soft overlong penalty: a reward term that falls linearly from 0
//     to −factor over the last soft_penalty_tokens tokens before the
//     limit, added to the verifier's score before the advantages.

import "fmt"

// OverlongConfig is loss.overlong.
type OverlongConfig struct {
	// Filter masks responses that hit max_new_tokens out of the loss.
	Filter bool `yaml:"filter" json:"filter"`
	// SoftPenaltyTokens is L, the length of the soft-penalty ramp before
	// max_new_tokens (0: off; DAPO used 4096 of 20480).
	SoftPenaltyTokens int `yaml:"soft_penalty_tokens" json:"soft_penalty_tokens"`
	// PenaltyFactor is the penalty at the limit (the ramp goes from 0 to −factor).
	PenaltyFactor float64 `yaml:"penalty_factor" json:"penalty_factor"`
}

// DefaultOverlong turns both remedies off (the paper configs' behaviour).
func DefaultOverlong() OverlongConfig { return OverlongConfig{PenaltyFactor: 1} }

// Validate checks loss.overlong.
func (o OverlongConfig) Validate() error {
	var p problems
	if o.SoftPenaltyTokens < 0 {
		p.add("loss.overlong.soft_penalty_tokens = %d must be ≥ 0 (0: off)", o.SoftPenaltyTokens)
	}
	if o.PenaltyFactor < 0 {
		p.add("loss.overlong.penalty_factor = %v must be ≥ 0", o.PenaltyFactor)
	}
	return p.err()
}

// CheckLimit checks that the ramp fits must fit under the response limit.
func (o OverlongConfig) CheckLimit(maxNew int) error {
	if o.SoftPenaltyTokens >= maxNew && o.SoftPenaltyTokens > 0 {
		return fmt.Errorf("loss.overlong.soft_penalty_tokens = %d must be below sampling.max_new_tokens = %d", o.SoftPenaltyTokens, maxNew)
	}
	return nil
}

// Penalty is the soft overlong penalty of a response of length tokens
// under the limit maxNew: 0 up to maxNew − L, then (maxNew − L − length)/L
// times the factor, reaching −factor at the limit.
func (o OverlongConfig) Penalty(length, maxNew int) float64 {
	L := o.SoftPenaltyTokens
	if L <= 0 {
		return 0
	}
	free := maxNew - L
	if length <= free {
		return 0
	}
	if length >= maxNew {
		return -o.PenaltyFactor
	}
	return o.PenaltyFactor * float64(free-length) / float64(L)
}
