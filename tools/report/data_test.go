package report

// data_test.go: the numbers each figure plots, checked against values
// computed by hand from testdata/run3 (a 3-step Prompt+Rollout-GDRO
// trainer-style run: 8 prompts per step, 10 bins + accbin_excl, n̄ = 4,
// arms 2…8; every value below is worked out in the comments).

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const fixtureRun = "testdata/run3"

func loadFixture(t *testing.T) *Run {
	t.Helper()
	r, err := LoadRun(fixtureRun)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// near reports |a − b| ≤ 1e-12·max(1, |b|), NaN equal to NaN.
func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b))
}

func checkSeries(t *testing.T, what string, s Series, x, y []float64) {
	t.Helper()
	if len(s.X) != len(x) || len(s.Y) != len(y) {
		t.Fatalf("%s: %d/%d points, want %d: X %v Y %v", what, len(s.X), len(s.Y), len(x), s.X, s.Y)
	}
	for i := range x {
		if !near(s.X[i], x[i]) || !near(s.Y[i], y[i]) {
			t.Errorf("%s point %d: (%v, %v), want (%v, %v)", what, i, s.X[i], s.Y[i], x[i], y[i])
		}
	}
}

func checkVec(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if !near(got[i], want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

var nan = math.NaN()

func TestLoadFixture(t *testing.T) {
	r := loadFixture(t)
	if len(r.Records) != 3 || len(r.Labels) != 11 || r.NumBins() != 10 {
		t.Fatalf("records %d, labels %d, bins %d; want 3, 11, 10", len(r.Records), len(r.Labels), r.NumBins())
	}
	if r.Method() != "prompt+rollout" || r.Name != "run3" {
		t.Errorf("method %q name %q", r.Method(), r.Name)
	}
	if r.ValPath == "" || len(r.Val) != 2 || !strings.Contains(r.Config, "a<b") {
		t.Errorf("validation %q (%d), config %q", r.ValPath, len(r.Val), r.Config)
	}
	if len(r.Notes) != 0 {
		t.Errorf("unexpected notes %v", r.Notes)
	}
}

// TestScalarDynamics: mean bin, mass ≥ k, entropy bound, μ, training and
// validation series.
func TestScalarDynamics(t *testing.T) {
	r := loadFixture(t)
	steps := []float64{1, 2, 3}
	// step 2: bins 0×4, 3×2, 9×1 (+1 excl, not counted): (0+6+9)/7;
	// step 3: bins 0,3,8,9 × 2: 40/8.
	checkSeries(t, "mean_bin", r.Scalar("mean_bin"), steps, []float64{0, 15.0 / 7, 5})
	// shares: step 2 bin3 2/8 + bin9 1/8 (excl 1/8 not counted); step 3
	// bins 3, 8, 9 at 2/8 each.
	m3, ok := r.MassAtLeast(3)
	if !ok {
		t.Fatal("MassAtLeast(3) not ok")
	}
	checkSeries(t, "mass≥3", m3, steps, []float64{0, 0.375, 0.75})
	m8, _ := r.MassAtLeast(8)
	checkSeries(t, "mass≥8", m8, steps, []float64{0, 0.125, 0.5})
	if _, ok := r.MassAtLeast(10); ok {
		t.Error("MassAtLeast(10) ok with 10 bins")
	}
	// present classes: 1, 4 (bins 0, 3, 9, excl), 4 (bins 0, 3, 8, 9)
	checkSeries(t, "max entropy", r.MaxEntropy(), steps, []float64{0, math.Log(4), math.Log(4)})
	checkSeries(t, "weight_entropy", r.Scalar("weight_entropy"), steps, []float64{0, 1.2798542258336676, 1.2798542258336676})
	checkSeries(t, "mu", r.Scalar("mu"), steps, []float64{0, 0.05, 0.03})
	checkSeries(t, "wse_ratio", r.Scalar("wse_ratio"), steps, []float64{0.95, 0.9, 0.85})
	checkSeries(t, "Δmean bin", r.DeltaMeanBin(), steps, []float64{0, 15.0 / 7, 5 - 15.0/7})
	checkSeries(t, "kl", r.Scalar("kl"), steps, []float64{0, 0.001, 0.002})
	if s, ok := fieldSeries(r, trainSpecs[1].fields[0]); !ok || s.Y[2] != 0.5 {
		t.Errorf("training accuracy reads acc_mean: %v %v", s, ok)
	}
	if r.Has("no_such_field") || r.Scalar("no_such_field").Len() != 0 {
		t.Error("absent field reported present")
	}
}

// TestLeadLagByHand: Δμ = (0.05, −0.02, 0.01); Δmean_bin = (0, 15/7,
// 20/7). Pairs (Δμ_t, Δbin_{t+k}) over t = 2, 3 (1-based) with t+k in
// [2, 3]: only k = 0 has two pairs, (−0.02, 15/7) and (0.01, 20/7), which
// rise together: correlation 1. Other lags have < 2 pairs: 0.
func TestLeadLagByHand(t *testing.T) {
	r := loadFixture(t)
	lags, corrs, ok := r.LeadLagCorr(3)
	if !ok {
		t.Fatal("LeadLag not ok")
	}
	checkVec(t, "lags", lags, []float64{-3, -2, -1, 0, 1, 2, 3})
	checkVec(t, "corrs", corrs, []float64{0, 0, 0, 1, 0, 0, 0})
}

// TestGrids: per-class arrays with absent bins as NaN (a present bin with
// value 0 stays 0).
func TestGrids(t *testing.T) {
	r := loadFixture(t)
	share, ok := r.Grid("bin_share")
	if !ok {
		t.Fatal("no bin_share grid")
	}
	checkVec(t, "share step 1", share.Z[0], []float64{1, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan})
	checkVec(t, "share step 2", share.Z[1], []float64{0.5, nan, nan, 0.25, nan, nan, nan, nan, nan, 0.125, 0.125})
	acc, _ := r.Grid("bin_acc")
	checkVec(t, "acc step 2", acc.Z[1], []float64{0.25, nan, nan, 0.5, nan, nan, nan, nan, nan, 1, 0})
	checkVec(t, "acc step 3", acc.Z[2], []float64{0, nan, nan, 0.5, nan, nan, nan, nan, 0.75, 1, nan})
	w, _ := r.Grid("bin_weight")
	checkVec(t, "weight step 3", w.Z[2], []float64{0.4, nan, nan, 0.3, nan, nan, nan, nan, 0.2, 0.1, nan})
	n, _ := r.Grid("bin_n_mean")
	checkVec(t, "n step 2", n.Z[1], []float64{6, nan, nan, 2, nan, nan, nan, nan, nan, 2, 2})
	if lo, hi := n.Range(); lo != 2 || hi != 8 {
		t.Errorf("n range %v..%v, want 2..8", lo, hi)
	}
	if lo, hi, ok := r.ArmRange(); !ok || lo != 2 || hi != 8 {
		t.Errorf("arm range %v..%v %v", lo, hi, ok)
	}
	if _, ok := r.Grid("bin_nothing"); ok {
		t.Error("absent grid ok")
	}
	checkVec(t, "steps", share.Steps, []float64{1, 2, 3})
	// sorted non-NaN shares: 0.125 0.125 0.25 0.25 0.25 0.25 0.25 0.5 1
	// (9 values); the 0.5-quantile is the 5th = 0.25, the 0.98 the 9th.
	if q := share.Quantile(0.5); q != 0.25 {
		t.Errorf("median share %v, want 0.25", q)
	}
	if q := share.Quantile(0.98); q != 1 {
		t.Errorf("0.98-quantile %v, want 1", q)
	}
}

func TestDownsample(t *testing.T) {
	g := Grid{Steps: []float64{1, 2, 3, 4, 5}, Labels: []string{"accbin_0", "accbin_1"},
		Z: [][]float64{{1, nan}, {3, nan}, {5, 2}, {nan, nan}, {7, 4}}}
	d := g.Downsample(2) // windows [0, 2) and [2, 5)
	checkVec(t, "steps", d.Steps, []float64{1.5, 4})
	checkVec(t, "col 0", d.Z[0], []float64{2, nan})
	checkVec(t, "col 1", d.Z[1], []float64{6, 3})
	if same := g.Downsample(5); len(same.Steps) != 5 {
		t.Error("Downsample changed a small grid")
	}
}

// TestSnapshots: 3 steps give three snapshots (start, early, late); the
// rollout share is count·n / Σ count·n: step 2 (4·6, 2·2, 1·2, 1·2)/32,
// step 3 (2·8, 2·4, 2·2, 2·2)/32.
func TestSnapshots(t *testing.T) {
	r := loadFixture(t)
	sn := r.Snapshots()
	if len(sn) != 3 {
		t.Fatalf("%d snapshots, want 3", len(sn))
	}
	for i, want := range []struct {
		step int
		name string
	}{{1, "start"}, {2, "early"}, {3, "late"}} {
		if sn[i].Step != want.step || sn[i].Name != want.name {
			t.Errorf("snapshot %d: step %d %q, want %d %q", i, sn[i].Step, sn[i].Name, want.step, want.name)
		}
	}
	checkVec(t, "rollout step 1", sn[0].Rollout, []float64{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	checkVec(t, "rollout step 2", sn[1].Rollout, []float64{0.75, 0, 0, 0.125, 0, 0, 0, 0, 0, 0.0625, 0.0625})
	checkVec(t, "rollout step 3", sn[2].Rollout, []float64{0.5, 0, 0, 0.25, 0, 0, 0, 0, 0.125, 0.125, 0})
	checkVec(t, "weight step 2", sn[1].Weight, []float64{0.4, 0, 0, 0.3, 0, 0, 0, 0, 0, 0.2, 0.1})
	checkVec(t, "share step 3", sn[2].Share, []float64{0.25, 0, 0, 0.25, 0, 0, 0, 0, 0.25, 0.25, 0})

	for _, c := range []struct {
		T    int
		want []int
	}{{1, []int{0}}, {2, []int{0, 1}}, {4, []int{0, 1, 2, 3}}, {5, []int{0, 1, 2, 4}}, {300, []int{0, 75, 150, 299}}} {
		got := SnapshotIndices(c.T)
		if len(got) != len(c.want) {
			t.Errorf("SnapshotIndices(%d) = %v, want %v", c.T, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("SnapshotIndices(%d) = %v, want %v", c.T, got, c.want)
			}
		}
	}
}

func TestValidationSeries(t *testing.T) {
	r := loadFixture(t)
	checkSeries(t, "pooled", r.ValScalar("pooled_pass_at_n"), []float64{0, 3}, []float64{0.5, 0.6})
	checkSeries(t, "worst", r.ValScalar("worst_group_acc"), []float64{0, 3}, []float64{0.1, 0.15})
	b := r.Benchmarks()
	if len(b) != 2 || b[0] != "aime24" || b[1] != "math500" {
		t.Fatalf("benchmarks %v", b)
	}
	ss := r.BenchSeries("aime24")
	var labels []string
	for _, s := range ss {
		labels = append(labels, s.Label)
	}
	// pass@k in numeric order, not the JSON's alphabetical pass@1, pass@16, pass@2 …
	if got := strings.Join(labels, " "); got != "mean@16 pass@1 pass@2 pass@4 pass@8 pass@16" {
		t.Fatalf("aime24 series %q", got)
	}
	checkSeries(t, "aime24 mean", ss[0], []float64{0, 3}, []float64{0.1, 0.15})
	checkSeries(t, "aime24 pass@16", ss[5], []float64{0, 3}, []float64{0.5, 0.6})
	checkSeries(t, "math500 pass@2", r.BenchSeries("math500")[2], []float64{0, 3}, []float64{0.45, 0.6})
}

func TestBinTick(t *testing.T) {
	r := loadFixture(t)
	for c, want := range map[int]string{0: "0 hardest", 1: "1", 9: "9 easiest", 10: "excl"} {
		if got := BinTick(r.Labels, c); got != want {
			t.Errorf("BinTick(%d) = %q, want %q", c, got, want)
		}
	}
	if got := BinTick([]string{"accbin_0", "accbin_1", "accbin_2"}, 2); got != "2 easiest" {
		t.Errorf("without excl: %q", got)
	}
}

// writeRun writes metrics lines into a fresh run folder.
func writeRun(t *testing.T, lines ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MetricsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func line(step int, share string) string {
	return `{"step":` + strconv.Itoa(step) + `,"bin_labels":["accbin_0","accbin_1"],"bin_share":` + share + `,"mean_bin":` + strconv.Itoa(step) + `}`
}

// TestResumedRun: a step logged again replaces the earlier lines from that
// step on, with a note.
func TestResumedRun(t *testing.T) {
	dir := writeRun(t, line(1, "[1,0]"), line(2, "[0.5,0.5]"), line(3, "[0.5,0.5]"), line(2, "[0,1]"), line(3, "[0,1]"))
	r, err := LoadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSeries(t, "mass≥1", mustMass(t, r, 1), []float64{1, 2, 3}, []float64{0, 1, 1})
	if len(r.Notes) < 1 || !strings.Contains(r.Notes[0], "metrics.jsonl:4: step 2 logged again") {
		t.Errorf("notes %v", r.Notes)
	}
}

func mustMass(t *testing.T, r *Run, k int) Series {
	t.Helper()
	s, ok := r.MassAtLeast(k)
	if !ok {
		t.Fatalf("MassAtLeast(%d) not ok", k)
	}
	return s
}

// TestLoadErrors: bad input names the file and line.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		lines []string
		want  string
	}{
		{[]string{line(1, "[1,0]"), `{"step":2,`}, "metrics.jsonl:2: not a JSON object"},
		{[]string{line(1, "[1,0,0]")}, "metrics.jsonl:1: field bin_share has 3 values but bin_labels has 2"},
		{[]string{`{"bin_labels":["accbin_0"],"bin_share":[1]}`}, "metrics.jsonl:1: no \"step\" field"},
		{[]string{line(1, "[1,0]"), `{"step":2,"bin_labels":["accbin_0"],"bin_share":[1]}`}, "metrics.jsonl:2: bin_labels"},
		{[]string{`{"step":1,"bin_labels":["accbin_0"]}`}, "metrics.jsonl:1: no \"bin_share\" field"},
		{[]string{""}, "no step records"},
	}
	for _, c := range cases {
		dir := writeRun(t, c.lines...)
		_, err := LoadRun(dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%q: error %v, want it to name %s and say %q", c.lines, err, dir, c.want)
		}
	}
	dir := writeRun(t, line(1, "[1,0]"))
	if err := os.WriteFile(filepath.Join(dir, ValidationFile), []byte("{\"n\":4}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadRun(dir); err == nil || !strings.Contains(err.Error(), "validation.jsonl:1: no \"step\" field") {
		t.Errorf("validation without step: %v", err)
	}
	if _, err := LoadRun(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing folder: %v", err)
	}
	if _, err := LoadRun(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no metrics.jsonl") {
		t.Errorf("folder without metrics: %v", err)
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		v, span float64
		want    string
	}{{0, 1, "0"}, {0.30000000000000004, 1, "0.3"}, {25000, 1e5, "25k"}, {2e6, 1e7, "2M"}, {0.0005, 0.002, "0.0005"}, {0.0002, 0.0005, "2.00e-04"}, {150, 300, "150"}} {
		if got := formatTick(c.v, c.span); got != c.want {
			t.Errorf("formatTick(%v, %v) = %q, want %q", c.v, c.span, got, c.want)
		}
	}
	var labels []string
	for _, tk := range (niceTicks{target: 7, integer: true}).Ticks(0.5, 300.5) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "50 100 150 200 250 300" {
		t.Errorf("step ticks %q", got)
	}
	labels = labels[:0]
	for _, tk := range (niceTicks{target: 7, integer: true}).Ticks(0.5, 3.5) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "1 2 3" {
		t.Errorf("3-step ticks %q", got)
	}
}

// TestSmoothing: the moving average drawn over long series.
func TestSmoothing(t *testing.T) {
	s := Series{X: []float64{1, 2, 3, 4, 5}, Y: []float64{1, 2, 6, 2, 4}}
	// window 3, shrinking at the ends: (1+2)/2, (1+2+6)/3, (2+6+2)/3, (6+2+4)/3, (2+4)/2
	checkVec(t, "moving average", s.MovingAverage(3).Y, []float64{1.5, 3, 10.0 / 3, 4, 3})
	checkVec(t, "window 1", s.MovingAverage(1).Y, s.Y)
	for n, want := range map[int]int{3: 0, 99: 0, 100: 3, 300: 7, 1000: 21} {
		if got := SmoothWindow(n); got != want {
			t.Errorf("SmoothWindow(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestMergePass1: pass@1 equal to mean@n is one line, labelled so.
func TestMergePass1(t *testing.T) {
	r := loadFixture(t)
	ss := mergePass1(r.BenchSeries("aime24"))
	if len(ss) != 5 || ss[0].Label != "mean@16 = pass@1" || ss[1].Label != "pass@2" {
		t.Errorf("merged: %d series, %q, %q", len(ss), ss[0].Label, ss[1].Label)
	}
	diff := []Series{{Label: "mean@4", X: []float64{1}, Y: []float64{0.5}}, {Label: "pass@1", X: []float64{1}, Y: []float64{0.4}}}
	if got := mergePass1(diff); len(got) != 2 {
		t.Error("merged different series")
	}
}
