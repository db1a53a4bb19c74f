package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/gdro"
)

const plotFixture = "testdata/run3"

// runPlot runs Plot and returns what it printed.
func runPlot(o PlotOptions) (string, error) {
	var out strings.Builder
	o.Stdout = &out
	err := Plot(o)
	return out.String(), err
}

// TestPlotRun: plot --run on the trainer fixture, and on a gdro-sim file
// with the default output folder beside it.
func TestPlotRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plots")
	msg, err := runPlot(PlotOptions{Run: plotFixture, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "29 figures") {
		t.Errorf("output %q", msg)
	}
	for _, f := range []string{"index.html", "heat_share.png", "heat_share.svg", "snap_rollout.png", "train_kl.svg", "val_01_aime24.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}

	// gdro-sim --preset prompt-10bins --steps 8 --batch 16 --population 64 --out sim.jsonl
	dir := t.TempDir()
	sim := filepath.Join(dir, "sim.jsonl")
	cfg, err := gdro.Preset("prompt-10bins")
	if err != nil {
		t.Fatal(err)
	}
	sc := gdro.DefaultSimConfig()
	sc.Steps, sc.BatchSize, sc.Population = 8, 16, 64
	f, err := os.Create(sim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gdro.Simulate(cfg, sc, f, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	msg, err = runPlot(PlotOptions{Run: sim})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "skipped") {
		t.Errorf("sim output %q does not mention skipped figures", msg)
	}
	html, err := os.ReadFile(filepath.Join(dir, "sim-plots", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "no Rollout-GDRO fields") {
		t.Error("index.html has no note for the Rollout-GDRO figures")
	}

	// --compare RUN_A RUN_B with the runs as separate arguments
	cmp := filepath.Join(dir, "cmp")
	if _, err := runPlot(PlotOptions{Compare: []string{plotFixture}, Args: []string{sim}, Out: cmp}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cmp, "cmp_mean_bin.png")); err != nil {
		t.Error(err)
	}
}

func TestPlotErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		name string
		o    PlotOptions
		want string
	}{
		{"nothing", PlotOptions{}, "nothing to plot"},
		{"--run missing", PlotOptions{Run: missing}, missing},
		{"--compare one run", PlotOptions{Compare: []string{plotFixture}, Out: t.TempDir()}, "at least two runs"},
		{"--compare without --out", PlotOptions{Compare: []string{plotFixture}, Args: []string{plotFixture}}, "needs --out"},
		{"--run and --compare", PlotOptions{Run: plotFixture, Compare: []string{plotFixture}}, "not both"},
		{"--run with an argument", PlotOptions{Run: plotFixture, Args: []string{"extra"}}, "unexpected arguments"},
	} {
		_, err := runPlot(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}
