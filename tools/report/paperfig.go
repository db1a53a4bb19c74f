package report

// paperfig.go: the figures and key numbers of the paper's measurements
// (paper.go computes them; docs/algorithm.md §8.1 defines them): lead–lag
// Δμ, WSE with σ̂ estimated once, Figure 1's tail bars, the high-bin budget
// share, validation by difficulty bin, AIME 24/25 averaged and the peak
// checkpoint.

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const secPaper = "The paper's measurements"

// Measure is one key number of a report, shown in index.html's table and
// printed by gdrotrain plot.
type Measure struct {
	Name, Value, Note string
}

// fmtVec formats per-class values as "0: 0.45, 1: 0.33, …" with the
// run's bin ticks (NaN classes left out).
func fmtVec(labels []string, v []float64, format string) string {
	var parts []string
	for c, x := range v {
		if math.IsNaN(x) {
			continue
		}
		parts = append(parts, shortTick(labels, c)+": "+fmt.Sprintf(format, x))
	}
	return strings.Join(parts, ", ")
}

// meanOf is the mean of s.Y (NaN when empty).
func meanOf(s Series) float64 {
	if s.Len() == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, y := range s.Y {
		t += y
	}
	return t / float64(s.Len())
}

// tailMeanOf is the mean of s.Y over the points with X ≥ from.
func tailMeanOf(s Series, from float64) float64 {
	var t Series
	for i, x := range s.X {
		if x >= from-1e-9 {
			t.X, t.Y = append(t.X, x), append(t.Y, s.Y[i])
		}
	}
	return meanOf(t)
}

// paperMeasures are the key numbers of the paper's measurements that the
// run has data for.
func paperMeasures(run *Run) []Measure {
	var ms []Measure
	from := run.TailStart(TailQuantile)
	tailNote := fmt.Sprintf("steps ≥ %g, the 60th percentile of the steps", roundSig(from, 6))
	if g, ok := run.LeadLagGap(DistWeight); ok {
		ms = append(ms, Measure{"Lead–lag Δμ = μ_weight − μ_data", fmt.Sprintf("%+.3f (mean), %+.3f (tail mean)", meanOf(g), tailMeanOf(g, from)),
			"mean bin index under Prompt-GDRO's weights minus under the prompt share; < 0: the weights sit on harder bins (§8.1)"})
	}
	if g, ok := run.LeadLagGap(DistRollout); ok {
		ms = append(ms, Measure{"Lead–lag Δμ = μ_rollout − μ_data", fmt.Sprintf("%+.3f (mean), %+.3f (tail mean)", meanOf(g), tailMeanOf(g, from)),
			"the same with the share of the rollouts instead of the weights (§8.1)"})
	}
	if _, _, ratio, ok := run.PaperWSE(); ok {
		sigma, _, _ := run.SigmaHat()
		ms = append(ms, Measure{"WSE / WSE uniform (σ̂ once per run)", fmt.Sprintf("%.4f (mean), %.4f (tail mean)", meanOf(ratio), tailMeanOf(ratio, from)),
			"Σ_b q_t(b)·σ̂_b/√n_b(t) over the same with n_b = n̄; σ̂ per bin: " + fmtVec(run.Labels, sigma, "%.3f") + " (§8.1)"})
	}
	if tb, ok := run.TailWeights(); ok {
		ms = append(ms, Measure{"Figure 1: Prompt-GDRO p_b, tail average", fmtVec(run.Labels, tb.Mean, "%.3f"),
			fmt.Sprintf("%s (%d steps); uniform 1/%d = %.3f", tailNote, tb.Steps, len(run.Labels), tb.Uniform)})
	}
	if tb, ok := run.TailRollouts(); ok {
		ms = append(ms, Measure{"Figure 1: rollouts per prompt, tail average", fmtVec(run.Labels, tb.Mean, "%.2f"),
			fmt.Sprintf("%s (%d steps); uniform n̄ = %.2f", tailNote, tb.Steps, tb.Uniform)})
	}
	if b, p, ok := run.HighBinBudget(); ok {
		ms = append(ms, Measure{"High-bin budget share, tail mean", fmt.Sprintf("%.3f (prompt share %.3f)", tailMeanOf(b, from), tailMeanOf(p, from)),
			fmt.Sprintf("share of the rollouts to the hardest %d of %d bins, %s", run.HighBins(), run.NumBins(), tailNote)})
	}
	if vb, err := run.ValByBin(); err == nil && vb.Worst.Len() > 0 {
		k := vb.Worst.Len() - 1
		ms = append(ms, Measure{"Validation worst-bin accuracy", fmt.Sprintf("%.3f at step %d (bin %d); %.3f at step 0", vb.Worst.Y[k], int(vb.Worst.X[k]), vb.WorstB[k], vb.Worst.Y[0]),
			"bins of the step-0 pass rate, the classifier's edges " + fmtEdges(vb.Edges) + " (§8.1)"})
	}
	pk, hasPeak := run.PeakCheckpoint()
	if hasPeak {
		state := "not kept"
		if pk.Exists {
			state = "kept"
		}
		if run.Dir == "" {
			state = "no run folder to look in"
		}
		ms = append(ms, Measure{"Peak checkpoint", fmt.Sprintf("step %d (mean accuracy %.4f), checkpoint %s", pk.Step, pk.MeanAcc, state),
			pk.Checkpoint + "; the validation with the highest mean accuracy, the earliest on ties (§8.1)"})
	}
	if mean, pass, names, ok := run.AIMEAverage(); ok {
		v := ""
		if mean.Len() > 0 {
			v = fmt.Sprintf("%s %.4f at step %d", mean.Label, mean.Y[mean.Len()-1], int(mean.X[mean.Len()-1]))
			if hasPeak {
				for i, x := range mean.X {
					if int(x) == pk.Step {
						v += fmt.Sprintf(", %.4f at the peak", mean.Y[i])
					}
				}
			}
		}
		if pass.Len() > 0 {
			if v != "" {
				v += "; "
			}
			v += fmt.Sprintf("%s %.4f at step %d", pass.Label, pass.Y[pass.Len()-1], int(pass.X[pass.Len()-1]))
		}
		ms = append(ms, Measure{"AIME (2024 + 2025) / 2", v, names[0] + " and " + names[1] + " averaged, as the paper's AIME column"})
	}
	return ms
}

// notApplied is a caption sentence for weights that were logged but not
// applied, or "".
func notApplied(run *Run) string {
	n := run.WeightsNotApplied()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" At %d of %d steps the weights were computed but not applied (weights_applied false): they show what Prompt-GDRO "+
		"would have done, not what the gradient saw.", n, len(run.Records))
}

func fmtEdges(e []float64) string {
	s := make([]string, len(e))
	for i, x := range e {
		s[i] = fmt.Sprintf("%g", x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// paperFigures are the dynamics and Figure 1 bars of §8.1.
func paperFigures(run *Run) ([]Figure, []Skipped) {
	var figs []Figure
	var skipped []Skipped
	skip := func(name, title, reason string) {
		skipped = append(skipped, Skipped{Section: secPaper, Name: name, Title: title, Reason: reason})
	}
	title := func(s string) string { return s + " — " + run.Name }

	// Lead–lag.
	gw, okW := run.LeadLagGap(DistWeight)
	gr, okR := run.LeadLagGap(DistRollout)
	if okW || okR {
		data, _ := run.MeanBinUnder(DistShare)
		data.Label = "μ_data (prompt share)"
		mus := []Series{data}
		var gaps []Series
		if okW {
			w, _ := run.MeanBinUnder(DistWeight)
			w.Label = "μ_weight (Prompt-GDRO p_b)"
			mus = append(mus, w)
			gaps = append(gaps, gw)
		}
		if okR {
			r, _ := run.MeanBinUnder(DistRollout)
			r.Label = "μ_rollout (rollout share)"
			mus = append(mus, r)
			gr.Label = "Δμ = μ_rollout − μ_data"
			gaps = append(gaps, gr)
		}
		if okW {
			gaps[0].Label = "Δμ = μ_weight − μ_data"
		}
		figTitle := "Lead–lag Δμ(t) = μ_weight(t) − μ_data(t)"
		if !okW {
			figTitle = "Lead–lag Δμ(t) = μ_rollout(t) − μ_data(t)"
		}
		top := newPlot(title("Lead–lag: mean bin under the controller vs the data"), "step", "mean bin index (0 = hardest)")
		stepAxis(top)
		cap := addSmoothLines(top, mus, 0, true)
		bot := newPlot("", "step", "Δμ (< 0: on harder bins than the data)")
		stepAxis(bot)
		lo, hi := xRange(gaps...)
		addHLine(bot, 0, lo, hi, "")
		addSmoothLines(bot, gaps, 1, true)
		figs = append(figs, Figure{Name: "dyn_lead_lag", Section: secPaper, Title: figTitle,
			Caption: "The paper's lead–lag (docs/algorithm.md §8.1). Top: the mean bin index μ(t) = Σ_b b·d_b / Σ_b d_b under the prompt share " +
				"(μ_data, bin_share), under Prompt-GDRO's normalised weights p_b (μ_weight, bin_weight) and, for Rollout-GDRO, under the share of " +
				"the step's rollouts (μ_rollout); accbin_excl is not counted and each distribution is renormalised over the bins. Bottom: the gap " +
				"Δμ(t) = μ_weight(t) − μ_data(t) (and μ_rollout − μ_data). Bin 0 is the hardest, so a negative gap means the controller puts its " +
				"mass on harder bins than the data hold: it leads the curriculum. Not the same Δμ as dmu, the shadow price's step change, which " +
				"dyn_lead_lag_corr correlates with the mean bin." + notApplied(run) + cap,
			Width: sizeTall[0], Height: sizeTall[1], draw: stacked(top, bot)})
	} else {
		skip("dyn_lead_lag", "Lead–lag Δμ(t) = μ_weight(t) − μ_data(t)", "no Prompt-GDRO weights (bin_weight) or Rollout-GDRO fields (bin_n)")
	}

	// WSE with σ̂ once per run.
	if wse, uni, ratio, ok := run.PaperWSE(); ok {
		sigma, pbar, _ := run.SigmaHat()
		wse.Label, uni.Label = "WSE of the allocation used", "WSE uniform (every prompt at the mean budget)"
		top := newPlot(title("Weighted standard error, σ estimated once per run"), "step", "WSE")
		stepAxis(top)
		cap := addSmoothLines(top, []Series{wse, uni}, 0, true)
		yFloor(top)
		ratio.Label = "WSE / WSE uniform"
		bot := newPlot("", "step", "ratio (< 1: better than uniform)")
		stepAxis(bot)
		lo, hi := xRange(ratio)
		addHLine(bot, 1, lo, hi, "uniform")
		addSmoothLines(bot, []Series{ratio}, 0, true)
		if ratio.Len() == 0 {
			cap += " The ratio is undefined at every step (WSE uniform is 0): σ̂_b = 0 in every bin sampled, no rollout solved yet or every one."
		}
		figs = append(figs, Figure{Name: "dyn_wse", Section: secPaper, Title: "WSE(t) = Σ_b q_t(b)·σ̂_b/√n_b(t) against uniform",
			Caption: "The paper's weighted standard error (docs/algorithm.md §8.1). q_t(b) is the step's prompt share (bin_share), n_b(t) the rollouts " +
				"per prompt the bin received (bin_n_mean) and σ̂_b = sqrt(p̄_b(1 − p̄_b)) is estimated once from the whole run, p̄_b the bin's " +
				"correctness over all its rollouts (bin_acc weighted by bin_count·bin_n_mean): " + fmtVec(run.Labels, sigma, "%.3f") +
				" (p̄: " + fmtVec(run.Labels, pbar, "%.3f") + "). Uniform: every n_b = n̄(t) = Σ_b q_t(b)·n_b(t), the same budget. " +
				"Bottom: the ratio. The per-step proxy the controller logs (σ re-estimated every step) is dyn_wse_step." + cap,
			Width: sizeTall[0], Height: sizeTall[1], draw: stacked(top, bot)})
	} else {
		skip("dyn_wse", "WSE(t) = Σ_b q_t(b)·σ̂_b/√n_b(t) against uniform", "no bin_acc / bin_n_mean fields")
	}

	// Figure 1's bars.
	if tb, ok := run.TailWeights(); ok {
		figs = append(figs, tailFigure(run, tb, "paper_tail_weight", "Figure 1: Prompt-GDRO probability per bin, tail average",
			"tail average of p_b", fmt.Sprintf("uniform 1/%d", len(run.Labels)),
			fmt.Sprintf("Figure 1's Prompt-GDRO bars (docs/algorithm.md §8.1): Prompt-GDRO's probability p_b (bin_weight) averaged over the steps at or above "+
				"the 60th percentile of the run's steps (steps ≥ %g, %d steps; 0 where the bin has no prompts, so the bars sum to 1), against the uniform "+
				"line 1/%d. Dots: the same average for uniform weights over the bins present at each step, the fair reference when some bins are "+
				"empty. Values: %s.%s", roundSig(tb.From, 6), tb.Steps, len(run.Labels), fmtVec(run.Labels, tb.Mean, "%.3f"), notApplied(run))))
	} else {
		skip("paper_tail_weight", "Figure 1: Prompt-GDRO probability per bin, tail average", "no Prompt-GDRO fields (bin_weight)")
	}
	if tb, ok := run.TailRollouts(); ok {
		figs = append(figs, tailFigure(run, tb, "paper_tail_rollouts", "Figure 1: Rollout-GDRO rollouts per prompt, tail average",
			"tail average of rollouts per prompt", fmt.Sprintf("uniform: the mean budget, %.2f", tb.Uniform),
			fmt.Sprintf("Figure 1's Rollout-GDRO bars (docs/algorithm.md §8.1): rollouts per prompt each bin received (bin_n_mean), averaged over "+
				"the steps ≥ %g (the 60th percentile of the run's steps, %d steps) at which the bin had prompts, against the uniform n̄ (the tail "+
				"average of Σ_b q̂_b·n_b). A bin never present in the tail has no bar. Values: %s.",
				roundSig(tb.From, 6), tb.Steps, fmtVec(run.Labels, tb.Mean, "%.2f"))))
	} else {
		skip("paper_tail_rollouts", "Figure 1: Rollout-GDRO rollouts per prompt, tail average", "no Rollout-GDRO fields (bin_n)")
	}

	// High-bin budget share.
	if b, p, ok := run.HighBinBudget(); ok {
		f, pl := lineFigure("dyn_high_bin_budget", secPaper, title("High-bin budget share"),
			fmt.Sprintf("Share of each step's rollouts that went to the high bins, the hardest %d of %d (bins 0–%d; the paper numbers bins the other "+
				"way, so its high bins are our low ones; accbin_excl not counted), beside the prompt share of the same bins, which is what the "+
				"budget share would be with n̄ rollouts for every prompt (docs/algorithm.md §8.1).", run.HighBins(), run.NumBins(), run.HighBins()-1),
			"share", []Series{b, p}, true, true)
		pl.Y.Min = 0
		figs = append(figs, f)
	} else {
		skip("dyn_high_bin_budget", "High-bin budget share", "no Rollout-GDRO fields (bin_n)")
	}
	return figs, skipped
}

// tailFigure draws Figure 1's bars for one controller: the tail average
// per class against the uniform line (and, for weights, dots at the
// uniform-over-present reference).
func tailFigure(run *Run, tb TailBars, name, title, yLabel, uniLabel, caption string) Figure {
	C := len(run.Labels)
	vals := barValues(tb.Mean)
	p := newPlot(title+" — "+run.Name, "accuracy bin (0 = hardest)", yLabel)
	bars, err := plotter.NewBarChart(vals, vg.Points(math.Max(6, math.Min(28, 300/float64(C)))))
	if err != nil {
		panic(fmt.Sprintf("report: tail bars: %v", err))
	}
	bars.Color, bars.LineStyle.Width = lineColor(0), 0
	p.Add(bars)
	p.Legend.Add(yLabel, bars)
	ticks := make([]string, C)
	for c := range ticks {
		ticks[c] = shortTick(run.Labels, c)
	}
	p.NominalX(ticks...)
	addHLine(p, tb.Uniform, -0.5, float64(C)-0.5, uniLabel)
	if tb.UniformPresent != nil {
		xys := make(plotter.XYs, C)
		for c, u := range tb.UniformPresent {
			xys[c] = plotter.XY{X: float64(c), Y: u}
		}
		sc, err := plotter.NewScatter(xys)
		if err == nil {
			sc.GlyphStyle.Color = lineColor(1)
			sc.GlyphStyle.Radius = vg.Points(3)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
			p.Legend.Add("uniform over the bins present", sc)
		}
	}
	p.Y.Min = 0
	short, _, _ := strings.Cut(title, " — ")
	return Figure{Name: name, Section: secPaper, Title: short, Caption: caption,
		Width: sizeWide[0], Height: sizeWide[1], draw: singlePlot(p)}
}

// paperValidationFigures: validation accuracy per difficulty bin of the
// initial model, and AIME 24/25 averaged.
func paperValidationFigures(run *Run) ([]Figure, []Skipped) {
	if len(run.Val) == 0 {
		return nil, nil // validationFigures notes the missing file once
	}
	var figs []Figure
	var skipped []Skipped
	title := func(s string) string { return s + " — " + run.Name }
	if vb, err := run.ValByBin(); err == nil && vb.Worst.Len() > 0 {
		var series []Series
		for _, s := range vb.Acc {
			if s.Len() > 0 {
				series = append(series, s)
			}
		}
		f, p := lineFigure("val_bins", secValidation, title("Validation accuracy per difficulty bin"), "", "accuracy", series, true, false)
		w := vb.Worst
		w.Label = "worst bin"
		addDashed(p, w, 6)
		note := ""
		if len(vb.Skipped) > 0 {
			note = " Left out: " + strings.Join(vb.Skipped, "; ") + "."
		}
		f.Caption = fmt.Sprintf("Validation prompts grouped by the initial model's pass rate c/n at the step-0 validation, with the classifier's "+
			"edges %s (config.yaml gdro.classifier; bin 0 = hardest; no accbin_excl: a prompt solved 0 or n times goes to the lowest or highest bin). "+
			"Lines: each bin's mean accuracy (prompt_correct / n) at every validation; dashed: the worst bin's (docs/algorithm.md §8.1). Step 0 "+
			"defines the bins, so later changes include regression to the mean: bin 0 cannot fall and the top bin cannot rise by chance.%s",
			fmtEdges(vb.Edges), note)
		figs = append(figs, f)
	} else {
		reason := "no validation line with prompt_correct"
		if err != nil {
			reason = err.Error()
		}
		skipped = append(skipped, Skipped{Section: secValidation, Name: "val_bins", Title: "Validation accuracy per difficulty bin", Reason: reason})
	}
	if mean, pass, names, ok := run.AIMEAverage(); ok {
		f, _ := lineFigure("val_aime", secValidation, title("AIME 2024 and 2025 averaged"),
			fmt.Sprintf("The paper's AIME column: the mean of %s and %s at each validation, for mean@n and pass@n (docs/algorithm.md §8.1).", names[0], names[1]),
			"accuracy", []Series{mean, pass}, true, false)
		figs = append(figs, f)
	} else {
		skipped = append(skipped, Skipped{Section: secValidation, Name: "val_aime", Title: "AIME 2024 and 2025 averaged",
			Reason: "validation.jsonl lacks AIME 2024 or AIME 2025 (data_source HuggingFaceH4/aime_2024, MathArena/aime_2025)"})
	}
	return figs, skipped
}
