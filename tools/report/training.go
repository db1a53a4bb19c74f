package report

// training.go: training curves from the trainer's metrics.jsonl and
// validation curves from validation.jsonl, one figure per benchmark.

import (
	"fmt"
	"math"
	"strings"
)

const (
	secTraining   = "Training curves"
	secValidation = "Validation"
)

// trainField is one line of a training figure: a metrics key, with
// fallbacks read when the key is absent (gdro-sim logs acc, the trainer
// acc_mean).
type trainField struct {
	key, label string
	fallback   []string
}

// trainSpec is one training figure.
type trainSpec struct {
	name, title, yLabel, caption string
	fields                       []trainField
	floor                        bool
}

// trainSpecs are the training figures, in display order.
var trainSpecs = []trainSpec{
	{name: "train_reward", title: "Reward", yLabel: "mean reward", floor: false,
		caption: "Mean verifier reward over the step's rollouts (reward_mean).",
		fields:  []trainField{{key: "reward_mean", label: "reward"}}},
	{name: "train_acc", title: "Training accuracy", yLabel: "fraction correct", floor: true,
		caption: "Fraction of the step's rollouts scored correct (acc_mean; acc in gdro-sim runs).",
		fields:  []trainField{{key: "acc_mean", label: "accuracy", fallback: []string{"acc"}}}},
	{name: "train_response_len", title: "Response length", yLabel: "tokens", floor: true,
		caption: "Mean generated response length in tokens (response_len_mean).",
		fields:  []trainField{{key: "response_len_mean", label: "mean response length"}}},
	{name: "train_truncation", title: "Truncation rate", yLabel: "fraction truncated", floor: true,
		caption: "Fraction of rollouts cut at the token limit without finishing (truncation_rate).",
		fields:  []trainField{{key: "truncation_rate", label: "truncated"}}},
	{name: "train_kl", title: "KL divergence", yLabel: "KL (nats/token)", floor: true,
		caption: "Per-token KL to the frozen reference policy (kl) and between the rollout policy and the policy being updated (ppo_kl, the mean of −log ratio).",
		fields:  []trainField{{key: "kl", label: "KL to reference"}, {key: "ppo_kl", label: "KL to rollout policy (ppo_kl)"}}},
	{name: "train_entropy", title: "Policy entropy", yLabel: "entropy (nats/token)", floor: true,
		caption: "Mean per-token entropy of the policy on its rollouts (entropy).",
		fields:  []trainField{{key: "entropy", label: "entropy"}}},
	{name: "train_clip", title: "Clip fraction", yLabel: "fraction of tokens", floor: true,
		caption: "Fraction of the step's trained tokens whose probability ratio was clipped (clip_frac) and fraction clipped at the lower bound (lower_clip_frac), both over all tokens.",
		fields:  []trainField{{key: "clip_frac", label: "clipped"}, {key: "lower_clip_frac", label: "clipped below"}}},
	{name: "train_grad_norm", title: "Gradient norm", yLabel: "global L2 norm", floor: true,
		caption: "Global L2 norm of the gradient before clipping, averaged over the step's optimizer updates (grad_norm).",
		fields:  []trainField{{key: "grad_norm", label: "grad norm"}}},
	{name: "train_throughput", title: "Throughput", yLabel: "tokens / s", floor: true,
		caption: "Generation throughput (gen_tokens_per_s: generated tokens per second of generation) and training throughput " +
			"(train_tokens_per_s: tokens per second of log-prob and update passes).",
		fields: []trainField{{key: "gen_tokens_per_s", label: "generation"}, {key: "train_tokens_per_s", label: "training"}}},
	{name: "train_mismatch", title: "Sampler / trainer mismatch", yLabel: "nats/token, fraction", floor: true,
		caption: "Gap between the sampler's log-probs and the trainer's old log-probs of the same tokens (docs/algorithm.md §5.10): " +
			"mean |Δ log-prob| (mismatch_logp_abs_mean), KL(sampler ‖ trainer) by the k3 estimator (mismatch_kl) and the share of tokens " +
			"whose ratio leaves the correction's band (mismatch_out_of_band).",
		fields: []trainField{{key: "mismatch_logp_abs_mean", label: "mean |Δ log-prob|"}, {key: "mismatch_kl", label: "KL(sampler ‖ trainer)"},
			{key: "mismatch_out_of_band", label: "out of band"}}},
	{name: "train_is_weights", title: "Rollout-correction weights", yLabel: "weight, fraction", floor: true,
		caption: "Importance weights of loss.rollout_correction over the step's tokens (is_weight_mean, is_weight_min, is_weight_max; all 1 in mode none) " +
			"and the shares of tokens truncated at the cap (is_truncated_frac) or masked (is_masked_frac).",
		fields: []trainField{{key: "is_weight_mean", label: "mean"}, {key: "is_weight_min", label: "min"}, {key: "is_weight_max", label: "max"},
			{key: "is_truncated_frac", label: "truncated"}, {key: "is_masked_frac", label: "masked"}}},
	{name: "train_dynamic_sampling", title: "Dynamic sampling", yLabel: "ratio", floor: true,
		caption: "Generated rows per trained row (ds_oversampling, 1 when nothing is dropped) and generation rounds per step (ds_rounds); " +
			"ds_cap_hit in metrics.jsonl marks steps that ran out of rounds (docs/algorithm.md §5.12).",
		fields: []trainField{{key: "ds_oversampling", label: "over-sampling"}, {key: "ds_rounds", label: "rounds"}}},
	{name: "train_overlong", title: "Overlong responses", yLabel: "fraction, reward", floor: false,
		caption: "Share of rows the overlong filter took out of the loss (overlong_filtered_frac), share with a soft overlong penalty " +
			"(overlong_penalized_frac) and the mean penalty (overlong_penalty_mean) (docs/algorithm.md §5.11).",
		fields: []trainField{{key: "overlong_filtered_frac", label: "filtered"}, {key: "overlong_penalized_frac", label: "penalised"},
			{key: "overlong_penalty_mean", label: "mean penalty"}}},
}

// optionalSpecs are figures of options a run may not use: their absence is
// not noted.
var optionalSpecs = map[string]bool{"train_mismatch": true, "train_is_weights": true, "train_dynamic_sampling": true, "train_overlong": true}

// fieldSeries returns the series of f in run (its fallback when the key is
// absent), ok false when neither is logged.
func fieldSeries(run *Run, f trainField) (Series, bool) {
	for _, k := range append([]string{f.key}, f.fallback...) {
		if run.Has(k) {
			s := run.Scalar(k)
			s.Label = f.label
			return s, true
		}
	}
	return Series{}, false
}

func trainingFigures(run *Run) ([]Figure, []Skipped) {
	var figs []Figure
	var skipped []Skipped
	var absent []string
	for _, sp := range trainSpecs {
		var series []Series
		var keys []string
		for _, f := range sp.fields {
			keys = append(keys, f.key)
			if s, ok := fieldSeries(run, f); ok {
				series = append(series, s)
			}
		}
		if len(series) == 0 && optionalSpecs[sp.name] {
			continue
		}
		if len(series) == 0 {
			absent = append(absent, fmt.Sprintf("%s (%s)", sp.title, strings.Join(keys, ", ")))
			skipped = append(skipped, Skipped{Section: secTraining, Name: sp.name, Title: sp.title,
				Reason: "no " + strings.Join(keys, " / ") + " field"})
			continue
		}
		f, _ := lineFigure(sp.name, secTraining, sp.title+" — "+run.Name, sp.caption, sp.yLabel, series, sp.floor, true)
		figs = append(figs, f)
	}
	// A gdro-sim or gdro-replay file has none of the training fields: one
	// note says so instead of eight.
	if len(absent) >= len(trainSpecs)-len(optionalSpecs)-1 {
		names := make([]string, len(skipped))
		for i, s := range skipped {
			names[i] = s.Title
		}
		skipped = []Skipped{{Section: secTraining, Name: "train_*", Title: strings.Join(names, ", "),
			Reason: "no training fields (reward_mean, kl, entropy, …) in " + run.MetricsPath + ": a gdro-sim / gdro-replay file, not a trainer run"}}
	}
	return figs, skipped
}

func validationFigures(run *Run) ([]Figure, []Skipped) {
	if len(run.Val) == 0 {
		reason := "no " + ValidationFile
		if run.Dir != "" {
			reason += " in " + run.Dir
		}
		if run.ValPath != "" {
			reason = run.ValPath + " has no records"
		}
		return nil, []Skipped{{Section: secValidation, Name: "val_*", Title: "Validation curves", Reason: reason}}
	}
	var figs []Figure
	all := []Series{run.ValScalar("mean_acc"), run.ValScalar("pooled_pass_at_n"), run.ValScalar("worst_group_acc")}
	all[0].Label, all[1].Label, all[2].Label = "mean accuracy (mean@n)", "pooled pass@n", "worst benchmark's mean accuracy"
	f, _ := lineFigure("val_all", secValidation, "Validation: all benchmarks — "+run.Name,
		"Over all validation prompts: mean accuracy of the n samples per prompt (mean_acc), pooled pass@n (a prompt counts as solved when "+
			"any of its n samples is correct; pooled_pass_at_n), and the mean accuracy of the worst benchmark (worst_group_acc).",
		"accuracy", all, true, false)
	figs = append(figs, f)
	for i, name := range run.Benchmarks() {
		series := run.BenchSeries(name)
		f, _ := lineFigure(fmt.Sprintf("val_%02d_%s", i+1, fileSafe(name)), secValidation, "Validation: "+name+" — "+run.Name,
			fmt.Sprintf("Benchmark %s: mean accuracy over the n samples per prompt (mean@n) and the unbiased pass@k estimate for each k logged.", name),
			"accuracy", mergePass1(series), true, false)
		figs = append(figs, f)
	}
	return figs, nil
}

// mergePass1 drops the pass@1 line when it equals mean@n at every point
// (the unbiased pass@1 is the mean accuracy) and says so in the mean's
// label, so that one line does not hide the other.
func mergePass1(ss []Series) []Series {
	if len(ss) < 2 || !strings.HasPrefix(ss[0].Label, "mean@") || ss[1].Label != "pass@1" || ss[0].Len() != ss[1].Len() {
		return ss
	}
	for i := range ss[0].X {
		if ss[0].X[i] != ss[1].X[i] || math.Abs(ss[0].Y[i]-ss[1].Y[i]) > 1e-9 {
			return ss
		}
	}
	out := append([]Series{ss[0]}, ss[2:]...)
	out[0].Label += " = pass@1"
	return out
}

// fileSafe maps a benchmark name to a file-name fragment.
func fileSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "benchmark"
	}
	return b.String()
}
