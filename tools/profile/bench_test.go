package profile

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// errSIGTERM is the cause main's signal handler cancels with.
var errSIGTERM = errors.New("SIGTERM")

// cutBench runs the tiny bench on the emulator, cancelled (cause SIGTERM)
// once after rows have been recorded (0: before it starts), and returns
// what it printed and its error.
func cutBench(t *testing.T, o BenchOptions, after int) (string, error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if after == 0 {
		cancel(errSIGTERM)
	}
	o.Shape, o.PeakTFLOPs, o.BandwidthGBs = "tiny", 1, 1
	g := &gpuBench{b: cuda.NewBackend(device(t), cuda.BF16), BenchOptions: o, ctx: ctx, grace: benchGrace}
	n := 0
	g.recorded = func(string) {
		if n++; n == after {
			cancel(errSIGTERM)
		}
	}
	var out strings.Builder
	err := g.run(&out)
	return out.String(), err
}

// tinyRows are the tiny bench's rows in order on device d.
func tinyRows(t *testing.T) []string {
	rows := []string{"tiny-256", "tiny-step-2x256"}
	if device(t).Info.HasWGMMA() {
		rows = append(rows, "attn-1x256/wgmma")
	}
	return append(rows, "attn-1x256/mma.sync", "decode-b1-c64", "decode-b4-c64", "decode-b1-c64-fp8", "decode-b4-c64-fp8",
		"decode-b4-c64-exact", "decode-b4-c64-graph", "decode-b4-c64-graph-exact")
}

// TestBenchInterrupted: a bench cancelled (the command's SIGTERM) stops
// between rows and still prints its report: the rows measured, nothing
// else (no row zero-filled as if measured), and the note naming the rows
// not measured; it returns an error wrapping context.Canceled. A cancelled
// baseline is killed, the rows it printed kept. Cheap: one training row at
// most is measured.
func TestBenchInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark's code path is left to make test")
	}
	all := tinyRows(t)
	note := func(measured int) string {
		return "SIGTERM after " + strconv.Itoa(measured) + " of " + strconv.Itoa(len(all)) + " rows; not measured: " + strings.Join(all[measured:], ", ")
	}
	// A fake baseline that prints its first row, then would print a second
	// 20 s later unless it is killed.
	script := filepath.Join(t.TempDir(), "baseline.sh")
	fake := "cat >/dev/null\n" + `echo '{"name": "tiny-256", "train_tok_s": 1000, "torch": "fake torch"}'` + "\nsleep 20\n" +
		`echo '{"name": "decode-b1-c64", "tok_s": 50, "torch": "fake torch"}'` + "\n"
	if err := os.WriteFile(script, []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	baseline := BenchOptions{Python: "/bin/sh", Script: script, JSON: true}

	for _, c := range []struct {
		name     string
		o        BenchOptions
		after    int
		rows     []string // in the report, in order
		torchTok float64  // tiny-256's PyTorch tok/s
		note     string
	}{
		{"after the first row", BenchOptions{NoTorch: true, JSON: true}, 1, all[:1], 0, note(1)},
		{"before the first row", BenchOptions{NoTorch: true, JSON: true}, 0, nil, 0, note(0)},
		{"--torch-only, during the baseline", func() BenchOptions { o := baseline; o.TorchOnly = true; return o }(), 1,
			[]string{"tiny-256"}, 1000, "SIGTERM during the PyTorch baseline after 1 of 3 rows; not measured: decode-b1-c64, decode-b4-c64"},
		{"beside the baseline, during it", baseline, 1, nil, 0, "SIGTERM during the PyTorch baseline " + strings.TrimPrefix(note(0), "SIGTERM ")},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := cutBench(t, c.o, c.after)
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), c.note) {
				t.Errorf("error %v, want context.Canceled with %q", err, c.note)
			}
			var r BenchReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("not one JSON object: %v\n%s", err, out)
			}
			var names []string
			for _, x := range r.Train {
				names = append(names, x.Name)
				if !c.o.TorchOnly && (x.TokPerS <= 0 || x.Error != "") {
					t.Errorf("training row %+v not measured", x)
				}
				if x.TorchTokPerS != c.torchTok {
					t.Errorf("training row %s: PyTorch %v tok/s, want %v", x.Name, x.TorchTokPerS, c.torchTok)
				}
			}
			for _, x := range r.Attention {
				names = append(names, x.Name+"/"+x.Route)
			}
			for _, x := range r.Decode {
				names = append(names, x.Name)
			}
			if !slices.Equal(names, c.rows) || !slices.Equal(r.Rows, c.rows) || r.Interrupted != c.note {
				t.Errorf("rows %q, listed %q (want %q); interrupted %q, want %q", names, r.Rows, c.rows, r.Interrupted, c.note)
			}
		})
	}

	// The table: the footer and the note, no section begun after the cut.
	out, err := cutBench(t, BenchOptions{NoTorch: true}, 0)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("table: error %v, want context.Canceled", err)
	}
	for _, want := range []string{"random weights: 0 set(s)", "PyTorch baseline not run (--no-torch)", "interrupted: " + note(0)} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)^(tiny-256|attention|decode) `).MatchString(out) {
		t.Errorf("table shows a section or row not measured:\n%s", out)
	}
}

// TestBenchRowCancel: a row cancelled before it starts is not run; one in
// flight that finishes within the grace is kept; one still running after
// it is dropped (left to finish on its own) and every later row is refused.
func TestBenchRowCancel(t *testing.T) {
	for _, c := range []struct {
		name      string
		before    bool          // cancelled before the row starts
		grace     time.Duration // the row finishes at the cancel: within any grace but zero
		kept, ran bool
	}{
		{"cancelled before", true, time.Hour, false, false},
		{"finishes within the grace", false, time.Hour, true, true},
		{"still running after the grace", false, 0, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := &gpuBench{ctx: ctx, grace: c.grace, weights: bench.NewWeights(nil)}
			if c.before {
				cancel()
			}
			started, release := make(chan struct{}), make(chan struct{})
			var ran atomic.Bool
			go func() {
				if !c.before {
					<-started
					cancel()
				}
			}()
			kept := g.row(func() {
				ran.Store(true)
				close(started)
				<-ctx.Done()
				if c.grace == 0 {
					<-release // still running when the grace is over
				}
			})
			close(release)
			if kept != c.kept || ran.Load() != c.ran || g.stopped == c.kept {
				t.Errorf("kept %v (want %v), ran %v (want %v), stopped %v", kept, c.kept, ran.Load(), c.ran, g.stopped)
			}
			if g.row(func() { t.Error("a row ran after the cut") }) {
				t.Error("a row was accepted after the cut")
			}
		})
	}
}
