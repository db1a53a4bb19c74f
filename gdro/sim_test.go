package gdro

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/rng"
)

func smallSim() SimConfig {
	sc := DefaultSimConfig()
	sc.Steps, sc.BatchSize, sc.Population = 40, 64, 512
	return sc
}

func TestSimulateDeterministic(t *testing.T) {
	cfg, _ := Preset("rollout-10bins")
	cfg.Prompt.Enabled = true
	var o1, o2, t1, t2 bytes.Buffer
	s1, err := Simulate(cfg, smallSim(), &o1, &t1)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := Simulate(cfg, smallSim(), &o2, &t2)
	if !bytes.Equal(o1.Bytes(), o2.Bytes()) || !bytes.Equal(t1.Bytes(), t2.Bytes()) || s1.Format() != s2.Format() {
		t.Fatal("two identical simulations differ")
	}
	if n := strings.Count(o1.String(), "\n"); n != 40 {
		t.Errorf("%d JSONL lines, want 40", n)
	}
	sc := smallSim()
	sc.Seed = 2
	var o3 bytes.Buffer
	_, _ = Simulate(cfg, sc, &o3, nil)
	if bytes.Equal(o1.Bytes(), o3.Bytes()) {
		t.Error("another seed gives the same run")
	}
}

// The default gdro-sim run (the one reported in the README): paper mode beats
// the uniform allocation's WSE and the mean bin index rises; in
// reference_compat the arm probabilities stay exactly uniform and μ at 0.
func TestSimulatePaperVsReferenceCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size simulation")
	}
	cfg, _ := Preset("rollout-10bins")
	paper, err := Simulate(cfg, DefaultSimConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", paper.Format())
	if !(paper.WSEReduction > 0.02 && paper.WSEReductionLate > 0.02) {
		t.Errorf("paper mode: WSE reduction %.4f (late %.4f), want > 2%%", paper.WSEReduction, paper.WSEReductionLate)
	}
	if !(paper.MeanBinSlope > 0 && paper.MeanBinLast > paper.MeanBinFirst+1) {
		t.Errorf("paper mode: mean bin %.2f → %.2f (slope %.3f), want rising", paper.MeanBinFirst, paper.MeanBinLast, paper.MeanBinSlope)
	}
	if paper.BudgetExactFrac != 1 || paper.MuMeanLate <= 0 || paper.ArmProbMaxDev == 0 {
		t.Errorf("paper mode: exact %v, μ %v, arm dev %v", paper.BudgetExactFrac, paper.MuMeanLate, paper.ArmProbMaxDev)
	}
	cfg.Rollout.Mode = ModeReferenceCompat
	ref, err := Simulate(cfg, DefaultSimConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", ref.Format())
	if ref.ArmProbMaxDev != 0 || ref.MuFinal != 0 || ref.BudgetExactFrac != 1 {
		t.Errorf("reference_compat: arm dev %v, μ %v, exact %v", ref.ArmProbMaxDev, ref.MuFinal, ref.BudgetExactFrac)
	}
	if !(ref.WSEReduction < paper.WSEReduction) {
		t.Errorf("reference_compat WSE reduction %.4f not below paper's %.4f", ref.WSEReduction, paper.WSEReduction)
	}
}

// Replaying the simulator's trace under the same configuration reproduces the
// simulator's controller decisions exactly (the trace holds n_max outcomes;
// each prompt uses its first n_i, which are the rollouts the simulator drew).
func TestReplayReproducesSimulation(t *testing.T) {
	cfg, _ := Preset("rollout-10bins")
	cfg.Prompt.Enabled, cfg.Prompt.Signal = true, SignalReward
	var out, trace bytes.Buffer
	if _, err := Simulate(cfg, smallSim(), &out, &trace); err != nil {
		t.Fatal(err)
	}
	var rep bytes.Buffer
	sum, err := Replay(cfg, bytes.NewReader(trace.Bytes()), &rep)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Steps != 40 {
		t.Fatalf("replayed %d steps", sum.Steps)
	}
	simLines := strings.Split(strings.TrimSpace(out.String()), "\n")
	repLines := strings.Split(strings.TrimSpace(rep.String()), "\n")
	for i := range simLines {
		var a, b StepRecord
		_ = json.Unmarshal([]byte(simLines[i]), &a)
		_ = json.Unmarshal([]byte(repLines[i]), &b)
		ja, _ := json.Marshal([]any{a.BinCount, a.BinAcc, a.BinNMean, a.PromptRecord, a.RolloutRecord})
		jb, _ := json.Marshal([]any{b.BinCount, b.BinAcc, b.BinNMean, b.PromptRecord, b.RolloutRecord})
		if string(ja) != string(jb) {
			t.Fatalf("step %d: simulation and replay disagree:\n%s\n%s", i+1, ja, jb)
		}
		checkClose(t, "estimated WSE", b.WSE, a.SimRecord.WSEEstimated, 0)
	}
}

func TestSimConfigValidate(t *testing.T) {
	for _, edit := range []func(*SimConfig){
		func(s *SimConfig) { s.Steps = 0 },
		func(s *SimConfig) { s.Population = s.BatchSize - 1 },
		func(s *SimConfig) { s.Domains = 0 },
		func(s *SimConfig) { s.LR = -1 },
		func(s *SimConfig) { s.Transfer = 2 },
		func(s *SimConfig) { s.RatioNoise = -1 },
	} {
		sc := DefaultSimConfig()
		edit(&sc)
		if _, err := Simulate(DefaultConfig(), sc, nil, nil); err == nil || !strings.Contains(err.Error(), "gdro sim") {
			t.Errorf("%+v: %v", sc, err)
		}
	}
}

func TestRNG(t *testing.T) {
	a, b := rng.NewStream(1, 2, 3), rng.NewStream(1, 2, 3)
	for i := 0; i < 100; i++ {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same key, different draws")
		}
	}
	if rng.NewStream(1, 2, 3).Uint64() == rng.NewStream(1, 2, 4).Uint64() {
		t.Error("different keys, same draw")
	}
	s := rng.NewStream(42)
	sum, sq := 0.0, 0.0
	for i := 0; i < 100000; i++ {
		u := s.Float64()
		if u < 0 || u >= 1 {
			t.Fatalf("float64 %v outside [0, 1)", u)
		}
		z := s.Normal()
		sum += z
		sq += z * z
		if k := s.IntN(7); k < 0 || k >= 7 {
			t.Fatalf("intn(7) = %d", k)
		}
	}
	// mean ± 5σ/√n with n = 1e5: |mean| < 0.016, |var − 1| < 0.03
	if m := sum / 1e5; m > 0.016 || m < -0.016 || sq/1e5 < 0.97 || sq/1e5 > 1.03 {
		t.Errorf("normal draws: mean %v, second moment %v", m, sq/1e5)
	}
	p := permutation(100, rng.NewStream(3))
	seen := make([]bool, 100)
	for _, v := range p {
		seen[v] = true
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("permutation misses %d", i)
		}
	}
	if rng.UniformAt(1, 2) != rng.UniformAt(1, 2) || rng.UniformAt(1, 2) == rng.UniformAt(1, 3) {
		t.Error("uniformAt is not a keyed function")
	}
}

// The dual step changes the paper-mode allocation (docs/algorithm.md §7.3):
// the default gdro-sim run with α_μ = 0.05 and with α_μ = 0 chooses
// different arms on most steps, whatever γ (before the joint-probability DP
// the two runs were identical step for step at γ = 0), and only the run
// whose μ moves beats the uniform allocation's WSE. With dp_weight prompt
// μ cancels and the dual step changes little.
func TestSimulateDualStepShapesAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size simulations")
	}
	run := func(gamma, dualLR float64, weight string) (*SimSummary, []StepRecord) {
		cfg, _ := Preset("rollout-10bins")
		cfg.Rollout.Gamma, cfg.Rollout.DualLR, cfg.Rollout.DPWeight = gamma, dualLR, weight
		var out bytes.Buffer
		sum, err := Simulate(cfg, DefaultSimConfig(), &out, nil)
		if err != nil {
			t.Fatal(err)
		}
		var recs []StepRecord
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r StepRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		return sum, recs
	}
	differing := func(a, b []StepRecord) int {
		n := 0
		for i := range a {
			if !slices.Equal(a[i].BinN, b[i].BinN) {
				n++
			}
		}
		return n
	}
	for _, gamma := range []float64{0.01, 0} {
		with, a := run(gamma, 0.05, DPWeightBin)
		without, b := run(gamma, 0, DPWeightBin)
		d := differing(a, b)
		t.Logf("γ %v: arms differ on %d of %d steps; WSE reduction %.4f with the dual step, %.4f without; μ late %.4f",
			gamma, d, len(a), with.WSEReduction, without.WSEReduction, with.MuMeanLate)
		if d < len(a)/2 {
			t.Errorf("γ %v: the dual step changed the arms on %d of %d steps, want at least half", gamma, d, len(a))
		}
		if !(with.WSEReduction > 0.02 && without.WSEReduction < with.WSEReduction-0.03) {
			t.Errorf("γ %v: WSE reduction %.4f with the dual step, %.4f without: want > 2%% and ≥ 3 points better", gamma, with.WSEReduction, without.WSEReduction)
		}
		if without.MuFinal != 0 || !(with.MuMeanLate > 0) {
			t.Errorf("γ %v: μ %v without the dual step, %v with", gamma, without.MuFinal, with.MuMeanLate)
		}
	}
	// the exact primal (dp_weight prompt) needs no μ: at γ = 0 its arms do not depend on it
	_, a := run(0, 0.05, DPWeightPrompt)
	_, b := run(0, 0, DPWeightPrompt)
	if d := differing(a, b); d != 0 {
		t.Errorf("dp_weight prompt, γ 0: the dual step changed the arms on %d steps, want 0", d)
	}
}

// μ is the budget's shadow price in the simulator too: over the second half
// of the default run its mean falls as the budget n̄ grows (0.134, 0.085,
// 0.053 for n̄ = 3, 4, 6). The dual step is 0.01 here: at the default 0.05
// the argmax best responses of classes with no measured variance jump
// between n̄ (μ = 0, a tie) and n_min (μ > 0), and μ chatters near 0 once
// the budget is loose (n̄ = 6: 0.093).
func TestSimulateMuTracksBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size simulations")
	}
	prev := math.Inf(1)
	for _, nbar := range []int{3, 4, 6} {
		cfg, _ := Preset("rollout-10bins")
		cfg.Rollout.NMean, cfg.Rollout.DualLR = nbar, 0.01
		sum, err := Simulate(cfg, DefaultSimConfig(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("n̄ %d: μ over the second half %.4f, WSE reduction %.4f", nbar, sum.MuMeanLate, sum.WSEReduction)
		if !(sum.MuMeanLate < 0.9*prev) {
			t.Errorf("n̄ %d: mean μ %.4f, want below 0.9 × %.4f (the tighter budget's)", nbar, sum.MuMeanLate, prev)
		}
		if !(sum.WSEReduction > 0.02) {
			t.Errorf("n̄ %d: WSE reduction %.4f, want > 2%%", nbar, sum.WSEReduction)
		}
		prev = sum.MuMeanLate
	}
}
