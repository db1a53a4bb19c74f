package report

// compare.go: figures that overlay several runs (gdrotrain plot --compare),
// e.g. GRPO against Prompt-GDRO: one line per run for every scalar that at
// least one run logs. Per-bin heatmaps and snapshots do not overlay; they
// stay in each run's own report (gdrotrain plot --run).

import (
	"fmt"
	"strings"
)

// compareSpec is one overlay figure: get returns a run's series (ok false
// when the run lacks it).
type compareSpec struct {
	name, section, title, yLabel, caption string
	floor                                 bool
	get                                   func(*Run) (Series, bool)
}

func scalarGetter(keys ...string) func(*Run) (Series, bool) {
	return func(r *Run) (Series, bool) {
		for _, k := range keys {
			if r.Has(k) {
				return r.Scalar(k), true
			}
		}
		return Series{}, false
	}
}

func massGetter(k int) func(*Run) (Series, bool) {
	return func(r *Run) (Series, bool) { return r.MassAtLeast(k) }
}

func valGetter(key string) func(*Run) (Series, bool) {
	return func(r *Run) (Series, bool) {
		s := r.ValScalar(key)
		return s, s.Len() > 0
	}
}

// benchGetter returns series i of a benchmark: 0 = mean@n, −1 = the largest
// k's pass@k.
func benchGetter(name string, last bool) func(*Run) (Series, bool) {
	return func(r *Run) (Series, bool) {
		ss := r.BenchSeries(name)
		if len(ss) == 0 {
			return Series{}, false
		}
		s := ss[0]
		if last {
			s = ss[len(ss)-1]
			if !strings.HasPrefix(s.Label, "pass@") {
				return Series{}, false
			}
		} else if !strings.HasPrefix(s.Label, "mean@") {
			return Series{}, false
		}
		return s, true
	}
}

func compareSpecs(runs []*Run) []compareSpec {
	specs := []compareSpec{
		{name: "cmp_mean_bin", section: secDynamics, title: "Mean accuracy-bin index", yLabel: "mean bin index (0 = hardest)",
			caption: "Mean accuracy-bin index of each step's prompts (mean_bin).", get: scalarGetter("mean_bin")},
	}
	for _, k := range massThresholds {
		specs = append(specs, compareSpec{name: fmt.Sprintf("cmp_mass_ge%d", k), section: secDynamics,
			title: fmt.Sprintf("Mass in bins ≥ %d", k), yLabel: "share of prompts", floor: true,
			caption: fmt.Sprintf("Share of each step's prompts in bins ≥ %d (accbin_excl not counted).", k), get: massGetter(k)})
	}
	specs = append(specs,
		compareSpec{name: "cmp_weight_entropy", section: secDynamics, title: "Prompt-GDRO weight entropy", yLabel: "entropy (nats)", floor: true,
			caption: "Entropy of the adversarial bin weights (weight_entropy).", get: scalarGetter("weight_entropy")},
		compareSpec{name: "cmp_dmu", section: secDynamics, title: "Δμ(t)", yLabel: "Δμ",
			caption: "Step change of Rollout-GDRO's shadow price (dmu).", get: scalarGetter("dmu")},
		compareSpec{name: "cmp_wse_step_ratio", section: secDynamics, title: "Per-step WSE proxy relative to the uniform allocation", yLabel: "wse_ratio",
			caption: "wse_ratio, the controller's per-step proxy (σ re-estimated each step; not the paper's WSE, which is cmp_wse_ratio): below 1 the " +
				"run's rollout allocation estimates the step's mean reward more precisely than n̄ rollouts per prompt.",
			get: scalarGetter("wse_ratio")},
		compareSpec{name: "cmp_wse_ratio", section: secPaper, title: "WSE relative to the uniform allocation (paper)", yLabel: "WSE / WSE uniform",
			caption: "The paper's WSE ratio, Σ_b q_t(b)·σ̂_b/√n_b(t) over the same with n_b = n̄, σ̂_b estimated once per run (docs/algorithm.md §8.1).",
			get: func(r *Run) (Series, bool) {
				_, _, ratio, ok := r.PaperWSE()
				return ratio, ok && ratio.Len() > 0
			}},
		compareSpec{name: "cmp_lead_lag", section: secPaper, title: "Lead–lag Δμ = μ_weight − μ_data", yLabel: "Δμ (< 0: harder than the data)",
			caption: "The paper's lead–lag: mean bin index under Prompt-GDRO's weights minus under the prompt share (docs/algorithm.md §8.1).",
			get:     func(r *Run) (Series, bool) { return r.LeadLagGap(DistWeight) }},
		compareSpec{name: "cmp_high_bin_budget", section: secPaper, title: "High-bin budget share", yLabel: "share of the rollouts", floor: true,
			caption: "Share of each step's rollouts that went to the hardest half of the bins (docs/algorithm.md §8.1).",
			get: func(r *Run) (Series, bool) {
				b, _, ok := r.HighBinBudget()
				return b, ok
			}},
		compareSpec{name: "cmp_mu", section: secDynamics, title: "Shadow price μ(t)", yLabel: "μ", floor: true,
			caption: "Rollout-GDRO's shadow price μ (mu).", get: scalarGetter("mu")},
	)
	for _, sp := range trainSpecs {
		f := sp.fields[0]
		title := sp.title
		if len(sp.fields) > 1 { // the overlay shows the first field only
			title += " (" + f.label + ")"
		}
		specs = append(specs, compareSpec{name: "cmp_" + strings.TrimPrefix(sp.name, "train_"), section: secTraining,
			title: title, yLabel: sp.yLabel, floor: sp.floor, caption: sp.caption,
			get: scalarGetter(append([]string{f.key}, f.fallback...)...)})
	}
	specs = append(specs,
		compareSpec{name: "cmp_val_mean_acc", section: secValidation, title: "Validation mean accuracy", yLabel: "accuracy", floor: true,
			caption: "Mean accuracy over all validation prompts and samples (mean_acc).", get: valGetter("mean_acc")},
		compareSpec{name: "cmp_val_pooled_pass", section: secValidation, title: "Validation pooled pass@n", yLabel: "accuracy", floor: true,
			caption: "Pooled pass@n over all validation prompts (pooled_pass_at_n).", get: valGetter("pooled_pass_at_n")},
		compareSpec{name: "cmp_val_worst", section: secValidation, title: "Validation worst benchmark", yLabel: "accuracy", floor: true,
			caption: "Mean accuracy of the worst benchmark at each validation (worst_group_acc).", get: valGetter("worst_group_acc")},
		compareSpec{name: "cmp_val_worst_bin", section: secValidation, title: "Validation worst difficulty bin", yLabel: "accuracy", floor: true,
			caption: "Accuracy of the worst bin when the validation prompts are grouped by the initial model's pass rate (docs/algorithm.md §8.1).",
			get: func(r *Run) (Series, bool) {
				vb, err := r.ValByBin()
				if err != nil {
					return Series{}, false
				}
				return vb.Worst, vb.Worst.Len() > 0
			}},
		compareSpec{name: "cmp_val_aime", section: secValidation, title: "AIME 2024 and 2025 averaged: mean@n", yLabel: "accuracy", floor: true,
			caption: "The paper's AIME column, the mean of AIME 2024 and AIME 2025 mean@n (docs/algorithm.md §8.1).",
			get: func(r *Run) (Series, bool) {
				m, _, _, ok := r.AIMEAverage()
				return m, ok && m.Len() > 0
			}},
	)
	seen := map[string]bool{}
	var benches []string
	for _, r := range runs {
		for _, b := range r.Benchmarks() {
			if !seen[b] {
				seen[b] = true
				benches = append(benches, b)
			}
		}
	}
	for i, b := range benches {
		specs = append(specs,
			compareSpec{name: fmt.Sprintf("cmp_val_%02d_%s_mean", i+1, fileSafe(b)), section: secValidation,
				title: "Validation " + b + ": mean@n", yLabel: "accuracy", floor: true,
				caption: "Benchmark " + b + ": mean accuracy over the n samples per prompt.", get: benchGetter(b, false)},
			compareSpec{name: fmt.Sprintf("cmp_val_%02d_%s_pass", i+1, fileSafe(b)), section: secValidation,
				title: "Validation " + b + ": pass@k (largest k)", yLabel: "accuracy", floor: true,
				caption: "Benchmark " + b + ": unbiased pass@k for the largest k each run logs (legend).", get: benchGetter(b, true)})
	}
	return specs
}

// compareFigures overlays the runs; a figure no run has data for is
// skipped, and a caption names the runs that lack it.
func compareFigures(runs []*Run) ([]Figure, []Skipped) {
	var figs []Figure
	var skipped []Skipped
	for _, sp := range compareSpecs(runs) {
		var series []Series
		var lacking []string
		for _, r := range runs {
			s, ok := sp.get(r)
			if !ok {
				lacking = append(lacking, r.Name)
				continue
			}
			if strings.HasPrefix(s.Label, "pass@") {
				s.Label = r.Name + " (" + s.Label + ")"
			} else {
				s.Label = r.Name
			}
			series = append(series, s)
		}
		if len(series) == 0 {
			skipped = append(skipped, Skipped{Section: sp.section, Name: sp.name, Title: sp.title, Reason: "no run logs it"})
			continue
		}
		caption := sp.caption
		if len(lacking) > 0 {
			caption += " Not available for: " + strings.Join(lacking, ", ") + "."
		}
		p := newPlot(sp.title, "step", sp.yLabel)
		stepAxis(p)
		caption += addSmoothLines(p, series, 0, true)
		if sp.floor {
			yFloor(p)
		}
		figs = append(figs, Figure{Name: sp.name, Section: sp.section, Title: sp.title, Caption: caption,
			Width: sizeWide[0], Height: sizeWide[1], draw: singlePlot(p)})
	}
	return figs, skipped
}
