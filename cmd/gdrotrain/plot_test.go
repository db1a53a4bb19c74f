package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const plotFixture = "../../tools/report/testdata/run3"

// TestPlotRun: plot --run on the trainer fixture, and on a gdro-sim file
// with the default output folder beside it.
func TestPlotRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "plots")
	msg, err := runCmd(t, "", "plot", "--run", plotFixture, "--out", out)
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

	dir := t.TempDir()
	sim := filepath.Join(dir, "sim.jsonl")
	if _, err := runCmd(t, "", "gdro-sim", "--preset", "prompt-10bins", "--steps", "8", "--batch", "16", "--population", "64",
		"--out", sim); err != nil {
		t.Fatal(err)
	}
	msg, err = runCmd(t, "", "plot", "--run", sim)
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
	if _, err := runCmd(t, "", "plot", "--compare", plotFixture, sim, "--out", cmp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cmp, "cmp_mean_bin.png")); err != nil {
		t.Error(err)
	}
}

func TestPlotErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot"}, "nothing to plot"},
		{[]string{"plot", "--run", missing}, missing},
		{[]string{"plot", "--compare", plotFixture, "--out", t.TempDir()}, "at least two runs"},
		{[]string{"plot", "--compare", plotFixture, plotFixture}, "needs --out"},
		{[]string{"plot", "--run", plotFixture, "--compare", plotFixture}, "not both"},
		{[]string{"plot", "--run", plotFixture, "extra"}, "unexpected arguments"},
	} {
		_, err := runCmd(t, "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}
