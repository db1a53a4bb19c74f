package gdro

import (
	"encoding/json"
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
// γ 0.01, β 0.4, α_μ 0.05, variance utility, argmax dual signal. Reference
// values evaluated in Python from the formulas in rollout.go
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
		// class 0: arm 2 observed −1, prior 4·0.25·(1 − 4/a) elsewhere; class 1:
		// arm 6 observed 0.4; class 2 flat. Best responses 6, 6, 4 → v = 1.
		{classes: []int{0, 1, 2, 2}, wantN: []int{6, 6, 2, 2}, correct: []int{1, 2, 1, 2},
			violation: 1, mu: 0, muAfter: 0.05,
			probs: map[int][]float64{
				0: {0.11177592185682778, 0.17131731321546642, 0.21228026035939257, 0.24147312895016759, 0.26315337561814572},
				1: {0.098656289176049392, 0.1645785509114063, 0.21285301412352572, 0.24845052790805511, 0.27546161788096341},
			}},
		// class 2 appears first in the DP order; μ = 0.05 prices the arms
		{classes: []int{2, 2, 0, 1}, wantN: []int{3, 3, 5, 5}, correct: []int{0, 0, 0, 0},
			violation: 1.25, mu: 0.05, muAfter: 0.1125,
			probs: map[int][]float64{
				2: {0.12563094150865445, 0.21221570765907197, 0.22391642555420854, 0.22828626330220242, 0.20995066197586257},
				0: {0.12243727150742144, 0.1870916802432436, 0.21818381669088666, 0.23622816763680254, 0.2360590639216458},
				1: {0.11012186437413757, 0.17402638284983515, 0.21549049209344998, 0.24188483759437568, 0.25847642308820157},
			}},
		// one class: the budget forces n̄; its best response 3 underspends → μ falls
		{classes: []int{2, 2, 2, 2}, wantN: []int{4, 4, 4, 4}, correct: []int{2, 2, 3, 0},
			violation: -1, mu: 0.1125, muAfter: 0.0625,
			probs: map[int][]float64{
				2: {0.13484846807486781, 0.23853215033205494, 0.22185299993379898, 0.21282620917747874, 0.19194017248179965},
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
	checkSlice(t, "score class 0", st.Score[0], []float64{-1, 0, 0, 0, 0.22222222222222224}, 1e-15)
	checkSlice(t, "score class 1", st.Score[1], []float64{0, 0, 0, 0, 0.38222222222222224}, 1e-15)
	checkSlice(t, "score class 2", st.Score[2], []float64{-1, 0, 0, 0, 0}, 1e-15)
	checkSlice(t, "var", st.Var, []float64{0.13, 0.172, 0.12766666666666668}, 1e-15)
	wantCount := [][]int{{1, 0, 0, 1, 1}, {0, 0, 0, 1, 2}, {1, 1, 1, 0, 1}}
	if !reflect.DeepEqual(st.Count, wantCount) {
		t.Errorf("counts %v, want %v (each arm credited only when used)", st.Count, wantCount)
	}
}

// μ rises when the unconstrained choices overspend and falls when they
// underspend; it stays in [0, μ_max].
func TestRolloutDualDirection(t *testing.T) {
	for _, dual := range []string{DualArgmax, DualExpected} {
		r := newTestRollout(t, func(c *RolloutConfig) { c.MuInit = 0.5; c.DualSignal = dual }, 2)
		// class 0 strongly prefers n_max: overspend → μ rises
		r.st.Score[0][len(r.arms)-1], r.st.Count[0][len(r.arms)-1] = 50, 1
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

// On a stationary stream the arm probabilities move toward the arm with the
// higher utility. The trainer may realize other counts than planned; Observe
// credits the arm each prompt actually used. Here class 0 alternates between
// arms 3 and 6 and reports the stationary neg_loss utility n/6.
func TestRolloutArmsMoveTowardHigherUtility(t *testing.T) {
	r := newTestRollout(t, func(c *RolloutConfig) {
		c.Utility, c.NMin, c.NMax, c.DualLR = UtilityNegLoss, 2, 6, 0
	}, 1)
	prev := r.ArmProbs()[0]
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
		if step >= 1 && !(p[4]-p[1] >= prev[4]-prev[1]-1e-15) {
			t.Errorf("step %d: p(6) − p(3) fell from %v to %v", step, prev[4]-prev[1], p[4]-p[1])
		}
		prev = p
	}
	if !(prev[4] > prev[1]) {
		t.Errorf("p = %v: arm 6 (utility 1) should beat arm 3 (utility 0.5)", prev)
	}
	// exact EMA: arm 3 always reports 0.5, arm 6 always 1
	checkSlice(t, "scores", r.State().Score[0], []float64{0, 0.5, 0, 0, 1}, 1e-15)
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
