// Package progress reports long work: a progress bar (schollz/progressbar)
// when stderr is a terminal, plain log lines every few seconds otherwise
// (Slurm logs, CI), so batch logs stay readable.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar counts units of work.
type Bar struct {
	bar      *progressbar.ProgressBar
	w        io.Writer
	desc     string
	total    int
	done     int
	tokens   int
	start    time.Time
	lastLine time.Time
}

// New starts a bar over total units, writing to stderr.
func New(total int, desc string) *Bar {
	return NewTo(os.Stderr, total, desc, term.IsTerminal(int(os.Stderr.Fd())))
}

// NewTo starts a bar on w; tty selects the interactive bar.
func NewTo(w io.Writer, total int, desc string, tty bool) *Bar {
	b := &Bar{w: w, desc: desc, total: total, start: time.Now(), lastLine: time.Now()}
	if tty {
		b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(200*time.Millisecond))
	}
	return b
}

// Add records finished units and tokens produced.
func (b *Bar) Add(units, tokens int) {
	if b == nil {
		return
	}
	b.done += units
	b.tokens += tokens
	if b.bar != nil {
		b.bar.Describe(fmt.Sprintf("%s (%.0f tok/s)", b.desc, b.TokensPerSecond()))
		_ = b.bar.Add(units)
		return
	}
	if time.Since(b.lastLine) >= 10*time.Second {
		b.lastLine = time.Now()
		fmt.Fprintf(b.w, "%s: %d/%d, %.0f tok/s\n", b.desc, b.done, b.total, b.TokensPerSecond())
	}
}

// TokensPerSecond is the mean rate since the bar started.
func (b *Bar) TokensPerSecond() float64 {
	s := time.Since(b.start).Seconds()
	if s == 0 {
		return 0
	}
	return float64(b.tokens) / s
}

// Finish closes the bar.
func (b *Bar) Finish() {
	if b != nil && b.bar != nil {
		_ = b.bar.Finish()
	}
}
