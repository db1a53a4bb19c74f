package gdro

import (
	"math"
	"strings"
	"testing"
)

// TestPromptPaperWeights: the paper's multipliers by hand. η = 0.65, γ =
// 0.01, C = 1, three classes with scores 2 (clipped to 1), −0.5 and none:
// ω = (e^0.65, e^−0.325, 1) = (1.9155408290, 0.7225273536, 1), Σω =
// 3.6380681827; q = 0.99·ω/Σω + 0.01/3 = (0.5245949825, 0.1999492416,
// 0.2754557759). Rows of a prompt in class c get min(ω_c, max_weight),
// unnormalised; absent classes still have their q.
func TestPromptPaperWeights(t *testing.T) {
	cfg := DefaultConfig().Prompt
	cfg.Mode, cfg.ScoreClip = ModePaper, 1
	p, err := NewPrompt(cfg, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	p.st.Score[0], p.st.Has[0] = 2, true
	p.st.Score[1], p.st.Has[1] = -0.5, true
	w, err := p.Weights([]int{0, 1, 0}, []int{2, 1, 3})
	if err != nil {
		t.Fatal(err)
	}
	wantQ := []float64{0.5245949825, 0.1999492416, 0.2754557759}
	wantRow := []float64{1.9155408290, 1.9155408290, 0.7225273536, 1.9155408290, 1.9155408290, 1.9155408290}
	for c, q := range wantQ {
		if math.Abs(w.P[c]-q) > 1e-9 {
			t.Errorf("q[%d] = %.10f, want %.10f", c, w.P[c], q)
		}
	}
	if len(w.Row) != len(wantRow) {
		t.Fatalf("%d rows, want %d", len(w.Row), len(wantRow))
	}
	for r, m := range wantRow {
		if math.Abs(w.Row[r]-m) > 1e-9 {
			t.Errorf("row %d multiplier %.10f, want %.10f", r, w.Row[r], m)
		}
	}
	var h float64
	for _, q := range wantQ {
		h -= q * math.Log(q)
	}
	if math.Abs(w.Entropy-h) > 1e-9 {
		t.Errorf("entropy %v, want %v (over all classes)", w.Entropy, h)
	}
	// Without the clip a large score hits the cap; the reference formula
	// would have renormalised instead.
	p.cfg.ScoreClip = 0
	p.st.Score[0] = 10 // e^6.5 ≈ 665 > 15
	if w, _ = p.Weights([]int{0, 1}, []int{1, 1}); w.Row[0] != 15 || math.Abs(w.Row[1]-0.7225273536) > 1e-9 {
		t.Errorf("unclipped rows %v, want [15 0.7225273536]", w.Row)
	}
	// All scores equal: every multiplier is e^{η·S}, the same for every row.
	p.st.Score[0], p.st.Score[1], p.st.Has[2], p.st.Score[2] = 0.3, 0.3, true, 0.3
	w, _ = p.Weights([]int{0, 1, 2}, []int{1, 1, 1})
	for r := range w.Row {
		if math.Abs(w.Row[r]-math.Exp(0.65*0.3)) > 1e-12 || math.Abs(w.P[r]-1.0/3) > 1e-12 {
			t.Errorf("equal scores: row %d multiplier %v, q %v", r, w.Row[r], w.P[r])
		}
	}
}

func TestPromptModeValidation(t *testing.T) {
	cfg := DefaultConfig().Prompt
	cfg.Mode = "exp3p"
	if _, err := NewPrompt(cfg, 3, 3); err == nil || !strings.Contains(err.Error(), "prompt.mode") {
		t.Errorf("mode exp3p: %v", err)
	}
	cfg.Mode, cfg.Focus = ModePaper, &FocusConfig{Targets: map[int]float64{0: 2}}
	if _, err := NewPrompt(cfg, 3, 3); err == nil || !strings.Contains(err.Error(), "focus") {
		t.Errorf("paper mode with focus: %v", err)
	}
	if DefaultConfig().Prompt.Mode != ModeReferenceCompat {
		t.Error("the default Prompt-GDRO mode must stay reference_compat")
	}
}
