package report

// figure.go: the Figure type, PNG/SVG rendering and the styling every
// figure shares (colours, line plots, tick formatting).

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// DPI is the resolution of the PNG files: a figure of W×H points is
// round(W·DPI/72) × round(H·DPI/72) pixels.
const DPI = 120

// Standard figure sizes (points; 72 points = 1 inch).
var (
	sizeWide   = [2]vg.Length{8 * vg.Inch, 4.5 * vg.Inch} // one panel
	sizeTall   = [2]vg.Length{8 * vg.Inch, 6 * vg.Inch}   // two stacked panels
	sizeSquare = [2]vg.Length{9 * vg.Inch, 6.5 * vg.Inch} // 2×2 snapshots
)

// Figure is one figure of a report, written as Name.png and Name.svg.
type Figure struct {
	Name    string // file stem, unique in the report
	Section string // heading it appears under in index.html
	Title   string
	Caption string // what is plotted and how to read it
	Width   vg.Length
	Height  vg.Length
	draw    func(c draw.Canvas)
}

// PixelSize is the PNG size in pixels.
func (f Figure) PixelSize() (w, h int) {
	return int(f.Width/vg.Inch*DPI + 0.5), int(f.Height/vg.Inch*DPI + 0.5)
}

// Files are the file names the figure is written to.
func (f Figure) Files() (png, svg string) { return f.Name + ".png", f.Name + ".svg" }

// Write renders the figure into dir as PNG and SVG.
func (f Figure) Write(dir string) error {
	pngName, svgName := f.Files()
	img := vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(DPI))
	f.draw(draw.New(img))
	var buf bytes.Buffer
	// BestSpeed: a third of the encoding time of the default level for
	// files ~15% larger; figures are mostly flat colour either way.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img.Image()); err != nil {
		return fmt.Errorf("figure %s: encoding PNG: %w", f.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, pngName), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("figure %s: %w", f.Name, err)
	}
	svg := vgsvg.New(f.Width, f.Height)
	f.draw(draw.New(svg))
	buf.Reset()
	if _, err := svg.WriteTo(&buf); err != nil {
		return fmt.Errorf("figure %s: encoding SVG: %w", f.Name, err)
	}
	// gonum names only the Liberation face, which many machines lack: add
	// metric-compatible fallbacks so a browser does not fall back to serif.
	out := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	if err := os.WriteFile(filepath.Join(dir, svgName), out, 0o644); err != nil {
		return fmt.Errorf("figure %s: %w", f.Name, err)
	}
	return nil
}

// singlePlot makes a figure that draws one plot on the whole canvas.
func singlePlot(p *plot.Plot) func(draw.Canvas) {
	return func(c draw.Canvas) { drawRoomy(p, c) }
}

// stacked draws plots one above the other with aligned data areas.
func stacked(ps ...*plot.Plot) func(draw.Canvas) {
	return func(c draw.Canvas) {
		rows := make([][]*plot.Plot, len(ps))
		for i, p := range ps {
			rows[i] = []*plot.Plot{p}
		}
		t := draw.Tiles{Rows: len(ps), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4),
			PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(8)}
		cs := plot.Align(rows, t, c)
		for i, p := range ps {
			drawRoomy(p, cs[i][0])
		}
	}
}

// drawRoomy draws p with its Y axis extended upwards so that a legend at
// the top sits above the data instead of over the lines. The plot is left
// as it was (figures are drawn twice, PNG and SVG).
func drawRoomy(p *plot.Plot, c draw.Canvas) {
	r := p.Legend.Rectangle(c)
	h := r.Max.Y - r.Min.Y
	if h <= 0 || !p.Legend.Top || !(p.Y.Max > p.Y.Min) {
		p.Draw(c)
		return
	}
	lo, hi := p.Y.Min, p.Y.Max
	dc := p.DataCanvas(c)
	// The legend hangs from the top of the area under the title, which
	// is a little above the data area's top.
	top := c.Max.Y
	if p.Title.Text != "" {
		top -= p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	}
	room := h - (top - dc.Max.Y) + vg.Points(8)
	f := math.Max(0, math.Min(0.6, float64(room)/float64(dc.Max.Y-dc.Min.Y)))
	p.Y.Max = lo + (hi-lo)/(1-f)
	p.Draw(c)
	p.Y.Max = hi
}

// palette: the Okabe–Ito colours, distinguishable with colour-vision
// deficiencies, in the order lines take them.
var lineColors = []color.Color{
	color.RGBA{0x00, 0x72, 0xB2, 0xff}, // blue
	color.RGBA{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9E, 0x73, 0xff}, // bluish green
	color.RGBA{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	color.RGBA{0xE6, 0x9F, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
	color.RGBA{0x99, 0x99, 0x33, 0xff}, // olive
}

func lineColor(i int) color.Color { return lineColors[i%len(lineColors)] }

var (
	gridColor = color.Gray{0xE0}
	refColor  = color.Gray{0x80}
)

// sans is the font of every text in the report (gonum/plot defaults to
// the serif face).
func sans(size font.Length) font.Font {
	f := font.From(plot.DefaultFont, size)
	f.Variant = "Sans"
	return f
}

// newPlot returns a plot with the report's title, axis labels, fonts and
// grid.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(13)
	p.Title.Padding = vg.Points(4)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	styleAxis(&p.X)
	styleAxis(&p.Y)
	p.X.Tick.Marker = niceTicks{target: 7}
	p.Y.Tick.Marker = niceTicks{target: 6}
	p.Legend.TextStyle.Font = sans(10)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.ThumbnailWidth = vg.Points(18)
	p.Legend.XOffs = -vg.Points(6) // keep the thumbnails' dots inside the figure
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	g.Vertical.Width, g.Horizontal.Width = vg.Points(0.5), vg.Points(0.5)
	p.Add(g)
	return p
}

// styleAxis sets an axis's fonts.
func styleAxis(a *plot.Axis) {
	a.Label.TextStyle.Font = sans(11)
	a.Tick.Label.Font = sans(10)
}

// addLines adds one line per series with the report's colours (colour i
// from offset) and a legend entry per line when legend is true. Empty
// series are skipped. Series with a single point get a dot so they show.
func addLines(p *plot.Plot, series []Series, offset int, legend bool) {
	for i, s := range series {
		s = s.finite()
		if s.Len() == 0 {
			continue
		}
		col := lineColor(offset + i)
		l, err := plotter.NewLine(s)
		if err != nil {
			continue // finite points always make a line
		}
		l.Color = col
		l.Width = vg.Points(1.4)
		if i > 0 && offset+i >= len(lineColors) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		var thumbs []plot.Thumbnailer
		thumbs = append(thumbs, l)
		if s.Len() <= 30 {
			sc, _ := plotter.NewScatter(s)
			sc.GlyphStyle.Color = col
			sc.GlyphStyle.Radius = vg.Points(2)
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		if legend {
			p.Legend.Add(s.Label, thumbs...)
		}
	}
}

// addSmoothLines draws each series long enough for SmoothWindow as a faint
// per-step line under its bold moving average (the legend entry), shorter
// ones as addLines does. It returns a caption sentence saying so, or "".
func addSmoothLines(p *plot.Plot, series []Series, offset int, legend bool) string {
	bold := make([]Series, len(series))
	var windows []string
	for i, s := range series {
		s = s.finite()
		bold[i] = s
		w := SmoothWindow(s.Len())
		if w == 0 {
			continue
		}
		raw, err := plotter.NewLine(s)
		if err != nil {
			continue // finite points always make a line
		}
		raw.Color = faded(lineColor(offset + i))
		raw.Width = vg.Points(0.7)
		p.Add(raw)
		bold[i] = s.MovingAverage(w)
		if ws := strconv.Itoa(w); len(windows) == 0 || windows[len(windows)-1] != ws {
			windows = append(windows, ws)
		}
	}
	addLines(p, bold, offset, legend)
	if len(windows) == 0 {
		return ""
	}
	return fmt.Sprintf(" Faint lines: per-step values; bold lines: their centred moving average over %s steps.", strings.Join(windows, " / "))
}

// faded mixes c with 65% white.
func faded(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	mix := func(v uint32) uint8 { return uint8((float64(v>>8)*0.35 + 255*0.65) + 0.5) }
	return color.RGBA{mix(r), mix(g), mix(b), 0xff}
}

// addHLine adds a dashed horizontal reference line at y over [x0, x1];
// none where the range is empty (x0 > x1: xRange of series without a
// point, such as a WSE ratio in a run that solved nothing yet).
func addHLine(p *plot.Plot, y, x0, x1 float64, label string) {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil || !(x0 <= x1) {
		return
	}
	l.Color = refColor
	l.Width = vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	p.Add(l)
	if label != "" {
		p.Legend.Add(label, l)
	}
}

// xRange is the smallest and largest X over the series' finite points;
// lo > hi (+Inf, −Inf) when they have none.
func xRange(series ...Series) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		s = s.finite()
		for _, x := range s.X {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	return lo, hi
}

// finite is s without its NaN and ±Inf points, which no plotter draws: a
// value left undefined at a step (0/0 where a bin had no rollouts, a ratio
// to a zero WSE) is a gap in the line, not a crash.
func (s Series) finite() Series {
	out := Series{Label: s.Label}
	for i := range s.X {
		if isFinite(s.X[i]) && isFinite(s.Y[i]) {
			out.X, out.Y = append(out.X, s.X[i]), append(out.Y, s.Y[i])
		}
	}
	return out
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// barValues are v for a bar chart, a non-finite value (an undefined
// average, a logged NaN) drawn as no bar.
func barValues(v []float64) plotter.Values {
	out := make(plotter.Values, len(v))
	for i, x := range v {
		if isFinite(x) {
			out[i] = x
		}
	}
	return out
}

// yFloor makes the Y axis start at 0 when all data are ≥ 0 and the data
// are not far from 0 (a share, a rate, an entropy), so that small changes
// are not magnified into big ones.
func yFloor(p *plot.Plot) {
	if p.Y.Min >= 0 && p.Y.Min < 0.5*p.Y.Max {
		p.Y.Min = 0
	}
}

// niceTicks places about target labelled ticks at multiples of 1, 2 or 5
// × 10^k (gonum's default labels only every other major tick on some
// ranges) and labels them compactly (formatTick), with unlabelled minor
// ticks between. integer restricts the spacing to whole numbers (steps).
type niceTicks struct {
	target  int
	integer bool
}

func (n niceTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	switch {
	case !isFinite(lo) || !isFinite(hi):
		return nil // gonum's default ticks loop forever on NaN
	case math.IsInf(span, 0):
		// ±1e308: the span overflows; gonum's default ticks panic.
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 3, 64)}, {Value: hi, Label: strconv.FormatFloat(hi, 'g', 3, 64)}}
	case !(span > 0):
		return []plot.Tick{{Value: lo, Label: formatTick(lo, 0)}}
	}
	target := max(2, n.target)
	mag := math.Pow(10, math.Floor(math.Log10(span/float64(target))))
	step, minor := 10*mag, 5
	for _, m := range []struct {
		f     float64
		minor int
	}{{1, 5}, {2, 4}, {2.5, 5}, {5, 5}, {10, 5}} {
		if span/(m.f*mag) <= float64(target) {
			step, minor = m.f*mag, m.minor
			break
		}
	}
	if n.integer && step < 1 {
		step, minor = 1, 1
	}
	var ts []plot.Tick
	sub := step / float64(minor)
	first := math.Ceil(lo/sub-1e-9) * sub
	if !(first+sub > first) || (hi-first)/sub > float64(4*target*minor) {
		// A span below the float resolution at this magnitude (1e17 to
		// 1e17+1): the minor steps would not advance. Label the ends.
		return []plot.Tick{{Value: lo, Label: formatTick(lo, span)}, {Value: hi, Label: formatTick(hi, span)}}
	}
	for k := 0; ; k++ {
		v := first + float64(k)*sub
		if v > hi+1e-9*span {
			break
		}
		if n.integer && v != math.Round(v) {
			continue
		}
		t := plot.Tick{Value: v}
		if r := v / step; math.Abs(r-math.Round(r)) < 1e-6 {
			t.Value = math.Round(r) * step
			t.Label = formatTick(t.Value, span)
		}
		ts = append(ts, t)
	}
	return ts
}

// formatTick formats a tick value v of an axis spanning span.
func formatTick(v, span float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	case span > 0 && span < 1e-3:
		return strconv.FormatFloat(v, 'e', 2, 64)
	}
	// round away floating noise at 6 significant digits
	return strconv.FormatFloat(roundSig(v, 6), 'f', -1, 64)
}

func roundSig(v float64, n int) float64 {
	if v == 0 {
		return 0
	}
	e := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}

// stepAxis sets up an X axis of steps.
func stepAxis(p *plot.Plot) {
	p.X.Tick.Marker = niceTicks{target: 7, integer: true}
}
