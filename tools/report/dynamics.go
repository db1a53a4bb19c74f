package report

// dynamics.go: scalar curriculum dynamics over steps (mean bin index, mass
// in the easier bins, weight entropy, the correlation of the shadow price's
// change with the mean bin, the per-step WSE proxy against the uniform
// allocation, μ) and the four snapshots of paired bars. The paper's own
// lead–lag and WSE are in paperfig.go.

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const (
	secDynamics  = "Curriculum dynamics"
	secSnapshots = "Snapshots"
)

// massThresholds are the bins whose upward mass the issue asks for.
var massThresholds = []int{3, 8}

// lineFigure is a one-panel figure of series over steps.
// With smooth, long series are drawn with their moving average
// (addSmoothLines).
func lineFigure(name, section, title, caption, yLabel string, series []Series, floor, smooth bool) (Figure, *plot.Plot) {
	p := newPlot(title, "step", yLabel)
	stepAxis(p)
	if smooth {
		caption += addSmoothLines(p, series, 0, len(series) > 1)
	} else {
		addLines(p, series, 0, len(series) > 1)
	}
	if floor {
		yFloor(p)
	}
	short, _, _ := strings.Cut(title, " — ") // index.html names the run once
	return Figure{Name: name, Section: section, Title: short, Caption: caption,
		Width: sizeWide[0], Height: sizeWide[1], draw: singlePlot(p)}, p
}

func dynamicsFigures(run *Run) ([]Figure, []Skipped) {
	var figs []Figure
	var skipped []Skipped
	skip := func(name, title, reason string) {
		skipped = append(skipped, Skipped{Section: secDynamics, Name: name, Title: title, Reason: reason})
	}
	title := func(s string) string { return s + " — " + run.Name }

	if run.Has("mean_bin") {
		mb := run.Scalar("mean_bin")
		mb.Label = "mean bin index"
		f, p := lineFigure("dyn_mean_bin", secDynamics, title("Mean accuracy-bin index"),
			fmt.Sprintf("Mean over each step's prompts of their accuracy-bin index (mean_bin; 0 = hardest, %d = easiest; accbin_excl not counted). "+
				"It rises as the policy learns and prompts move to easier bins.", run.NumBins()-1),
			"mean bin index (0 = hardest)", []Series{mb}, false, true)
		p.Y.Min = math.Min(p.Y.Min, 0)
		figs = append(figs, f)
	} else {
		skip("dyn_mean_bin", "Mean accuracy-bin index", "no mean_bin field")
	}

	var mass []Series
	var missing []string
	for _, k := range massThresholds {
		if s, ok := run.MassAtLeast(k); ok {
			mass = append(mass, s)
		} else {
			missing = append(missing, fmt.Sprintf("≥ %d", k))
		}
	}
	if len(mass) > 0 {
		cap := "Share of each step's prompts in bins ≥ k (easier), Σ_{b ≥ k} bin_share[b], accbin_excl not counted."
		if len(missing) > 0 {
			cap += fmt.Sprintf(" The run has %d bins, so there is no mass in bins %v.", run.NumBins(), missing)
		}
		f, p := lineFigure("dyn_mass", secDynamics, title("Mass in the easier bins"), cap, "share of prompts", mass, true, true)
		p.Y.Min = 0
		p.Y.Max = math.Max(p.Y.Max, 0.1)
		figs = append(figs, f)
	} else {
		skip("dyn_mass", "Mass in the easier bins", fmt.Sprintf("the run has %d bins: no bin ≥ 3", run.NumBins()))
	}

	if run.Has("weight_entropy") {
		h := run.Scalar("weight_entropy")
		h.Label = "entropy of the weights"
		f, p := lineFigure("dyn_weight_entropy", secDynamics, title("Prompt-GDRO weight entropy"),
			"Entropy H(p) of the adversarial bin weights in nats (weight_entropy), over the bins present at the step; "+
				"the dashed line is its maximum ln(#bins present), reached by uniform weights. Lower means the weights concentrate on few bins.",
			"entropy (nats)", nil, true, false)
		addLines(p, []Series{h}, 0, true)
		addDashed(p, run.MaxEntropy(), 1)
		figs = append(figs, f)
	} else {
		skip("dyn_weight_entropy", "Prompt-GDRO weight entropy", "no Prompt-GDRO fields (weight_entropy)")
	}

	if lags, corrs, ok := run.LeadLagCorr(3); ok {
		figs = append(figs, leadLagFigure(run, lags, corrs))
	} else {
		skip("dyn_lead_lag_corr", "Shadow price change vs the mean bin (correlation)", "no Rollout-GDRO fields (dmu)")
	}

	if run.Has("wse") && run.Has("wse_uniform") {
		figs = append(figs, wseFigure(run))
	} else {
		skip("dyn_wse_step", "Per-step WSE proxy against the uniform allocation", "no wse / wse_uniform fields")
	}

	if run.Has("mu") {
		mu := run.Scalar("mu")
		mu.Label = "μ"
		f, _ := lineFigure("dyn_mu", secDynamics, title("Shadow price μ(t)"),
			"Rollout-GDRO's shadow price μ used for each step's allocation (mu): the dual variable of the mean-budget constraint. "+
				"It rises when the bins' unconstrained choices would overspend n̄ and falls when they underspend.",
			"μ", []Series{mu}, true, false)
		figs = append(figs, f)
	} else {
		skip("dyn_mu", "Shadow price μ(t)", "no Rollout-GDRO fields (mu)")
	}
	return figs, skipped
}

// addDashed adds a series as a dashed line of colour i with a legend entry.
func addDashed(p *plot.Plot, s Series, i int) {
	l, err := plotter.NewLine(s.finite())
	if err != nil {
		return // no finite point to draw
	}
	l.Color = lineColor(i)
	l.Width = vg.Points(1.2)
	l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(l)
	p.Legend.Add(s.Label, l)
}

// leadLagFigure: Δμ(t) over steps above its cross-correlation with the
// change of the mean bin index at lags −3…3.
func leadLagFigure(run *Run, lags, corrs []float64) Figure {
	dmu := run.Scalar("dmu")
	dmu.Label = "dmu(t) = μ(t+1) − μ(t)"
	top := newPlot("Shadow price change vs the mean bin — "+run.Name, "step", "dmu")
	stepAxis(top)
	lo, hi := xRange(dmu)
	addHLine(top, 0, lo, hi, "")
	addLines(top, []Series{dmu}, 0, false)

	bot := newPlot("", "lag k in steps (k > 0: dmu leads the mean bin)", "corr(dmu(t), Δmean bin(t+k))")
	bars, err := plotter.NewBarChart(barValues(corrs), vg.Points(22))
	if err != nil {
		panic(fmt.Sprintf("report: lead-lag bars: %v", err))
	}
	bars.Color = lineColor(1)
	bars.LineStyle.Width = 0
	bot.Add(bars)
	names := make([]string, len(lags))
	for i, k := range lags {
		names[i] = fmt.Sprintf("%+d", int(k))
	}
	names[len(names)/2] = "0"
	bot.NominalX(names...)
	// The scale fits the correlations (they are often small), at least
	// ±0.25, so that a near-zero bar does not look like a strong one.
	m := 0.25
	for _, c := range corrs {
		if isFinite(c) { // NaN: a lag with no variation to correlate
			m = math.Max(m, 1.25*math.Abs(c))
		}
	}
	m = math.Min(m, 1.05)
	bot.Y.Min, bot.Y.Max = -m, m
	addHLine(bot, 0, -0.5, float64(len(lags))-0.5, "")
	var xys plotter.XYLabels
	xys.XYs = make(plotter.XYs, len(corrs))
	xys.Labels = make([]string, len(corrs))
	for i, c := range corrs {
		off := 0.04 * m
		if c < 0 {
			off = -0.1 * m
		}
		xys.XYs[i] = plotter.XY{X: float64(i), Y: c + off}
		xys.Labels[i] = fmt.Sprintf("%+.2f", c)
		if !isFinite(c) {
			xys.XYs[i].Y, xys.Labels[i] = off, "n/a"
		}
	}
	if lb, err := plotter.NewLabels(xys); err == nil {
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font = sans(9)
			lb.TextStyle[i].XAlign = draw.XCenter
		}
		bot.Add(lb)
	}
	return Figure{Name: "dyn_lead_lag_corr", Section: secDynamics, Title: "Shadow price change vs the mean bin (correlation)",
		Caption: "Not the paper's lead–lag (that is dyn_lead_lag, docs/algorithm.md §8.1): a diagnostic of gdrotrain's own. Top: the step change of " +
			"Rollout-GDRO's shadow price, dmu(t) = μ(t+1) − μ(t). Bottom: Pearson correlation of dmu_t with the change of the mean " +
			"bin index k steps later, Δmean_bin_{t+k} = mean_bin(t+k) − mean_bin(t+k−1), computed as gdro-sim's summary does. " +
			"A bar away from 0 at k > 0 means μ moves before the curriculum does.",
		Width: sizeTall[0], Height: sizeTall[1], draw: stacked(top, bot)}
}

// wseFigure: WSE and its uniform-allocation counterpart above their ratio.
func wseFigure(run *Run) Figure {
	wse, uni := run.Scalar("wse"), run.Scalar("wse_uniform")
	wse.Label, uni.Label = "wse (per-step σ)", "wse_uniform (every prompt at the mean budget)"
	top := newPlot("Per-step WSE proxy vs the uniform allocation — "+run.Name, "step", "WSE_step")
	stepAxis(top)
	addLines(top, []Series{wse, uni}, 0, true)
	yFloor(top)

	ratio := run.Scalar("wse_ratio")
	ratio.Label = "wse_ratio"
	bot := newPlot("", "step", "ratio (< 1: better than uniform)")
	stepAxis(bot)
	lo, hi := xRange(ratio)
	addHLine(bot, 1, lo, hi, "uniform")
	series := []Series{ratio}
	if run.Has("sim_wse_best_ratio") {
		best := run.Scalar("sim_wse_best_ratio")
		best.Label = "best per-bin allocation (simulator)"
		series = append(series, best)
	}
	addLines(bot, series, 0, true)
	return Figure{Name: "dyn_wse_step", Section: secDynamics, Title: "Per-step WSE proxy against the uniform allocation",
		Caption: "Not the paper's WSE (that is dyn_wse, with σ̂ estimated once per run, docs/algorithm.md §8.1): the controller's per-step proxy, " +
			"σ_i² re-estimated every step from the step's own rows (docs/algorithm.md §8). " +
			"Top: the weighted standard-error proxy sqrt((1/N)·Σ_i σ_i²/n_i) of the step's mean-reward estimate under the rollout counts used (wse) " +
			"and under the uniform n_i = n̄ (wse_uniform). Bottom: their ratio (wse_ratio); below 1 the allocation estimates the mean reward more " +
			"precisely than uniform sampling with the same budget. gdro-sim also logs the best ratio a per-bin allocation could reach.",
		Width: sizeTall[0], Height: sizeTall[1], draw: stacked(top, bot)}
}

// snapshotFigures: share vs weight and share vs rollout share at four steps.
func snapshotFigures(run *Run) ([]Figure, []Skipped) {
	snaps := run.Snapshots()
	var figs []Figure
	var skipped []Skipped
	steps := make([]string, len(snaps))
	for i, s := range snaps {
		steps[i] = fmt.Sprintf("%d", s.Step)
	}
	if snaps[len(snaps)-1].Weight != nil {
		figs = append(figs, snapshotFigure(run, snaps, "snap_weight", "Prompt share vs Prompt-GDRO weight",
			"adversarial weight p_b", func(s Snapshot) []float64 { return s.Weight },
			"Paired bars per accuracy bin at the paper's four snapshots (start, early = a quarter, mid = half way, late = the last step; "+
				"docs/algorithm.md §8.1): the share of the step's prompts in the bin (bin_share) and the adversarial weight Prompt-GDRO gave it (bin_weight). Weight above share: the bin's advantages are scaled up."))
	} else {
		skipped = append(skipped, Skipped{Section: secSnapshots, Name: "snap_weight", Title: "Prompt share vs Prompt-GDRO weight",
			Reason: "no Prompt-GDRO fields (bin_weight)"})
	}
	if snaps[len(snaps)-1].Rollout != nil {
		figs = append(figs, snapshotFigure(run, snaps, "snap_rollout", "Prompt share vs rollout budget share",
			"share of the step's rollouts", func(s Snapshot) []float64 { return s.Rollout },
			"Paired bars per accuracy bin at the paper's four snapshots (start, early = a quarter, mid = half way, late = the last step; "+
				"docs/algorithm.md §8.1): the share of the step's prompts in the bin (bin_share) and the share of the step's rollouts they received, bin_share·bin_n_mean normalized to 1. A bin above its prompt share "+
				"gets more than n̄ rollouts per prompt."))
	} else {
		skipped = append(skipped, Skipped{Section: secSnapshots, Name: "snap_rollout", Title: "Prompt share vs rollout budget share",
			Reason: "no Rollout-GDRO fields (bin_n)"})
	}
	return figs, skipped
}

func snapshotFigure(run *Run, snaps []Snapshot, name, title, otherLabel string, other func(Snapshot) []float64, caption string) Figure {
	C := len(run.Labels)
	ymax := 0.0
	for _, s := range snaps {
		for c := 0; c < C; c++ {
			if o := other(s); o != nil {
				ymax = math.Max(ymax, o[c])
			}
			ymax = math.Max(ymax, s.Share[c])
		}
	}
	ymax = math.Min(1, 1.05*ymax+1e-9)
	ticks := make([]string, C)
	for c := range ticks {
		ticks[c] = shortTick(run.Labels, c)
	}
	barW := vg.Points(math.Max(3, math.Min(14, 100/float64(C))))
	var plots [2][2]*plot.Plot
	// one legend for the figure, its two entries side by side under the
	// title
	var legs [2]plot.Legend
	for i := range legs {
		legs[i] = plot.NewLegend()
		legs[i].TextStyle.Font = sans(10)
		legs[i].Top, legs[i].Left = true, true
		legs[i].ThumbnailWidth = vg.Points(14)
	}
	for i, s := range snaps {
		p := newPlot(fmt.Sprintf("%s: step %d", s.Name, s.Step), "accuracy bin (0 = hardest)", "share")
		p.Title.TextStyle.Font.Size = 11
		share, err := plotter.NewBarChart(barValues(s.Share), barW)
		if err != nil {
			panic(fmt.Sprintf("report: snapshot bars: %v", err))
		}
		share.Color, share.LineStyle.Width, share.Offset = lineColor(0), 0, -barW/2
		o := other(s)
		if o == nil { // the field is missing at this step only
			o = make([]float64, C)
		}
		ob, err := plotter.NewBarChart(barValues(o), barW)
		if err != nil {
			panic(fmt.Sprintf("report: snapshot bars: %v", err))
		}
		ob.Color, ob.LineStyle.Width, ob.Offset = lineColor(1), 0, barW/2
		p.Add(share, ob)
		p.NominalX(ticks...)
		p.Y.Min, p.Y.Max = 0, ymax
		if i == 0 {
			legs[0].Add("prompt share", share)
			legs[1].Add(otherLabel, ob)
		}
		plots[i/2][i%2] = p
	}
	return Figure{Name: name, Section: secSnapshots, Title: title, Caption: caption,
		Width: sizeSquare[0], Height: sizeSquare[1],
		draw: func(c draw.Canvas) {
			head := plot.New().Title.TextStyle
			head.Font = sans(13)
			head.XAlign, head.YAlign = draw.XCenter, draw.YTop
			c.FillText(head, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Max.Y - 4}, title+" — "+run.Name)
			mid := (c.Min.X + c.Max.X) / 2
			for i := range legs {
				lr := legs[i].Rectangle(c)
				x0 := mid + 12
				if i == 0 {
					x0 = mid - 12 - (lr.Max.X - lr.Min.X)
				}
				legs[i].Draw(draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
					Min: vg.Point{X: x0, Y: c.Max.Y - 42}, Max: vg.Point{X: c.Max.X, Y: c.Max.Y - 24}}})
			}
			t := draw.Tiles{Rows: 2, Cols: 2, PadTop: 44, PadX: 18, PadY: 12, PadLeft: 2, PadRight: 8, PadBottom: 2}
			rows := [][]*plot.Plot{plots[0][:], plots[1][:]}
			cs := plot.Align(rows, t, c)
			for j := range plots {
				for i, p := range plots[j] {
					if p != nil {
						p.Draw(cs[j][i])
					}
				}
			}
		}}
}

// shortTick is the bin's index label without "hardest"/"easiest" (bar
// charts have no room for it; the axis label says 0 = hardest).
func shortTick(labels []string, c int) string {
	if labels[c] == ExclLabel {
		return "excl"
	}
	return strings.TrimPrefix(labels[c], "accbin_")
}
