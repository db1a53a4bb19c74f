package watch

// The terminal frame: a header (run, step, progress, time to the end),
// the last step's line, sparklines of the step's main figures, one row per
// difficulty bin (prompt share, Prompt-GDRO weight and rollouts per prompt
// with their sparklines) and the last validation.

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

var ticks = []rune("▁▂▃▄▅▆▇█")

// spark draws xs as a sparkline scaled to their own range, one cell per
// value, or, when there are more than width values, each cell the mean of
// a run of consecutive values, so the line always spans the whole run (a
// blank where a value is absent).
func spark(xs []float64, width int) string {
	if width <= 0 {
		return ""
	}
	if len(xs) > width {
		xs = squeeze(xs, width)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		if !math.IsNaN(x) {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	var b strings.Builder
	for _, x := range xs {
		switch {
		case math.IsNaN(x):
			b.WriteRune(' ')
		case hi <= lo:
			b.WriteRune(ticks[len(ticks)/2])
		default:
			b.WriteRune(ticks[int(math.Round((x-lo)/(hi-lo)*float64(len(ticks)-1)))])
		}
	}
	return b.String()
}

// squeeze averages xs into width cells of consecutive values (NaNs
// skipped; a cell of NaNs only is NaN).
func squeeze(xs []float64, width int) []float64 {
	out := make([]float64, width)
	for c := range out {
		lo, hi := c*len(xs)/width, (c+1)*len(xs)/width
		sum, n := 0.0, 0
		for _, x := range xs[lo:hi] {
			if !math.IsNaN(x) {
				sum, n = sum+x, n+1
			}
		}
		out[c] = math.NaN()
		if n > 0 {
			out[c] = sum / float64(n)
		}
	}
	return out
}

// lastOf is the newest non-NaN value of xs (NaN when none).
func lastOf(xs []float64) float64 {
	for i := len(xs) - 1; i >= 0; i-- {
		if !math.IsNaN(xs[i]) {
			return xs[i]
		}
	}
	return math.NaN()
}

func dur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// frame renders the view for a terminal width columns wide.
func (s *state) frame(width int, now time.Time) []string {
	var out []string
	head := fmt.Sprintf("gdrotrain watch: %s", s.name)
	if s.method != "" {
		head += "  (" + s.method + ")"
	}
	last := s.last()
	switch {
	case len(s.steps) == 0:
		head += "  no step yet"
	case s.total > 0:
		head += fmt.Sprintf("  step %d/%d (%.0f%%)", last, s.total, 100*float64(last)/float64(s.total))
		if s.finished {
			head += "  finished"
		} else if d, ok := s.eta(); ok {
			head += "  ~" + dur(d) + " to the end"
		}
	default:
		head += fmt.Sprintf("  step %d", last)
	}
	if !s.updated.IsZero() && !s.finished {
		head += fmt.Sprintf("  (updated %s ago)", dur(now.Sub(s.updated)))
	}
	out = append(out, head)
	if len(s.steps) == 0 {
		return append(append(out, ""), wrap(s.wait, width)...)
	}
	out = append(out, s.stepLine(s.newest), "")

	const label = 12
	w := max(width-label-13, 8)
	for _, r := range []struct{ name, key, f string }{
		{"reward", "reward_mean", "%+.3f"},
		{"accuracy", "acc_mean", "%.3f"},
		{"KL", "kl", "%.2e"},
		{"grad norm", "grad_norm", "%.3f"},
		{"tokens/s", "gen_tokens_per_s", "%.0f"},
	} {
		xs := s.series(r.key)
		out = append(out, fmt.Sprintf("%-*s %10s  %s", label, r.name, fmt.Sprintf(r.f, lastOf(xs)), spark(xs, w)))
	}

	m := s.newest
	labels, _ := m["bin_labels"].([]any)
	if len(labels) > 0 {
		_, hasW := m["bin_weight"]
		_, hasN := m["bin_n_mean"]
		cols := 1 + btoi(hasW) + btoi(hasN)
		sw := max((width-label)/cols-10, 4)
		hdr := fmt.Sprintf("%-*s %-*s", label, "bin", sw+9, "prompt share")
		if hasW {
			hdr += fmt.Sprintf(" %-*s", sw+9, "GDRO weight")
		}
		if hasN {
			hdr += fmt.Sprintf(" %s", "rollouts/prompt")
		}
		out = append(out, "", hdr)
		for b := range labels {
			row := fmt.Sprintf("%-*s", label, binName(labels, b))
			for _, c := range []struct {
				key, f string
				on     bool
			}{{"bin_share", "%6.3f", true}, {"bin_weight", "%6.3f", hasW}, {"bin_n_mean", "%6.2f", hasN}} {
				if !c.on {
					continue
				}
				xs := s.binSeries(c.key, b)
				v := fmt.Sprintf(c.f, xs[len(xs)-1])
				if math.IsNaN(xs[len(xs)-1]) {
					v = fmt.Sprintf("%6s", "–") // no prompts in the bin now
				}
				row += fmt.Sprintf(" %s  %-*s", v, sw, spark(xs, sw))
			}
			out = append(out, row)
		}
	}
	out = append(out, "")
	if s.val != nil {
		out = append(out, valLine(s.val))
	} else {
		out = append(out, "no validation yet")
	}
	if s.resets > 0 {
		out = append(out, fmt.Sprintf("(the run resumed %d times while watched; the steps after its checkpoint were redone)", s.resets))
	}
	if !s.finished {
		out = append(out, "", "Ctrl-C to exit")
	}
	return out
}

// binName labels bin b: "b0 hardest" … "b4 easiest", "excl" for the
// bin of prompts excluded from the classes.
func binName(labels []any, b int) string {
	name, _ := labels[b].(string)
	s, ok := strings.CutPrefix(name, "accbin_")
	if !ok {
		return name
	}
	if s == "excl" {
		return s
	}
	last := len(labels) - 1
	if l, _ := labels[last].(string); l == "accbin_excl" {
		last--
	}
	switch b {
	case 0:
		return "b" + s + " hardest"
	case last:
		return "b" + s + " easiest"
	}
	return "b" + s
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// draw writes a frame from the top left corner, each line cut to width
// and cleared to its end, the rest of the screen cleared, at most height
// lines.
func draw(w io.Writer, lines []string, width, height int) {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for i, l := range lines {
		if i >= height-1 {
			break
		}
		b.WriteString(cut(l, width))
		b.WriteString("\x1b[K\r\n")
	}
	b.WriteString("\x1b[J")
	io.WriteString(w, b.String())
}

// cut shortens s to at most n runes.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// wrap breaks text into lines of at most width runes at spaces (a word
// longer than width, a long path, stays whole and is cut by draw).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > width {
			lines, line = append(lines, line), ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}
