package trainer

// Dynamic sampling (docs/algorithm.md §5.12; DAPO, Yu et al., 2025, §3.2):
// a group whose rewards are all equal has zero advantage everywhere, so it
// adds nothing to the policy gradient but dilutes the token mean. With
// train.dynamic_sampling on, such groups are dropped from the update and
// the step draws further batches of prompts (whole rounds of
// prompts_per_step, planned by the controllers like the first) until it
// has prompts_per_step groups with a nonzero spread, or max_rounds rounds
// have run. The first prompts_per_step informative groups, in draw order,
// are trained on; the rest are generated but not trained on.
//
// The controllers see every generated prompt (gdro.MergePlans): the
// classifier observes the dropped groups too (an all-correct or
// all-wrong group is its clearest evidence), Rollout-GDRO's budget counts
// every generated rollout, and Prompt-GDRO's multipliers are computed over
// the kept prompts only, so they keep their normalisation on the rows that
// are trained on.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/grpo"
)

// DynamicSamplingConfig is train.dynamic_sampling.
type DynamicSamplingConfig struct {
	// Enabled drops zero-variance groups and keeps generating (default off:
	// the paper's runs train on every group).
	Enabled bool `yaml:"enabled" json:"enabled"`
	// MaxRounds caps the generation rounds of one step, the first included
	// (DAPO's max_num_gen_batches); when it is hit the step trains on the
	// informative groups it has, and dynamic_sampling_cap_hit says so.
	MaxRounds int `yaml:"max_rounds" json:"max_rounds"`
}

// Validate checks train.dynamic_sampling.
func (d DynamicSamplingConfig) Validate() error {
	if d.MaxRounds < 1 {
		return fmt.Errorf("train.dynamic_sampling.max_rounds = %d must be ≥ 1", d.MaxRounds)
	}
	return nil
}

// DynamicSamplingMetrics are one step's rounds and drops.
type DynamicSamplingMetrics struct {
	Rounds           int `json:"ds_rounds"`
	GeneratedPrompts int `json:"ds_generated_prompts"`
	GeneratedRows    int `json:"ds_generated_rows"`
	KeptPrompts      int `json:"ds_kept_prompts"`
	KeptRows         int `json:"ds_kept_rows"`
	// ZeroVarianceGroups counts the generated groups with equal rewards.
	ZeroVarianceGroups int `json:"ds_zero_variance_groups"`
	// Oversampling is generated rows per kept row (1: nothing dropped).
	Oversampling float64 `json:"ds_oversampling"`
	// CapHit: max_rounds ran out before prompts_per_step informative groups.
	CapHit bool `json:"ds_cap_hit"`
}

// groupSpans returns each prompt's [lo, hi) in the prompt-contiguous rows.
func groupSpans(rows []rowData, prompts int) [][2]int {
	spans := make([][2]int, prompts)
	for i := range spans {
		spans[i] = [2]int{-1, -1}
	}
	for k, r := range rows {
		if spans[r.prompt][0] < 0 {
			spans[r.prompt][0] = k
		}
		spans[r.prompt][1] = k + 1
	}
	return spans
}

// informative reports whether rows' rewards (score plus overlong
// penalty, what the advantage sees) are not all equal.
func informative(rows []rowData) bool {
	for _, r := range rows[1:] {
		if r.result.Score+r.penalty != rows[0].result.Score+rows[0].penalty {
			return true
		}
	}
	return false
}

// informativeGroups counts the groups of rows with a nonzero spread.
func informativeGroups(rows []rowData) int {
	n := 0
	for lo := 0; lo < len(rows); {
		hi := lo
		for hi < len(rows) && rows[hi].prompt == rows[lo].prompt {
			hi++
		}
		if informative(rows[lo:hi]) {
			n++
		}
		lo = hi
	}
	return n
}

// keepGroups returns the prompts (indices into b.prompts) the update
// trains on: all of them without dynamic sampling, else the first
// prompts_per_step informative ones; it fills the step's figures.
func (t *Trainer) keepGroups(b stepBatch, met *StepMetrics) []int {
	spans := groupSpans(b.rows, len(b.prompts))
	if !t.Cfg.Train.DynamicSampling.Enabled {
		keep := make([]int, len(b.prompts))
		for i := range keep {
			keep[i] = i
		}
		return keep
	}
	dm := &DynamicSamplingMetrics{Rounds: b.rounds, GeneratedPrompts: len(b.prompts),
		GeneratedRows: len(b.rows), CapHit: met.dsCapHit}
	var keep []int
	for i, s := range spans {
		if s[0] < 0 || !informative(b.rows[s[0]:s[1]]) {
			dm.ZeroVarianceGroups++
			continue
		}
		if len(keep) < t.Cfg.Train.PromptsPerStep {
			keep = append(keep, i)
			dm.KeptRows += s[1] - s[0]
		}
	}
	dm.KeptPrompts = len(keep)
	dm.Oversampling = float64(dm.GeneratedRows) / float64(max(dm.KeptRows, 1))
	met.DynamicSamplingMetrics = dm
	return keep
}

// keptRows returns the rows of the kept prompts, in order, and for every
// generated row its index among them (−1: not trained on).
func keptRows(b stepBatch, keep []int) ([]rowData, []int) {
	rowOf := make([]int, len(b.rows))
	if len(keep) == len(b.prompts) {
		for i := range rowOf {
			rowOf[i] = i
		}
		return b.rows, rowOf
	}
	kept := make([]bool, len(b.prompts))
	for _, i := range keep {
		kept[i] = true
	}
	var rows []rowData
	for i, r := range b.rows {
		rowOf[i] = -1
		if kept[r.prompt] {
			rowOf[i] = len(rows)
			rows = append(rows, r)
		}
	}
	return rows, rowOf
}

// OverlongMetrics say how often loss.overlong acted (over every
// generated row of the step).
type OverlongMetrics struct {
	FilteredFrac  float64 `json:"overlong_filtered_frac"`
	PenalizedFrac float64 `json:"overlong_penalized_frac"`
	PenaltyMean   float64 `json:"overlong_penalty_mean"`
}

// overlongMetrics is nil when loss.overlong does nothing.
func overlongMetrics(o grpo.OverlongConfig, rows []rowData) *OverlongMetrics {
	if !o.Filter && o.SoftPenaltyTokens == 0 {
		return nil
	}
	var om OverlongMetrics
	for _, r := range rows {
		if r.masked {
			om.FilteredFrac++
		}
		if r.penalty != 0 {
			om.PenalizedFrac++
		}
		om.PenaltyMean += r.penalty
	}
	n := float64(max(len(rows), 1))
	om.FilteredFrac, om.PenalizedFrac, om.PenaltyMean = om.FilteredFrac/n, om.PenalizedFrac/n, om.PenaltyMean/n
	return &om
}

// correct sets the rows' importance weights and mismatch figures from
// their old and sampler log-probs (correction.go), when the sampler drew
// from the policy itself.
func (t *Trainer) correct(rows []rowData) error {
	if !t.Cfg.samplerIsPolicy() {
		return nil
	}
	for i := range rows {
		r := &rows[i]
		if r.sampler == nil {
			continue
		}
		w, m, err := t.Cfg.Loss.RolloutCorrection.Weights(r.old, r.sampler)
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		r.is, r.mismatch = w, &m
	}
	return nil
}
