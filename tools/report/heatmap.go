package report

// heatmap.go: heatmaps over steps × accuracy bins (prompt share, Prompt-GDRO
// weights, realized accuracy, Rollout-GDRO rollouts per prompt), each with a
// colour bar. Bin 0 (hardest) is the bottom row; cells of a bin with no
// prompts at that step are grey.

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

const secHeatmaps = "Curriculum heatmaps"

// maxHeatCols bounds the columns of a heatmap: longer runs are averaged
// over windows of consecutive steps (Grid.Downsample), which keeps the SVG
// small and each column wider than a pixel.
const maxHeatCols = 300

// clipQuantile is the quantile of the cells where a data-range colour
// scale stops when the largest cells are outliers.
const clipQuantile = 0.98

// absentColor fills the cells of bins without prompts.
var absentColor = color.Gray{0xD8}

// viridis returns a perceptually uniform colour map (dark blue → yellow)
// built from five points of matplotlib's viridis; lightness rises
// monotonically, so it reads in greyscale too and never meets the grey of
// absent cells at its dark end.
func viridis() palette.ColorMap {
	cm, err := moreland.NewLuminance([]color.Color{
		color.NRGBA{0x44, 0x01, 0x54, 0xff},
		color.NRGBA{0x3B, 0x52, 0x8B, 0xff},
		color.NRGBA{0x21, 0x91, 0x8C, 0xff},
		color.NRGBA{0x5E, 0xC9, 0x62, 0xff},
		color.NRGBA{0xFD, 0xE7, 0x25, 0xff},
	})
	if err != nil {
		panic(fmt.Sprintf("report: viridis control points: %v", err)) // constant input
	}
	return cm
}

// heatSpec describes one heatmap figure.
type heatSpec struct {
	name, title, caption string
	key                  string // per-class array
	cbLabel              string // colour bar label
	lo, hi               float64
	fixed                bool // use lo, hi instead of the data range
	zeroFloor            bool // data range but starting at 0
}

// heatmapFigure builds the figure of grid g.
func heatmapFigure(run *Run, g Grid, sp heatSpec) Figure {
	caption := sp.caption
	if len(g.Steps) > maxHeatCols {
		caption += fmt.Sprintf(" Each column averages %.1f consecutive steps (%d steps in %d columns).",
			float64(len(g.Steps))/maxHeatCols, len(g.Steps), maxHeatCols)
		g = g.Downsample(maxHeatCols)
	}
	lo, hi := sp.lo, sp.hi
	cbLabel := sp.cbLabel
	if !sp.fixed {
		lo, hi = g.Range()
		if sp.zeroFloor {
			lo, hi = 0, math.Max(hi, 0) // a negative count is not logged by us, but must not invert the scale
		}
		// A few extreme cells (every prompt in bin 0 before the classifier
		// has history) would squeeze the rest of the map into the dark end
		// of the scale: clip at the 98th percentile when they are far out.
		if q := g.Quantile(clipQuantile); q > lo && hi > 1.25*q {
			caption += fmt.Sprintf(" The colour scale stops at %s, the %.0fth percentile of the cells; the %s largest value and every cell above the cut show the top colour.",
				formatTick(roundSig(q, 2), q), 100*clipQuantile, formatTick(roundSig(hi, 3), hi))
			hi = roundSig(q, 2)
			cbLabel += " (top clipped)"
		}
	}
	if hi-lo < 1e-9 { // a constant map still needs a colour bar with a span
		lo, hi = lo-0.5, hi+0.5
		if sp.zeroFloor && lo < 0 {
			lo, hi = 0, 2*hi
		}
	}
	cm := viridis()
	cm.SetMin(lo)
	cm.SetMax(hi)

	p := newPlot(fmt.Sprintf("%s — %s", sp.title, run.Name), "step (grey: no prompts in the bin)", "accuracy bin")
	p.Add(&cellMap{g: g, colors: cm.Palette(256).Colors(), lo: lo, hi: hi})
	p.Y.Tick.Marker = binTicks{labels: g.Labels}
	stepAxis(p)
	p.X.Padding, p.Y.Padding = 0, 0

	cb := plot.New()
	bar := &plotter.ColorBar{ColorMap: cm, Vertical: true, Colors: 256}
	cb.Add(bar)
	cb.HideX()
	cb.Y.Padding = 0
	cb.Y.Label.Text = cbLabel
	styleAxis(&cb.Y)
	cb.Y.Tick.Marker = niceTicks{target: 6}

	return Figure{
		Name: sp.name, Section: secHeatmaps, Title: sp.title, Caption: caption,
		Width: sizeWide[0], Height: sizeWide[1],
		draw: func(c draw.Canvas) {
			const cbWidth = 78 // points: colour bar label, ticks and bar
			hc := draw.Crop(c, 0, -cbWidth, 0, 0)
			p.Draw(hc)
			dc := p.DataCanvas(hc)
			cbc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: c.Max.X - cbWidth + 6, Y: dc.Min.Y},
				Max: vg.Point{X: c.Max.X - 8, Y: dc.Max.Y},
			}}
			cb.Draw(cbc)
		},
	}
}

// cellMap draws a Grid as coloured cells: column t spans halfway to its
// neighbouring steps, row c spans [c − ½, c + ½]. Runs of equal colour
// along a row are one rectangle, so the SVG stays small and the PNG has no
// seams between cells.
type cellMap struct {
	g      Grid
	colors []color.Color // palette over [lo, hi]
	lo, hi float64
}

// edges are the column boundaries (T+1).
func (m *cellMap) edges() []float64 {
	x := m.g.Steps
	T := len(x)
	e := make([]float64, T+1)
	if T == 1 {
		e[0], e[1] = x[0]-0.5, x[0]+0.5
		return e
	}
	for t := 1; t < T; t++ {
		e[t] = (x[t-1] + x[t]) / 2
	}
	e[0] = x[0] - (x[1]-x[0])/2
	e[T] = x[T-1] + (x[T-1]-x[T-2])/2
	return e
}

func (m *cellMap) color(v float64) color.Color {
	if math.IsNaN(v) {
		return absentColor
	}
	k := int(math.Round((v - m.lo) / (m.hi - m.lo) * float64(len(m.colors)-1)))
	k = max(0, min(len(m.colors)-1, k))
	return m.colors[k]
}

// Plot implements plot.Plotter.
func (m *cellMap) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	e := m.edges()
	T := len(m.g.Steps)
	const overlap = vg.Length(0.3) // points: hides anti-aliasing seams
	for r := range m.g.Labels {
		y0, y1 := trY(float64(r)-0.5), trY(float64(r)+0.5)
		if r < len(m.g.Labels)-1 {
			y1 += overlap
		}
		for t := 0; t < T; {
			col := m.color(m.g.Z[t][r])
			u := t + 1
			for u < T && m.color(m.g.Z[u][r]) == col {
				u++
			}
			x0, x1 := trX(e[t]), trX(e[u])
			if u < T {
				x1 += overlap
			}
			c.FillPolygon(col, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
			t = u
		}
	}
}

// DataRange implements plot.DataRanger.
func (m *cellMap) DataRange() (xmin, xmax, ymin, ymax float64) {
	e := m.edges()
	return e[0], e[len(e)-1], -0.5, float64(len(m.g.Labels)) - 0.5
}

// binTicks labels the rows of a heatmap with the bin indices, bin 0 marked
// hardest and the last bin easiest.
type binTicks struct{ labels []string }

func (b binTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := make([]plot.Tick, len(b.labels))
	for c := range b.labels {
		ts[c] = plot.Tick{Value: float64(c), Label: BinTick(b.labels, c)}
	}
	return ts
}

// heatmapFigures returns the run's heatmaps and notes for the ones it has
// no data for.
func heatmapFigures(run *Run) ([]Figure, []Skipped) {
	const sec = secHeatmaps
	var figs []Figure
	var skipped []Skipped
	if g, ok := run.Grid("bin_share"); ok {
		figs = append(figs, heatmapFigure(run, g, heatSpec{
			name: "heat_share", title: "Prompt share per accuracy bin", key: "bin_share",
			cbLabel: "share of the step's prompts", zeroFloor: true,
			caption: "Share q̂_b of each step's prompts that the online classifier put in bin b (bin_share). " +
				"Bin 0 is the hardest (lowest estimated solve rate); a curriculum that works moves mass upwards over time.",
		}))
	}
	if g, ok := run.Grid("bin_weight"); ok {
		figs = append(figs, heatmapFigure(run, g, heatSpec{
			name: "heat_weight", title: "Prompt-GDRO adversarial weight per bin", key: "bin_weight",
			cbLabel: "weight p_b", zeroFloor: true,
			caption: "Adversarial bin weights p_b used at each step (bin_weight; they sum to 1 over the bins present). " +
				"Compare with the prompt share: weight above share means the bin's advantages are scaled up.",
		}))
	} else {
		skipped = append(skipped, Skipped{Section: sec, Name: "heat_weight", Title: "Prompt-GDRO adversarial weight per bin",
			Reason: "no Prompt-GDRO fields (bin_weight) in " + run.MetricsPath})
	}
	if g, ok := run.Grid("bin_acc"); ok {
		figs = append(figs, heatmapFigure(run, g, heatSpec{
			name: "heat_acc", title: "Realized accuracy per bin", key: "bin_acc",
			cbLabel: "mean rollout correctness", lo: 0, hi: 1, fixed: true,
			caption: "Fraction of the step's rollouts in bin b that the verifier scored correct (bin_acc, the realized reward rate), on a fixed 0–1 scale.",
		}))
	} else {
		skipped = append(skipped, Skipped{Section: sec, Name: "heat_acc", Title: "Realized accuracy per bin",
			Reason: "no bin_acc field in " + run.MetricsPath})
	}
	_, hasN := run.Grid("bin_n")
	g, hasMean := run.Grid("bin_n_mean")
	if hasN && hasMean {
		sp := heatSpec{
			name: "heat_rollouts", title: "Rollout-GDRO rollouts per prompt", key: "bin_n_mean",
			cbLabel: "rollouts per prompt",
			caption: "Mean number of rollouts each prompt of bin b received (bin_n_mean: what was generated; in paper mode it equals the arm n_b the DP chose). " +
				"The colour scale spans the arms n_min … n_max.",
		}
		if lo, hi, ok := run.ArmRange(); ok {
			sp.lo, sp.hi, sp.fixed = min(lo, hi), max(lo, hi), true
		}
		figs = append(figs, heatmapFigure(run, g, sp))
	} else {
		skipped = append(skipped, Skipped{Section: sec, Name: "heat_rollouts", Title: "Rollout-GDRO rollouts per prompt",
			Reason: "no Rollout-GDRO fields (bin_n, bin_n_mean) in " + run.MetricsPath})
	}
	return figs, skipped
}
