package report

// paper_test.go: the paper's measurements (docs/algorithm.md §8.1) on
// testdata/paper5, a hand-written 5-step Prompt+Rollout-GDRO run with 3
// bins (edges 0.4, 0.75), 4 prompts and 16 rollouts per step, and three
// validations (steps 0, 2, 5) of 8 prompts. Every expected value is worked
// out in the comments from the table below; only the numbers are checked
// here, no figure is rendered.
//
//	step  bin_count  bin_acc         bin_n (= bin_n_mean)  bin_weight
//	1     4 0 0      .25  0   0      4 0 0                 1   0   0
//	2     2 2 0      0    .5  0      6 2 0                 .6  .4  0
//	3     2 1 1      .2   .5  1      5 2 4                 .5  .3  .2
//	4     1 2 1      0    .75 1      8 2 4                 .5  .25 .25
//	5     1 1 2      .5   .5  .75    6 6 2                 .4  .4  .2

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const paperRun = "testdata/paper5"

func loadPaper(t *testing.T) *Run {
	t.Helper()
	r, err := LoadRun(paperRun)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tol is the tolerance of the hand-computed values: they are sums of a few
// terms in float64, so 1e-12 relative leaves room for rounding only.
const tol = 1e-12

func checkNear(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) && !(math.IsNaN(got) && math.IsNaN(want)) {
		t.Errorf("%s = %.15g, want %.15g", what, got, want)
	}
}

func TestPaperLeadLag(t *testing.T) {
	r := loadPaper(t)
	steps := []float64{1, 2, 3, 4, 5}
	// share (count/4): μ_data = Σ b·q̂_b = 0, .5, .25+.5, .5+.5, .25+1.
	data, _ := r.MeanBinUnder(DistShare)
	checkSeries(t, "μ_data", data, steps, []float64{0, 0.5, 0.75, 1, 1.25})
	// weights: 0, .4, .3+.4, .25+.5, .4+.4.
	w, _ := r.MeanBinUnder(DistWeight)
	checkSeries(t, "μ_weight", w, steps, []float64{0, 0.4, 0.7, 0.75, 0.8})
	g, ok := r.LeadLagGap(DistWeight)
	if !ok {
		t.Fatal("no lead–lag gap")
	}
	checkSeries(t, "Δμ weight", g, steps, []float64{0, -0.1, -0.05, -0.25, -0.45})
	// rollout share count·n/16: step 2 (12, 4, 0)/16 → 4/16; step 3
	// (10, 2, 4)/16 → (2 + 8)/16; step 4 (8, 4, 4)/16 → 12/16; step 5
	// (6, 6, 4)/16 → 14/16.
	ro, _ := r.MeanBinUnder(DistRollout)
	checkSeries(t, "μ_rollout", ro, steps, []float64{0, 0.25, 0.625, 0.75, 0.875})
	gr, _ := r.LeadLagGap(DistRollout)
	checkSeries(t, "Δμ rollout", gr, steps, []float64{0, -0.25, -0.125, -0.25, -0.375})
	// mean_bin logged by the trainer is μ_data
	checkSeries(t, "mean_bin", r.Scalar("mean_bin"), steps, data.Y)
}

func TestPaperWSE(t *testing.T) {
	r := loadPaper(t)
	// rows per bin over the run: bin 0 16+12+10+8+6 = 52 with 4+0+2+0+3 = 9
	// correct; bin 1 4+2+4+6 = 16 with 2+1+3+3 = 9; bin 2 4+4+4 = 12 with
	// 4+4+3 = 11.
	p := []float64{9.0 / 52, 9.0 / 16, 11.0 / 12}
	s := make([]float64, 3)
	for b := range s {
		s[b] = math.Sqrt(p[b] * (1 - p[b]))
	}
	sigma, pbar, ok := r.SigmaHat()
	if !ok {
		t.Fatal("no σ̂")
	}
	for b := range s {
		checkNear(t, "p̄["+shortTick(r.Labels, b)+"]", pbar[b], p[b])
		checkNear(t, "σ̂["+shortTick(r.Labels, b)+"]", sigma[b], s[b])
	}
	wse, uni, ratio, ok := r.PaperWSE()
	if !ok {
		t.Fatal("no WSE")
	}
	r2, r5, r6, r8 := math.Sqrt(2), math.Sqrt(5), math.Sqrt(6), math.Sqrt(8)
	want := []float64{
		1 * s[0] / 2,
		0.5*s[0]/r6 + 0.5*s[1]/r2,
		0.5*s[0]/r5 + 0.25*s[1]/r2 + 0.25*s[2]/2,
		0.25*s[0]/r8 + 0.5*s[1]/r2 + 0.25*s[2]/2,
		0.25*s[0]/r6 + 0.25*s[1]/r6 + 0.5*s[2]/r2,
	}
	// n̄ = Σ q̂·n = 16/4 = 4 at every step: uniform = Σ q̂·σ̂ / 2.
	wantU := []float64{
		s[0] / 2,
		(0.5*s[0] + 0.5*s[1]) / 2,
		(0.5*s[0] + 0.25*s[1] + 0.25*s[2]) / 2,
		(0.25*s[0] + 0.5*s[1] + 0.25*s[2]) / 2,
		(0.25*s[0] + 0.25*s[1] + 0.5*s[2]) / 2,
	}
	for i := range want {
		checkNear(t, "WSE", wse.Y[i], want[i])
		checkNear(t, "WSE uniform", uni.Y[i], wantU[i])
		checkNear(t, "WSE ratio", ratio.Y[i], want[i]/wantU[i])
	}
	// step 1 gives every prompt n̄: ratio exactly 1
	checkNear(t, "ratio at step 1", ratio.Y[0], 1)
}

func TestPaperTailBars(t *testing.T) {
	r := loadPaper(t)
	// 60th percentile of steps 1…5: 1 + 0.6·4 = 3.4 → the tail is steps 4, 5.
	checkNear(t, "TailStart", r.TailStart(TailQuantile), 3.4)
	tw, ok := r.TailWeights()
	if !ok || tw.Steps != 2 {
		t.Fatalf("TailWeights %+v %v", tw, ok)
	}
	checkVec(t, "tail p_b", tw.Mean, []float64{0.45, 0.325, 0.225}) // (.5+.4)/2, (.25+.4)/2, (.25+.2)/2
	checkNear(t, "uniform 1/C", tw.Uniform, 1.0/3)
	checkVec(t, "uniform over present", tw.UniformPresent, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
	tr, ok := r.TailRollouts()
	if !ok || tr.Steps != 2 {
		t.Fatalf("TailRollouts %+v %v", tr, ok)
	}
	checkVec(t, "tail rollouts per prompt", tr.Mean, []float64{7, 4, 3}) // (8+6)/2, (2+6)/2, (4+2)/2
	checkNear(t, "n̄", tr.Uniform, 4)

	// TailStart on other step sets: linear interpolation between order
	// statistics, as numpy.percentile.
	for _, c := range []struct {
		steps []int
		want  float64
	}{{[]int{7}, 7}, {[]int{1, 2}, 1.6}, {seq(1, 1000), 600.4}, {[]int{0, 50, 100, 150}, 90}} {
		run := &Run{}
		for _, s := range c.steps {
			run.Records = append(run.Records, Record{Step: s})
		}
		checkNear(t, "TailStart", run.TailStart(0.6), c.want)
	}
}

func seq(lo, hi int) []int {
	var s []int
	for i := lo; i <= hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestTailWeightsAbsentBin: a bin absent at a tail step counts 0 there,
// and the uniform-over-present reference is 1/K_t where it is present.
func TestTailWeightsAbsentBin(t *testing.T) {
	l := func(step int, share, w string) string {
		return `{"step":` + strconv.Itoa(step) + `,"bin_labels":["accbin_0","accbin_1","accbin_2"],"bin_share":` + share + `,"bin_weight":` + w + `}`
	}
	// steps 1, 2: tail from 1.6 → step 2 only; bin 2 absent there.
	r, err := LoadRun(writeRun(t, l(1, "[1,0,0]", "[1,0,0]"), l(2, "[0.5,0.5,0]", "[0.7,0.3,0]")))
	if err != nil {
		t.Fatal(err)
	}
	tw, ok := r.TailWeights()
	if !ok {
		t.Fatal("no tail weights")
	}
	checkVec(t, "tail p_b", tw.Mean, []float64{0.7, 0.3, 0})
	checkVec(t, "uniform over present", tw.UniformPresent, []float64{0.5, 0.5, 0})
	if n := r.WeightsNotApplied(); n != 0 {
		t.Errorf("WeightsNotApplied = %d without the flag", n)
	}
	// weights logged but not applied (a Rollout-GDRO run) are said so
	r, err = LoadRun(writeRun(t, strings.Replace(l(1, "[1,0,0]", "[1,0,0]"), "}", `,"weights_applied":false}`, 1),
		strings.Replace(l(2, "[1,0,0]", "[1,0,0]"), "}", `,"weights_applied":true}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.WeightsNotApplied(); n != 1 || !strings.Contains(notApplied(r), "At 1 of 2 steps") {
		t.Errorf("WeightsNotApplied = %d, %q", n, notApplied(r))
	}
}

func TestPaperHighBinAndSnapshots(t *testing.T) {
	r := loadPaper(t)
	if r.HighBins() != 1 {
		t.Fatalf("HighBins = %d with 3 bins, want 1 (⌊3/2⌋)", r.HighBins())
	}
	b, p, ok := r.HighBinBudget()
	if !ok {
		t.Fatal("no high-bin budget")
	}
	steps := []float64{1, 2, 3, 4, 5}
	checkSeries(t, "budget to bin 0", b, steps, []float64{1, 0.75, 0.625, 0.5, 0.375}) // 16, 12, 10, 8, 6 of 16
	checkSeries(t, "prompts in bin 0", p, steps, []float64{1, 0.5, 0.5, 0.25, 0.25})
	// 5 steps: round(f·4) for f = 0, ¼, ½, 1 → records 0, 1, 2, 4.
	sn := r.Snapshots()
	var got []string
	for _, s := range sn {
		got = append(got, s.Name+":"+strconv.Itoa(s.Step))
	}
	if strings.Join(got, " ") != "start:1 early:2 mid:3 late:5" {
		t.Errorf("snapshots %v", got)
	}
}

func TestPaperValidation(t *testing.T) {
	r := loadPaper(t)
	vb, err := r.ValByBin()
	if err != nil {
		t.Fatal(err)
	}
	// step 0, n = 4: c = 0 1 2 3 4 0 2 4 → rates 0 .25 .5 .75 1 0 .5 1 →
	// bins (edges .4, .75) 0 0 1 2 2 0 1 2.
	want := []int{0, 0, 1, 2, 2, 0, 1, 2}
	for i := range want {
		if vb.Bin[i] != want[i] {
			t.Fatalf("bins %v, want %v", vb.Bin, want)
		}
	}
	if vb.Count[0] != 3 || vb.Count[1] != 2 || vb.Count[2] != 3 {
		t.Errorf("counts %v", vb.Count)
	}
	if vb.Acc[0].Label != "bin 0, pass rate [0, 0.4) (3 prompts)" || vb.Acc[2].Label != "bin 2, pass rate [0.75, 1] (3 prompts)" {
		t.Errorf("labels %q, %q", vb.Acc[0].Label, vb.Acc[2].Label)
	}
	x := []float64{0, 2, 5}
	// bin 0 = prompts 0, 1, 5: (0+1+0)/12; step 2 (1+2+1)/12; step 5 (n = 8) (2+4+2)/24.
	checkSeries(t, "bin 0", vb.Acc[0], x, []float64{1.0 / 12, 1.0 / 3, 1.0 / 3})
	// bin 1 = prompts 2, 6: (2+2)/8, (2+3)/8, (4+4)/16.
	checkSeries(t, "bin 1", vb.Acc[1], x, []float64{0.5, 0.625, 0.5})
	// bin 2 = prompts 3, 4, 7: (3+4+4)/12, the same, (6+8+8)/24.
	checkSeries(t, "bin 2", vb.Acc[2], x, []float64{11.0 / 12, 11.0 / 12, 11.0 / 12})
	checkSeries(t, "worst bin", vb.Worst, x, []float64{1.0 / 12, 1.0 / 3, 1.0 / 3})

	// AIME: 2024 = prompts 0, 1; 2025 = prompts 2, 3.
	mean, pass, names, ok := r.AIMEAverage()
	if !ok || names[0] != "HuggingFaceH4/aime_2024" || names[1] != "MathArena/aime_2025" {
		t.Fatalf("AIME %v %v", names, ok)
	}
	// mean@n: ((0+1)/8 + (2+3)/8)/2, ((1+2)/8 + (2+3)/8)/2, ((2+4)/16 + (4+6)/16)/2.
	checkSeries(t, "AIME mean@n", mean, x, []float64{0.375, 0.5, 0.5})
	// pass@n (n = 4, 4, 8): a prompt with c > 0 passes: (1/2 + 1)/2, 1, 1.
	checkSeries(t, "AIME pass@n", pass, x, []float64{0.75, 1, 1})

	// mean accuracy 16/32, 20/32, 38/64: the peak is step 2, whose
	// checkpoint folder exists.
	pk, ok := r.PeakCheckpoint()
	if !ok || pk.Step != 2 || pk.MeanAcc != 0.625 || !pk.Exists || pk.Checkpoint != filepath.Join(paperRun, "checkpoints", "step_00000002") {
		t.Errorf("peak %+v %v", pk, ok)
	}
}

func TestAIMEYearAndBins(t *testing.T) {
	for src, want := range map[string]int{"HuggingFaceH4/aime_2024": 2024, "MathArena/aime_2025": 2025, "aime24": 2024, "aime25": 2025,
		"HuggingFaceH4/MATH-500": 0, "math-ai/amc23": 0, "aime": 0} {
		if got := aimeYear(src); got != want {
			t.Errorf("aimeYear(%q) = %d, want %d", src, got, want)
		}
	}
	// bin j covers [e_{j−1}, e_j) (docs/algorithm.md §4.4)
	edges := []float64{0.4, 0.75}
	for acc, want := range map[float64]int{0: 0, 0.39: 0, 0.4: 1, 0.74: 1, 0.75: 2, 1: 2} {
		if got := binOf(acc, edges); got != want {
			t.Errorf("binOf(%v) = %d, want %d", acc, got, want)
		}
	}
}

// TestPaperSkips: each measure is skipped, with a reason, when its fields
// are missing: a GRPO-like file (bin_share only), a Prompt-GDRO simulator
// run (no Rollout-GDRO fields, no validation), runs without a step-0
// validation or without prompt_correct or bin edges.
func TestPaperSkips(t *testing.T) {
	grpo, err := LoadRun(writeRun(t, line(1, "[1,0]"), line(2, "[0.5,0.5]")))
	if err != nil {
		t.Fatal(err)
	}
	figs, skipped := paperFigures(grpo)
	if len(figs) != 0 {
		t.Errorf("GRPO-like run drew %v", names(figs))
	}
	checkNames(t, "GRPO skipped", skippedNames(skipped),
		[]string{"dyn_high_bin_budget", "dyn_lead_lag", "dyn_wse", "paper_tail_rollouts", "paper_tail_weight"})
	if ms := paperMeasures(grpo); len(ms) != 0 {
		t.Errorf("GRPO-like run has measures %v", ms)
	}

	simDir, _ := simRun(t, "prompt-10bins")
	sim, err := LoadRun(simDir)
	if err != nil {
		t.Fatal(err)
	}
	figs, skipped = paperFigures(sim)
	checkNames(t, "prompt sim drawn", names(figs), []string{"dyn_lead_lag", "dyn_wse", "paper_tail_weight"})
	checkNames(t, "prompt sim skipped", skippedNames(skipped), []string{"dyn_high_bin_budget", "paper_tail_rollouts"})
	if f, s := paperValidationFigures(sim); len(f) != 0 || len(s) != 0 {
		t.Errorf("no validation: figures %v, skipped %v (validationFigures notes it once)", names(f), s)
	}

	// run3: validation without prompt_correct, and AIME 2024 only.
	_, skipped = paperValidationFigures(loadFixture(t))
	checkNames(t, "run3 skipped", skippedNames(skipped), []string{"val_aime", "val_bins"})
	for _, s := range skipped {
		if s.Name == "val_bins" && !strings.Contains(s.Reason, "no step-0") && !strings.Contains(s.Reason, "prompt_correct") {
			t.Errorf("val_bins reason %q", s.Reason)
		}
	}

	// no step-0 validation; then a step-0 line but no config.yaml
	dir := writeRun(t, line(1, "[1,0]"))
	val := `{"step":3,"n":2,"mean_acc":0.5,"prompt_correct":[1,1]}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, ValidationFile), []byte(val), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ValByBin(); err == nil || !strings.Contains(err.Error(), "no step-0 validation") {
		t.Errorf("ValByBin without step 0: %v", err)
	}
	if pk, ok := r.PeakCheckpoint(); !ok || pk.Step != 3 || pk.Exists {
		t.Errorf("peak %+v %v", pk, ok)
	}
	val = `{"step":0,"n":2,"mean_acc":0.5,"prompt_correct":[1,1]}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, ValidationFile), []byte(val), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err = LoadRun(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ValByBin(); err == nil || !strings.Contains(err.Error(), "no config.yaml") {
		t.Errorf("ValByBin without config: %v", err)
	}
	// num_bins alone gives edges j/B
	r.Config, r.ConfigPath = "gdro:\n  classifier:\n    num_bins: 4\n", "config.yaml"
	e, err := r.ClassifierEdges()
	if err != nil {
		t.Fatal(err)
	}
	checkVec(t, "uniform edges", e, []float64{0.25, 0.5, 0.75})
}

// TestPaperReport: the paper5 report's figure list, key numbers and
// captions, without rendering.
func TestPaperReport(t *testing.T) {
	rep := Build(loadPaper(t))
	got := names(rep.Figures)
	for _, want := range []string{"dyn_lead_lag", "dyn_lead_lag_corr", "dyn_wse", "dyn_wse_step", "paper_tail_weight", "paper_tail_rollouts",
		"dyn_high_bin_budget", "snap_weight", "snap_rollout", "val_bins", "val_aime"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("no figure %s in %v", want, got)
		}
	}
	// 3 bins have no mass ≥ 3, and the fixture logs no training fields
	checkNames(t, "skipped", skippedNames(rep.Skipped), []string{"dyn_mass", "train_*"})
	var measures []string
	for _, m := range rep.Measures {
		measures = append(measures, m.Name+" = "+m.Value)
	}
	all := strings.Join(measures, "\n")
	for _, want := range []string{
		"Lead–lag Δμ = μ_weight − μ_data = -0.170 (mean), -0.350 (tail mean)",
		"Figure 1: Prompt-GDRO p_b, tail average = 0: 0.450, 1: 0.325, 2: 0.225",
		"Figure 1: rollouts per prompt, tail average = 0: 7.00, 1: 4.00, 2: 3.00",
		"High-bin budget share, tail mean = 0.438 (prompt share 0.250)",
		"Validation worst-bin accuracy = 0.333 at step 5 (bin 0); 0.083 at step 0",
		"Peak checkpoint = step 2 (mean accuracy 0.6250), checkpoint kept",
		"AIME (2024 + 2025) / 2 = AIME mean@8 0.5000 at step 5, 0.5000 at the peak; AIME pass@8 1.0000 at step 5",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("measures lack %q:\n%s", want, all)
		}
	}
	for _, f := range rep.Figures {
		if f.Name == "val_all" && !strings.Contains(f.Caption, "Peak: step 2") {
			t.Errorf("val_all caption does not name the peak: %q", f.Caption)
		}
	}
	html := rep.HTML()
	if !strings.Contains(html, "Key numbers") || !strings.Contains(html, "step_00000002") {
		t.Error("index.html has no key-number table naming the peak checkpoint")
	}
}
