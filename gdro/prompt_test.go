package gdro

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func newTestPrompt(t *testing.T, edit func(*PromptConfig), nBins, nClasses int) *Prompt {
	t.Helper()
	cfg := DefaultConfig().Prompt
	cfg.Enabled = true
	if edit != nil {
		edit(&cfg)
	}
	p, err := NewPrompt(cfg, nBins, nClasses)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func repeat(v, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func repeatF(v float64, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// docs/algorithm.md §6.5 worked example: bins {0, 3, 9}, row shares {0.6, 0.3, 0.1},
// scores {0, 0.5, 2.0} → p = {0.166880, 0.229687, 0.603434}, Σq̂p = 0.229377,
// multipliers {0.727534, 1.001349, 2.630748} (atol 5e−7: six printed decimals).
func TestPromptWeightsSpecExample(t *testing.T) {
	p := newTestPrompt(t, nil, 10, 10)
	st := p.State()
	st.Score[0], st.Score[3], st.Score[9] = 0, 0.5, 2.0
	st.Has[0], st.Has[3], st.Has[9] = true, true, true
	if err := p.Restore(st); err != nil {
		t.Fatal(err)
	}
	classes := append(append(repeat(0, 6), repeat(3, 3)...), 9) // 10 prompts × 4 rows
	w, err := p.Weights(classes, repeat(4, 10))
	if err != nil {
		t.Fatal(err)
	}
	checkSlice(t, "p", []float64{w.P[0], w.P[3], w.P[9]}, []float64{0.166880, 0.229687, 0.603434}, 5e-7)
	checkClose(t, "Σq̂p", 0.6*w.P[0]+0.3*w.P[3]+0.1*w.P[9], 0.229377, 5e-7)
	checkSlice(t, "multipliers", []float64{w.BinMult[0], w.BinMult[3], w.BinMult[9]}, []float64{0.727534, 1.001349, 2.630748}, 5e-7)
	sum := 0.0
	for _, m := range w.Row {
		sum += m
	}
	checkClose(t, "Σ w_r (= R before the cap)", sum, 40, 1e-12)
	if w.P[1] != 0 || w.BinMult[1] != 0 {
		t.Error("absent bins must have p = mult = 0")
	}
}

// docs/algorithm.md §6.3: ℓ = −0.002 on 20 of 400 rows (share 0.05) ⇒ x = −0.04; S 0.1,
// β 0.12 ⇒ S = 0.0832.
func TestPromptEMASpecVector(t *testing.T) {
	p := newTestPrompt(t, nil, 2, 2)
	st := p.State()
	st.Score[1], st.Has[1] = 0.1, true
	_ = p.Restore(st)
	classes := append(repeat(1, 5), repeat(0, 95)...) // 5 prompts × 4 = 20 rows of 400
	loss := append(repeatF(-0.002, 20), repeatF(0, 380)...)
	ob, err := p.Observe(classes, repeat(4, 100), Rows{Loss: loss, Correct: make([]bool, 400)})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, "x", ob.X[1], -0.04, 1e-15)
	checkClose(t, "S", p.Scores()[1], 0.0832, 1e-15)
	checkClose(t, "signal", ob.Signal[1], -0.002, 1e-15)
	checkClose(t, "first observation initializes", p.Scores()[0], 0, 0)
}

// Hand-computed 3-bin, 4-step trace (η 0.65, γ 0.01, β 0.12, share norm on,
// 4 rows per prompt). Reference values from the formulas of docs/algorithm.md §6.3–6.5
// evaluated in Python (testdata/hand_traces.md).
func TestPromptHandTrace3Bins(t *testing.T) {
	p := newTestPrompt(t, nil, 3, 3)
	type step struct {
		classes []int
		loss    []float64
		mult    map[int]float64
		score   []float64
	}
	steps := []step{
		{[]int{0, 0, 1, 2},
			[]float64{0.02, 0, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, -0.02, -0.02, -0.02, -0.02, 0.03, 0.03, 0.03, 0.03},
			map[int]float64{0: 1, 1: 1, 2: 1},
			[]float64{0.02, -0.08, 0.12}},
		{[]int{1, 2, 2, 2},
			append(append(append(repeatF(0.05, 4), repeatF(0, 4)...), repeatF(0.06, 4)...), repeatF(0.03, 4)...),
			map[int]float64{1: 0.90661126788945201, 2: 1.0311295773701827},
			[]float64{0.02, -0.0464, 0.1104}},
		{[]int{0, 1, 2, 2},
			append(append(append(repeatF(-0.04, 4), repeatF(0, 4)...), repeatF(0.02, 4)...), repeatF(0.04, 4)...),
			map[int]float64{0: 0.98087135122602453, 1: 0.93985435498005843, 2: 1.0396371468969587},
			[]float64{-0.0016, -0.040832, 0.104352}},
		{[]int{0, 0, 0, 1}, repeatF(0.01, 16),
			map[int]float64{0: 1.0062715257354988, 1: 0.98118542279350351},
			[]float64{0.000192, -0.03113216, 0.104352}},
	}
	for i, s := range steps {
		n := repeat(4, len(s.classes))
		w, err := p.Weights(s.classes, n)
		if err != nil {
			t.Fatal(err)
		}
		for c, m := range s.mult {
			checkClose(t, "step mult", w.BinMult[c], m, 1e-12)
		}
		if _, err := p.Observe(s.classes, n, Rows{Loss: s.loss, Correct: make([]bool, 16)}); err != nil {
			t.Fatal(err)
		}
		checkSlice(t, "scores after step", p.Scores(), s.score, 1e-12)
		if p.State().Updates != i+1 {
			t.Errorf("U = %d after step %d", p.State().Updates, i+1)
		}
	}
}

func TestPromptInvariants(t *testing.T) {
	// identical scores ⇒ all multipliers 1
	p := newTestPrompt(t, nil, 5, 5)
	st := p.State()
	for c := range st.Score {
		st.Score[c], st.Has[c] = 0.7, true
	}
	_ = p.Restore(st)
	w, _ := p.Weights([]int{0, 1, 1, 4, 2}, []int{2, 7, 3, 12, 4})
	for r, m := range w.Row {
		if math.Abs(m-1) > 1e-15 {
			t.Fatalf("row %d multiplier %v with identical scores", r, m)
		}
	}
	// multipliers ≤ cap even with extreme scores; mean 1 before the cap
	st.Score = []float64{0, 0, 0, 0, 50}
	_ = p.Restore(st)
	classes := append(repeat(0, 50), 4)
	w, _ = p.Weights(classes, repeat(4, 51))
	for _, m := range w.Row {
		if m > 15 {
			t.Fatalf("multiplier %v above the cap 15", m)
		}
	}
	if w.BinMult[4] != 15 {
		t.Errorf("dominant rare bin multiplier %v, want the cap 15", w.BinMult[4])
	}
	// Weights changes nothing; absent bins keep their scores through Observe
	before := p.State()
	_, _ = p.Weights(classes, repeat(4, 51))
	if !reflect.DeepEqual(before, p.State()) {
		t.Error("Weights changed the state")
	}
	_, _ = p.Observe([]int{0, 1}, []int{2, 2}, Rows{Loss: []float64{1, 2, 3, 4}, Correct: make([]bool, 4)})
	after := p.State()
	for _, c := range []int{2, 3, 4} {
		if after.Score[c] != before.Score[c] || after.Count[c] != before.Count[c] {
			t.Errorf("absent class %d changed: %v → %v", c, before.Score[c], after.Score[c])
		}
	}
}

// With log πθ = log πold (ρ ≡ 1) the surrogate is ℓ_r = −A_r, whose per-bin
// mean is 0 for every bin (docs/algorithm.md §6.2); the scores then stay at 0.
func TestPromptSignalZeroAtRatioOne(t *testing.T) {
	p := newTestPrompt(t, nil, 3, 3)
	groups := [][]bool{{true, false, false, false}, {true, true, false, false}, {true, true, true, true}, {false, true, false, true}}
	classes := []int{0, 1, 1, 2}
	var loss []float64
	for _, g := range groups {
		for _, a := range grpoAdvantages(g) {
			loss = append(loss, -a)
		}
	}
	ob, err := p.Observe(classes, repeat(4, 4), Rows{Loss: loss, Correct: make([]bool, 16)})
	if err != nil {
		t.Fatal(err)
	}
	for c, x := range ob.Signal {
		if math.Abs(x) > 1e-15 {
			t.Errorf("bin %d mean surrogate at ρ = 1 is %v, want 0", c, x)
		}
	}
}

// GRPO advantage vectors of docs/algorithm.md §5.2 (the simulator's
// advantages, grpo's, the same function as the trainer's).
func TestGRPOAdvantagesSpecVectors(t *testing.T) {
	b := func(k, n int) []bool {
		s := make([]bool, n)
		for i := 0; i < k; i++ {
			s[i] = true
		}
		return s
	}
	checkSlice(t, "[+1,−1,−1,−1]", grpoAdvantages(b(1, 4)), []float64{1.4999985, -0.4999995, -0.4999995, -0.4999995}, 5e-8)
	checkSlice(t, "[+1,+1,−1,−1]", grpoAdvantages(b(2, 4)), []float64{0.8660247, 0.8660247, -0.8660247, -0.8660247}, 5e-8)
	checkSlice(t, "[+1,−1]", grpoAdvantages(b(1, 2)), []float64{0.7071063, -0.7071063}, 5e-8)
	a := grpoAdvantages(b(1, 12))
	checkClose(t, "1 of 12 correct", a[0], 3.1754210, 5e-8)
	checkClose(t, "1 of 12 wrong", a[1], -0.2886746, 5e-8)
	checkSlice(t, "all equal", grpoAdvantages(b(3, 3)), []float64{0, 0, 0}, 0)
	// a single rollout keeps its raw reward (μ = 0, σ = 1), as in the trainer
	checkSlice(t, "single correct row", grpoAdvantages(b(1, 1)), []float64{1 / (1 + 1e-6)}, 1e-15)
	checkSlice(t, "single wrong row", grpoAdvantages(b(0, 1)), []float64{-1 / (1 + 1e-6)}, 1e-15)
}

// Frequency debiasing: a rare bin (present one step in five, 2 of 40
// prompts) with persistently high loss reaches the same score as a common
// bin with the same loss (the first observation initializes the EMA), so its
// weight is comparable; with share normalization (the reference) rarity can
// only raise it.
func TestPromptFrequencyDebiasing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shareNorm bool
	}{{"mean signal", false}, {"share-normalized (reference)", true}} {
		p := newTestPrompt(t, func(c *PromptConfig) { c.Signal = SignalReward; c.ShareNorm = &tc.shareNorm }, 3, 3)
		var w *Weights
		for step := 0; step < 50; step++ {
			// class 0 common and hard (acc 0.25), class 1 common and easy (acc 1),
			// class 2 rare and hard (acc 0.25), present every fifth step.
			classes := append(repeat(0, 20), repeat(1, 18)...)
			if step%5 == 4 {
				classes = append(classes, 2, 2)
			} else {
				classes = append(classes, 1, 1)
			}
			var ok []bool
			for _, c := range classes {
				if c == 1 {
					ok = append(ok, true, true, true, true)
				} else {
					ok = append(ok, true, false, false, false)
				}
			}
			n := repeat(4, len(classes))
			var err error
			if w, err = p.Weights(classes, n); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Observe(classes, n, Rows{Correct: ok}); err != nil {
				t.Fatal(err)
			}
		}
		s := p.Scores()
		t.Logf("%s: scores %v, last multipliers %v", tc.name, s, w.BinMult)
		if !tc.shareNorm {
			checkClose(t, tc.name+": rare vs common score", s[2], s[0], 1e-12)
			checkClose(t, tc.name+": rare vs common multiplier", w.BinMult[2], w.BinMult[0], 1e-12)
		} else if !(w.BinMult[2] >= w.BinMult[0]) {
			t.Errorf("%s: rare bin multiplier %v below the common bin's %v", tc.name, w.BinMult[2], w.BinMult[0])
		}
		if !(w.BinMult[0] > w.BinMult[1] && w.BinMult[2] > w.BinMult[1]) {
			t.Errorf("%s: hard bins must outweigh the easy bin: %v", tc.name, w.BinMult)
		}
	}
}

func TestPromptFocusSchedule(t *testing.T) {
	p := newTestPrompt(t, func(c *PromptConfig) {
		c.Focus = &FocusConfig{Targets: map[int]float64{0: 0, 1: 0.5}, Warmup: 2, Ramp: 4}
	}, 3, 4)
	for _, c := range []struct {
		u      int
		f0, f1 float64
	}{{0, 1, 1}, {2, 1, 1}, {3, 0.75, 0.875}, {4, 0.5, 0.75}, {6, 0, 0.5}, {100, 0, 0.5}} {
		p.st.Updates = c.u
		if p.focus(0) != c.f0 || p.focus(1) != c.f1 || p.focus(2) != 1 || p.focus(3) != 1 {
			t.Errorf("U=%d: focus %v %v %v %v, want %v %v 1 1", c.u, p.focus(0), p.focus(1), p.focus(2), p.focus(3), c.f0, c.f1)
		}
	}
	// every present bin zeroed → all-ones fallback, flagged (docs/algorithm.md §11 item 27)
	p.st.Updates = 100
	w, _ := p.Weights([]int{0, 0}, []int{4, 4})
	if !w.FocusFallback || w.Row[0] != 1 {
		t.Errorf("focus fallback: %+v", w)
	}
	w, _ = p.Weights([]int{0, 2}, []int{4, 4})
	if w.FocusFallback || w.BinMult[0] != 0 || w.BinMult[2] != 2 {
		t.Errorf("focus zeroing bin 0: %+v", w.BinMult)
	}
	// ramp 0 → target immediately after warm-up
	q := newTestPrompt(t, func(c *PromptConfig) { c.Focus = &FocusConfig{Targets: map[int]float64{0: 0.2}, Warmup: 1} }, 2, 2)
	q.st.Updates = 2
	checkClose(t, "ramp 0 focus", q.focus(0), 0.2, 1e-15)
}

func TestPromptOptions(t *testing.T) {
	// score clip C bounds the exponent: with C = 1 a score of 100 acts as 1
	clip := newTestPrompt(t, func(c *PromptConfig) { c.ScoreClip = 1 }, 2, 2)
	st := clip.State()
	st.Score[1], st.Has[1] = 100, true
	_ = clip.Restore(st)
	w, _ := clip.Weights([]int{0, 1}, []int{4, 4})
	e := math.Exp(0.65)
	checkClose(t, "clipped p", w.P[1], 0.99*e/(1+e)+0.005, 1e-15)
	// share floor bounds 1/share
	fl := newTestPrompt(t, func(c *PromptConfig) { c.ShareFloor = 0.5 }, 2, 2)
	ob, _ := fl.Observe([]int{0, 1, 1, 1}, []int{1, 1, 1, 1}, Rows{Loss: []float64{0.1, 0, 0, 0}, Correct: make([]bool, 4)})
	checkClose(t, "floored x", ob.X[0], 0.2, 1e-15) // 0.1 / max(0.25, 0.5)
	// surrogate_kl adds β_KL·KL
	kl := newTestPrompt(t, func(c *PromptConfig) { c.Signal = SignalSurrogateKL; c.KLCoef = 0.5 }, 1, 1)
	ob, _ = kl.Observe([]int{0}, []int{2}, Rows{Loss: []float64{0.1, 0.3}, KL: []float64{0.2, 0.4}, Correct: make([]bool, 2)})
	checkClose(t, "surrogate_kl signal", ob.Signal[0], 0.35, 1e-15)
	// reward signal: 1 − mean correctness, no share normalization by default
	rw := newTestPrompt(t, func(c *PromptConfig) { c.Signal = SignalReward }, 2, 2)
	ob, _ = rw.Observe([]int{0, 1}, []int{4, 4}, Rows{Correct: []bool{true, false, false, false, true, true, true, true}})
	checkSlice(t, "reward signal", ob.X, []float64{0.75, 0}, 1e-15)
}

func TestPromptErrors(t *testing.T) {
	p := newTestPrompt(t, nil, 3, 3)
	for _, c := range []struct {
		classes, n []int
		rows       Rows
		want       string
	}{
		{[]int{0, 3}, []int{1, 1}, Rows{Loss: []float64{0, 0}}, "class 3"},
		{[]int{0}, []int{0}, Rows{}, "0 rollouts"},
		{[]int{}, []int{}, Rows{}, "empty batch"},
		{[]int{0}, []int{2}, Rows{Loss: []float64{0}}, "2 per-row losses"},
		{[]int{0}, []int{1}, Rows{Loss: []float64{math.NaN()}}, "non-finite"},
	} {
		if _, err := p.Observe(c.classes, c.n, c.rows); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Observe(%v, %v) = %v, want %q", c.classes, c.n, err, c.want)
		}
	}
	if p.State().Updates != 0 {
		t.Error("a failed Observe changed the state")
	}
	if err := p.Restore(PromptState{Score: []float64{0}}); err == nil {
		t.Error("Restore accepted a wrong shape")
	}
}

func TestPromptStateRoundTrip(t *testing.T) {
	p := newTestPrompt(t, nil, 3, 3)
	_, _ = p.Observe([]int{0, 1, 2}, []int{1, 1, 1}, Rows{Loss: []float64{0.1, -0.3, 1.0 / 3}, Correct: make([]bool, 3)})
	_, _ = p.Observe([]int{0, 2}, []int{1, 1}, Rows{Loss: []float64{0.7, 1e-300}, Correct: make([]bool, 2)})
	b, _ := json.Marshal(p.State())
	var st PromptState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	q := newTestPrompt(t, nil, 3, 3)
	if err := q.Restore(st); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.State(), q.State()) {
		t.Errorf("round trip differs: %+v vs %+v", p.State(), q.State())
	}
}
