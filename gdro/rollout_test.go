package gdro

import (
	"encoding/json"
	"fmt"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func newTestRollout(t *testing.T, edit func(*RolloutConfig), nClasses int) *Rollout {
	t.Helper()
	cfg := DefaultConfig().Rollout
	cfg.Enabled = true
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewRollout(cfg, nClasses)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rowsFor builds prompt-contiguous correctness: prompt i has k[i] correct
// rows first, then wrong ones, out of n[i].
func rowsFor(n, k []int) Rows {
	var c []bool
	for i := range n {
		for j := 0; j < n[i]; j++ {
			c = append(c, j < k[i])
		}
	}
	return Rows{Correct: c}
}

// Hand-computed 3-bin, 4-step paper-mode trace: arms 2…6, n̄ = 4, η 0.65,
// γ 0.01, β 0.4, α_μ 0.05, variance utility pooled per class, argmax dual
// signal, the paper's joint-probability DP (dp_weight bin). Reference values
// evaluated in Python from the formulas in rollout.go, with a brute-force DP
// (testdata/hand_traces.md explains each step).
func TestRolloutPaperHandTrace3Bins(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) { c.NMin, c.NMax = 2, 6 }, 3)
	type step struct {
		classes, wantN, correct []int
		violation, mu, muAfter  float64
		probs                   map[int][]float64
	}
	steps := []step{
		// all utilities 0 → uniform p; DP ties → lexicographic (2, 6, 6)
		{classes: []int{0, 0, 1, 2}, wantN: []int{2, 2, 6, 6}, correct: []int{1, 0, 3, 6},
			violation: 0, mu: 0, muAfter: 0,
			probs: map[int][]float64{0: repeatF(0.2, 5)}},
		// v̄ = 0.25, 0.3, 0: û_b(a) = 4·v̄_b·(1 − 4/a) for every arm. Best
		// responses 6, 6, 4 → v = 1.
		{classes: []int{0, 1, 2, 2}, wantN: []int{6, 6, 2, 2}, correct: []int{1, 2, 1, 2},
			violation: 1, mu: 0, muAfter: 0.05,
			probs: map[int][]float64{
				0: {0.11177592185682778, 0.17131731321546642, 0.21228026035939257, 0.24147312895016759, 0.26315337561814572},
				1: {0.098656289176049392, 0.1645785509114063, 0.21285301412352572, 0.24845052790805511, 0.27546161788096341},
			}},
		// class 2 appears first in the DP order; μ = 0.05 prices the arms.
		// Best responses 6, 6, 6 → v = 2.
		{classes: []int{2, 2, 0, 1}, wantN: []int{3, 3, 5, 5}, correct: []int{0, 0, 0, 0},
			violation: 2, mu: 0.05, muAfter: 0.15,
			probs: map[int][]float64{
				2: {0.17129686956475107, 0.19690010238601874, 0.2077483455603609, 0.2117998117137635, 0.21225487077510566},
				0: {0.1305784621716243, 0.1831988186702094, 0.21363702306082269, 0.23130186391576429, 0.24128383218157926},
				1: {0.11012186437413757, 0.17402638284983515, 0.21549049209344998, 0.24188483759437568, 0.25847642308820157},
			}},
		// one class: the budget forces n̄; its best response 3 underspends → μ falls
		{classes: []int{2, 2, 2, 2}, wantN: []int{4, 4, 4, 4}, correct: []int{2, 2, 3, 0},
			violation: -1, mu: 0.15, muAfter: 0.1,
			probs: map[int][]float64{
				2: {0.21255194083836743, 0.21392498601638554, 0.20449847841344374, 0.19150821462180573, 0.17751638010999768},
			}},
	}
	for i, s := range steps {
		al, err := r.Allocate(s.classes)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(al.N, s.wantN) || !al.Exact || al.Total != 16 {
			t.Fatalf("step %d: n = %v (total %d), want %v", i+1, al.N, al.Total, s.wantN)
		}
		checkClose(t, "violation", al.Violation, s.violation, 1e-12)
		checkClose(t, "mu", al.Mu, s.mu, 1e-15)
		for b, p := range s.probs {
			checkSlice(t, "arm probabilities", al.ArmProb[b], p, 1e-12)
		}
		up, err := r.Observe(s.classes, al.N, al, rowsFor(al.N, s.correct))
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, "mu after", r.Mu(), s.muAfter, 1e-15)
		checkClose(t, "dmu", up.DMu, s.muAfter-s.mu, 1e-15)
	}
	st := r.State()
	for b := range st.Score {
		checkSlice(t, "score (unused by the variance utility)", st.Score[b], repeatF(0, 5), 0)
	}
	checkSlice(t, "var", st.Var, []float64{0.13, 0.172, 0.12766666666666668}, 1e-15)
	wantCount := [][]int{{1, 0, 0, 1, 1}, {0, 0, 0, 1, 2}, {1, 1, 1, 0, 1}}
	if !reflect.DeepEqual(st.Count, wantCount) {
		t.Errorf("counts %v, want %v (each arm counted once per step it is used)", st.Count, wantCount)
	}
}

// μ rises when the unconstrained choices overspend and falls when they
// underspend; it stays in [0, μ_max].
func TestRolloutDualDirection(t *testing.T) {
	for _, dual := range []string{DualArgmax, DualExpected} {
		r := newTestRollout(t, func(c *RolloutConfig) { c.MuInit = 0.5; c.DualSignal = dual }, 2)
		// class 0 (pooled variance 5) strongly prefers n_max: overspend → μ rises
		r.st.Var[0], r.st.Count[0][0] = 5, 1
		al, _ := r.Allocate([]int{0, 0, 1, 1})
		if al.Violation <= 0 {
			t.Fatalf("%s: violation %v, want > 0", dual, al.Violation)
		}
		_, _ = r.Observe([]int{0, 0, 1, 1}, al.N, al, rowsFor(al.N, []int{0, 0, 0, 0}))
		if r.Mu() <= 0.5 {
			t.Errorf("%s: μ %v did not rise on overspend", dual, r.Mu())
		}
		// flat utilities and μ > 0: every class prefers n_min → μ falls
		// (E_p[n] needs a higher price than the argmax to fall below n̄ at η 0.65)
		q := newTestRollout(t, func(c *RolloutConfig) { c.MuInit = 3; c.DualSignal = dual }, 2)
		al, _ = q.Allocate([]int{0, 1})
		if al.Violation >= 0 {
			t.Fatalf("%s: violation %v, want < 0", dual, al.Violation)
		}
		_, _ = q.Observe([]int{0, 1}, al.N, al, rowsFor(al.N, []int{0, 0}))
		if q.Mu() >= 3 {
			t.Errorf("%s: μ %v did not fall on underspend", dual, q.Mu())
		}
		// projection onto [0, μ_max]
		z := newTestRollout(t, func(c *RolloutConfig) { c.DualLR = 100; c.MuInit = 0.1; c.DualSignal = dual }, 1)
		al, _ = z.Allocate([]int{0})
		_, _ = z.Observe([]int{0}, al.N, al, rowsFor(al.N, []int{0}))
		if want := map[bool]float64{true: 0, false: 10}[al.Violation < 0]; z.Mu() != want {
			t.Errorf("%s: violation %v, μ %v, want projected to %v", dual, al.Violation, z.Mu(), want)
		}
	}
}

// Loss utilities pool per class: û_b(a) = L_b + δ_b(a). Class 0 alternates
// between arms 3 and 6 and reports the stationary neg_loss utility n/6 (the
// trainer may realize other counts than planned; Observe credits the arm
// each prompt actually used). Arm 6 stays ahead of arm 3 from its first
// use on, and the arms never used (2, 4, 5) read the class's level instead
// of a stale value. Exact values from the recursion in Python
// (testdata/hand_traces.md).
func TestRolloutArmsMoveTowardHigherUtility(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) {
		c.Utility, c.NMin, c.NMax, c.DualLR = UtilityNegLoss, 2, 6, 0
	}, 1)
	for step := 0; step < 12; step++ {
		al, err := r.Allocate([]int{0, 0})
		if err != nil {
			t.Fatal(err)
		}
		n := []int{3, 3}
		if step%2 == 1 {
			n = []int{6, 6}
		}
		var rows Rows
		for _, k := range n {
			for j := 0; j < k; j++ {
				rows.Loss = append(rows.Loss, -float64(k)/6)
				rows.Correct = append(rows.Correct, false)
			}
		}
		if _, err := r.Observe([]int{0, 0}, n, al, rows); err != nil {
			t.Fatal(err)
		}
		p := r.ArmProbs()[0]
		if step >= 1 && !(p[4] > p[1]) {
			t.Errorf("step %d: p(6) = %v ≤ p(3) = %v", step, p[4], p[1])
		}
	}
	st := r.State()
	level := 0.81181975551999996
	checkClose(t, "level", st.Level[0], level, 1e-15)
	checkSlice(t, "offsets", st.Score[0], []float64{0, -0.27475374080000003, 0, 0, 0.33514775551999998}, 1e-15)
	for j, want := range []float64{level, level - 0.27475374080000003, level, level, level + 0.33514775551999998} {
		checkClose(t, fmt.Sprintf("û(%d)", r.arms[j]), r.utility(0, j), want, 1e-15)
	}
}

// One stale draw does not pin an arm. Variance utility: arm 6 is used once
// by a prompt that fails every rollout (σ̂² = 0), then arm 4 sees mixed
// outcomes; arm 6's estimate follows the class's pooled variance, and it
// becomes the class's best response at μ = 0 (the per-arm EMA it replaces
// kept arm 6 at 0 for good). Loss utility: an arm used once moves with its
// class's level afterwards.
func TestRolloutPooledEstimatesNotPinned(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) { c.NMin, c.NMax, c.DualLR = 2, 6, 0 }, 1)
	observe := func(r *Rollout, n, k int, loss float64) {
		t.Helper()
		al, err := r.Allocate([]int{0})
		if err != nil {
			t.Fatal(err)
		}
		rows := rowsFor([]int{n}, []int{k})
		for range rows.Correct {
			rows.Loss = append(rows.Loss, loss)
		}
		if _, err := r.Observe([]int{0}, []int{n}, al, rows); err != nil {
			t.Fatal(err)
		}
	}
	observe(r, 6, 0, 0)
	if u := r.utility(0, 4); u != 0 {
		t.Fatalf("after a zero-variance draw û(6) = %v, want 0", u)
	}
	for i := 0; i < 4; i++ {
		observe(r, 4, 2, 0) // σ̂² = 2·2/(4·3) = 1/3
	}
	v := 1.0 / 3 * (1 - math.Pow(0.6, 4)) // EMA from 0 with β = 0.4
	checkClose(t, "pooled variance", r.State().Var[0], v, 1e-15)
	checkClose(t, "û(6)", r.utility(0, 4), 4*v*(1-4.0/6), 1e-15)
	al, _ := r.Allocate([]int{0})
	if al.Unconstrained[0] != 6 {
		t.Errorf("best response %v, want 6 (arm 6 pinned by its stale draw?)", al.Unconstrained[0])
	}

	q := newTestRollout(t, func(c *RolloutConfig) { c.Utility, c.NMin, c.NMax, c.DualLR = UtilityNegLoss, 2, 6, 0 }, 1)
	observe(q, 6, 0, 0.5) // class level −0.5, δ(6) = 0
	observe(q, 2, 0, 0.9) // δ(2) = −0.9 − (−0.5) = −0.4; level −0.66
	u6 := q.utility(0, 4)
	for i := 0; i < 5; i++ {
		observe(q, 4, 0, -1) // the class improves: utility +1 on arm 4
	}
	if !(q.utility(0, 4) > u6+0.5) {
		t.Errorf("û(6) = %v after the class's level rose (was %v): pinned", q.utility(0, 4), u6)
	}
	if !(q.utility(0, 0) < q.utility(0, 4)) {
		t.Errorf("û(2) = %v, û(6) = %v: the worse arm's offset was lost", q.utility(0, 0), q.utility(0, 4))
	}
}

// Variance utility end to end on a stationary stream: a class with mixed
// outcomes (p = ½) earns more rollouts than a class that always fails, at
// exact budget, and its arm probabilities tilt toward the high arms.
func TestRolloutVarianceUtilityPrefersUncertainClass(t *testing.T) {
	r := newTestRollout(t, nil, 2)
	classes := append(repeat(0, 8), repeat(1, 8)...)
	s := rng.NewStream(5)
	for step := 0; step < 60; step++ {
		al, _ := r.Allocate(classes)
		if !al.Exact || al.Total != 64 {
			t.Fatalf("budget missed: %+v", al)
		}
		var rows Rows
		for i, c := range classes {
			for j := 0; j < al.N[i]; j++ {
				rows.Correct = append(rows.Correct, c == 0 && s.Float64() < 0.5)
			}
		}
		if _, err := r.Observe(classes, al.N, al, rows); err != nil {
			t.Fatal(err)
		}
	}
	al, _ := r.Allocate(classes)
	if !(al.BinN[0] > 4 && al.BinN[1] < 4) {
		t.Errorf("mixed class %d rollouts, failing class %d: want more for the mixed one", al.BinN[0], al.BinN[1])
	}
	if r.Mu() <= 0 {
		t.Errorf("μ = %v never moved", r.Mu())
	}
	p := r.ArmProbs()
	K := len(r.arms)
	if !(p[0][K-1] > p[0][0] && p[1][0] > p[1][K-1]) {
		t.Errorf("arm probabilities: mixed class %v, failing class %v", p[0], p[1])
	}
}

// reference_compat: step 1 gives n̄ to everyone; later steps use the previous
// step's labels of rows 0, n̄, 2n̄, … positionally; arm probabilities stay
// uniform and μ stays 0; the DP is the docs/algorithm.md §7.7 closed form.
func TestRolloutReferenceCompat(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) { c.Mode = ModeReferenceCompat }, 4)
	al, err := r.Allocate([]int{3, 3, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(al.N, []int{4, 4, 4, 4}) || al.UsingPrev {
		t.Fatalf("step 1: %v", al.N)
	}
	// step 1 realized: prompt classes [3 3 0 1] with 4 rows each → rows 0,4,8,12
	if _, err := r.Observe([]int{3, 3, 0, 1}, al.N, al, rowsFor(al.N, []int{1, 2, 3, 4})); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.State().PrevLabels, []int{3, 3, 0, 1}) {
		t.Fatalf("stored labels %v", r.State().PrevLabels)
	}
	// step 2: the current classes are ignored; counts from [3 3 0 1] in
	// first-appearance order (3:2, 0:1, 1:1), T = 16 → lexicographic (2, 2, 10)
	al, _ = r.Allocate([]int{0, 0, 0, 0})
	if !slices.Equal(al.N, []int{2, 2, 2, 10}) || !slices.Equal(al.Order, []int{3, 0, 1}) || !al.UsingPrev || al.BinN[3] != 2 {
		t.Fatalf("step 2: n %v order %v", al.N, al.Order)
	}
	// stride n̄ over rows of varying n_i: rows 0, 4, 8, 12 of n = [2 2 2 10]
	// belong to prompts 0, 2, 3, 3
	if _, err := r.Observe([]int{0, 1, 2, 3}, al.N, al, rowsFor(al.N, []int{0, 0, 0, 0})); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.State().PrevLabels, []int{0, 2, 3, 3}) {
		t.Errorf("positional labels %v, want [0 2 3 3]", r.State().PrevLabels)
	}
	for b, p := range r.ArmProbs() {
		for _, x := range p {
			if x != 1.0/11 && math.Abs(x-1.0/11) > 1e-17 {
				t.Fatalf("class %d arm probabilities %v not uniform", b, p)
			}
		}
	}
	if r.Mu() != 0 || al.Violation != 0 {
		t.Errorf("μ %v, violation %v: want 0", r.Mu(), al.Violation)
	}
	// a stored list of another length → n̄ for everyone
	al, _ = r.Allocate([]int{0, 1})
	if !slices.Equal(al.N, []int{4, 4}) || al.UsingPrev {
		t.Errorf("length mismatch: %v", al.N)
	}
}

// reference_compat reproduces the docs/algorithm.md §7.7 closed form at N = 256 through the
// controller-level allocation.
func TestRolloutReferenceCompatClosedForm(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) { c.Mode = ModeReferenceCompat }, 10)
	var prev []int
	for _, g := range []struct{ c, k int }{{0, 120}, {3, 30}, {9, 50}, {5, 56}} {
		prev = append(prev, repeat(g.c, g.k)...)
	}
	r.st.PrevLabels = prev
	al, err := r.Allocate(make([]int, 256))
	if err != nil {
		t.Fatal(err)
	}
	if al.BinN[0] != 2 || al.BinN[3] != 2 || al.BinN[9] != 10 || al.BinN[5] != 4 || al.Total != 1024 {
		t.Errorf("bin arms %v, want 0→2 3→2 9→10 5→4", al.BinN)
	}
	if al.N[0] != 2 || al.N[120] != 2 || al.N[150] != 10 || al.N[200] != 4 {
		t.Errorf("per-prompt counts follow the previous labels positionally: %v", al.N[:4])
	}
}

func TestRolloutPaperOwnBinAndExactBudget(t *testing.T) {
	r := newTestRollout(t, nil, 10)
	s := rng.NewStream(9)
	for step := 0; step < 30; step++ {
		classes := make([]int, 64)
		for i := range classes {
			classes[i] = s.IntN(10)
		}
		al, err := r.Allocate(classes)
		if err != nil {
			t.Fatal(err)
		}
		if !al.Exact || al.Total != 256 {
			t.Fatalf("step %d: total %d, want 256", step, al.Total)
		}
		for i, c := range classes {
			if al.N[i] != al.BinN[c] || al.N[i] < 2 || al.N[i] > 12 {
				t.Fatalf("prompt %d of class %d got %d, class arm %d", i, c, al.N[i], al.BinN[c])
			}
		}
		k := make([]int, len(classes))
		for i := range k {
			k[i] = s.IntN(al.N[i] + 1)
		}
		if _, err := r.Observe(classes, al.N, al, rowsFor(al.N, k)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRolloutErrorsAndState(t *testing.T) {
	r := newTestRollout(t, nil, 3)
	if _, err := r.Allocate([]int{0, 3}); err == nil || !strings.Contains(err.Error(), "class 3") {
		t.Errorf("bad class: %v", err)
	}
	al, _ := r.Allocate([]int{0, 1})
	if _, err := r.Observe([]int{0, 1}, []int{4, 13}, al, rowsFor([]int{4, 13}, []int{0, 0})); err == nil || !strings.Contains(err.Error(), "not an arm") {
		t.Errorf("non-arm count: %v", err)
	}
	if _, err := r.Observe([]int{0, 1}, []int{4, 4}, al, Rows{Correct: make([]bool, 3)}); err == nil {
		t.Error("row count mismatch accepted")
	}
	_, _ = r.Observe([]int{0, 1}, al.N, al, rowsFor(al.N, []int{1, 2}))
	b, _ := json.Marshal(r.State())
	var st RolloutState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	q := newTestRollout(t, nil, 3)
	if err := q.Restore(st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.State(), q.State()) {
		t.Error("state differs after JSON round trip")
	}
	st.Mu = -1
	if err := q.Restore(st); err == nil {
		t.Error("Restore accepted μ < 0")
	}
	st.Mu, st.Score = 0, st.Score[:2]
	if err := q.Restore(st); err == nil {
		t.Error("Restore accepted a wrong shape")
	}
}

// μ shapes the paper's joint-probability allocation (dp_weight bin): with
// γ = 0 the DP maximizes η·Σ_b û_b(n_b) − η·μ·Σ_b n_b under the exact
// budget, so Σ_b n_b (arms summed once per class, not per prompt) can only
// fall as μ rises, and it does fall over this range. With dp_weight prompt
// the μ terms sum to μ·(T − N·n̄) = 0 and the allocation is the same for
// every μ.
func TestRolloutMuShapesAllocation(t *testing.T) {
	classes := append(append(repeat(0, 10), repeat(1, 3)...), repeat(2, 2)...)
	mus := []float64{0, 0.05, 0.1, 0.3, 1, 3}
	for _, c := range []struct {
		weight   string
		distinct int // allocations among the μ values, at least
		monotone bool
	}{
		{DPWeightBin, 3, true},
		{DPWeightPrompt, 1, false},
	} {
		var allocs [][]int
		for _, mu := range mus {
			r := newTestRollout(t, func(rc *RolloutConfig) { rc.Gamma, rc.DPWeight, rc.MuInit = 0, c.weight, mu }, 3)
			r.st.Var = []float64{0.02, 0.1, 0.25} // pooled variances, as if observed
			al, err := r.Allocate(classes)
			if err != nil {
				t.Fatal(err)
			}
			if !al.Exact || al.Total != 60 {
				t.Fatalf("%s μ %v: total %d, want 60", c.weight, mu, al.Total)
			}
			if testing.Verbose() {
				t.Logf("%s μ %v: arms %v", c.weight, mu, al.BinN)
			}
			allocs = append(allocs, al.BinN)
		}
		distinct := 1
		for i := 1; i < len(allocs); i++ {
			if !slices.Equal(allocs[i], allocs[i-1]) {
				distinct++
			}
			if c.monotone && sum(allocs[i]) > sum(allocs[i-1]) {
				t.Errorf("%s: Σ_b n_b rose from %v (μ %v) to %v (μ %v)", c.weight, allocs[i-1], mus[i-1], allocs[i], mus[i])
			}
		}
		switch {
		case c.weight == DPWeightBin && distinct < c.distinct:
			t.Errorf("%s: %d distinct allocations over μ %v (%v), want ≥ %d: μ does not shape the allocation", c.weight, distinct, mus, allocs, c.distinct)
		case c.weight == DPWeightPrompt && distinct != 1:
			t.Errorf("%s: allocation changes with μ (%v); its μ terms should cancel", c.weight, allocs)
		}
	}
}

// μ is the budget's shadow price: on a stationary stream (two equal-sized
// classes solved with probability ½ and 0.2, σ = 0.5 and 0.4) its average
// falls as the budget n̄ grows and stays within 15% of the continuous
// equilibrium μ* = 4·(Σ_b q_b·σ_b)²/n̄, where the best responses
// a* = 2σ·√(n̄/μ) spend exactly n̄ on average (observed: within 2%; the
// margin covers the chatter of the discrete best responses).
func TestRolloutMuTracksBudget(t *testing.T) {
	classes := append(repeat(0, 8), repeat(1, 8)...)
	solve := []float64{0.5, 0.2}
	prev := math.Inf(1)
	for _, nbar := range []int{3, 4, 6} {
		r := newTestRollout(t, func(c *RolloutConfig) { c.NMean = nbar }, 2)
		s := rng.NewStream(11, uint64(nbar))
		var muSum float64
		const steps, burn = 400, 100
		for step := 0; step < steps; step++ {
			al, err := r.Allocate(classes)
			if err != nil {
				t.Fatal(err)
			}
			var rows Rows
			for i, c := range classes {
				for j := 0; j < al.N[i]; j++ {
					rows.Correct = append(rows.Correct, s.Float64() < solve[c])
				}
			}
			if _, err := r.Observe(classes, al.N, al, rows); err != nil {
				t.Fatal(err)
			}
			if step >= burn {
				muSum += r.Mu()
			}
		}
		mu := muSum / (steps - burn)
		star := 4 * math.Pow(0.5*0.5+0.5*0.4, 2) / float64(nbar)
		t.Logf("n̄ %d: mean μ %.4f, μ* %.4f", nbar, mu, star)
		if !(mu < prev) {
			t.Errorf("n̄ %d: mean μ %.4f did not fall below %.4f (smaller budget)", nbar, mu, prev)
		}
		if math.Abs(mu-star) > 0.15*star {
			t.Errorf("n̄ %d: mean μ %.4f, want within 15%% of μ* = %.4f", nbar, mu, star)
		}
		prev = mu
	}
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}
