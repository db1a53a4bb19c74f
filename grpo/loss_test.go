package grpo

import (
	"math"
	"testing"
)

// TestTokenLossBranches checks each branch of the dual-clip surrogate by hand
// and every derivative against a central difference.
func TestTokenLossBranches(t *testing.T) {
	c := DefaultLoss()
	ln := math.Log
	cases := []struct {
		name             string
		lp, old, ref, aw float64
		policy           float64
		clipped, lower   bool
	}{
		{"unclipped positive A", ln(1.1), 0, 0, 2, -2 * 1.1, false, false},
		{"upper clip A>0", ln(1.5), 0, 0, 2, -2 * 1.28, true, false},
		{"lower clip A<0", ln(0.5), 0, 0, -1, 0.8, true, false},
		{"ratio below range A>0 (no clip)", ln(0.5), 0, 0, 1, -0.5, false, false},
		{"dual clip A<0 large ratio", ln(5), 0, 0, -1, 3, false, true},
		{"A = 0", ln(2), 0, 0, 0, 0, false, false},
	}
	for _, tc := range cases {
		got := c.Token(tc.lp, tc.old, tc.ref, tc.aw, tc.aw)
		if math.Abs(got.Policy-tc.policy) > 1e-12 || got.Clipped != tc.clipped || got.LowerClipped != tc.lower {
			t.Errorf("%s: policy %v clipped %v lower %v; want %v %v %v", tc.name, got.Policy, got.Clipped, got.LowerClipped, tc.policy, tc.clipped, tc.lower)
		}
		const h = 1e-6
		up, dn := c.Token(tc.lp+h, tc.old, tc.ref, tc.aw, tc.aw), c.Token(tc.lp-h, tc.old, tc.ref, tc.aw, tc.aw)
		if fd := (up.Policy - dn.Policy) / (2 * h); math.Abs(fd-got.DPolicy) > 1e-6 {
			t.Errorf("%s: dPolicy %v, finite difference %v", tc.name, got.DPolicy, fd)
		}
	}
	// k3 KL: d = ref − lp; k = e^d − d − 1.
	for _, d := range []float64{-3, -0.1, 0, 0.2, 2} {
		got := c.Token(0, 0, d, 0, 0)
		if want := math.Exp(d) - d - 1; math.Abs(got.KL-want) > 1e-12 {
			t.Errorf("k3(%v) = %v want %v", d, got.KL, want)
		}
		const h = 1e-6
		fd := (c.Token(h, 0, d, 0, 0).KL - c.Token(-h, 0, d, 0, 0).KL) / (2 * h)
		if math.Abs(fd-got.DKL) > 1e-6 {
			t.Errorf("dk3 at d=%v: %v vs finite difference %v", d, got.DKL, fd)
		}
	}
	if got := c.Token(0, 0, 30, 0, 0); got.KL != 10 || got.DKL != 0 {
		t.Errorf("k3 clamp: %+v", got)
	}
}

// TestMicroBatchHandComputed: a 2-row micro-batch computed by hand.
func TestMicroBatchHandComputed(t *testing.T) {
	c := DefaultLoss()
	c.KLCoef = 0.5
	rows := []Row{
		{LogProbs: []float32{-1, -2}, Old: []float32{-1, -2}, Ref: []float32{-1, -2}, Adv: 1, Weight: 2},
		{LogProbs: []float32{-0.5}, Old: []float32{-0.5}, Ref: []float32{-1.5}, Adv: -1, Weight: 1},
	}
	grads, st := c.MicroBatch(rows, 2)
	// ρ = 1 everywhere. Row 0: L = −2 per token, k = 0. Row 1: L = +1, d = −1, k = e^−1.
	k := math.Exp(-1)
	wantLoss := (-2 - 2 + 1 + 0.5*k) / 3
	if math.Abs(st.Loss-wantLoss) > 1e-12 {
		t.Errorf("loss %v want %v", st.Loss, wantLoss)
	}
	// ∂L/∂lp = −Ã; ∂k/∂lp = 1 − e^d; all divided by 3 tokens and GA = 2.
	want := [][]float64{{-2.0 / 6, -2.0 / 6}, {(1 + 0.5*(1-k)) / 6}}
	for i := range want {
		for j := range want[i] {
			if math.Abs(float64(grads[i][j])-want[i][j]) > 1e-7 {
				t.Errorf("grad[%d][%d] = %v want %v", i, j, grads[i][j], want[i][j])
			}
		}
	}
	// The signal uses the unweighted advantage: −A·ρ = −1 and +1.
	if st.RowSignal[0] != -1 || st.RowSignal[1] != 1 {
		t.Errorf("row signal %v", st.RowSignal)
	}
	c.Aggregation = "seq-mean-token-mean"
	grads, _ = c.MicroBatch(rows, 1)
	if math.Abs(float64(grads[0][0])-(-2.0/4)) > 1e-7 || math.Abs(float64(grads[1][0])-(1+0.5*(1-k))/2) > 1e-7 {
		t.Errorf("seq-mean-token-mean grads %v", grads)
	}
	// Prompt-mean: row 0 belongs to a prompt with 4 rollouts (all others in
	// another micro-batch), row 1 to a prompt with 1. Prompts present:
	// 1/4 + 1 = 1.25. Row 0 tokens: 1/(2·4·1.25) = 0.1; row 1: 1/(1·1·1.25) = 0.8.
	c.Aggregation = "prompt-mean-token-mean"
	rows[0].GroupSize, rows[1].GroupSize = 4, 1
	grads, _ = c.MicroBatch(rows, 1)
	if math.Abs(float64(grads[0][0])-(-2*0.1)) > 1e-7 || math.Abs(float64(grads[1][0])-(1+0.5*(1-k))*0.8) > 1e-7 {
		t.Errorf("prompt-mean-token-mean grads %v", grads)
	}
}

// TestSignalZeroAtRatioOne: with log π = log π_old, the mean loss signal of
// every prompt group (hence every bin) is exactly 0 (docs/algorithm.md §6.2).
func TestSignalZeroAtRatioOne(t *testing.T) {
	rewards := []float64{1, -1, -1, -1, 1, 1, -1, 1, -1, -1}
	groups := []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2}
	adv := Advantages(rewards, groups, 1e-6, 0)
	var rows []Row
	for i := range rewards {
		lp := []float32{-0.3, -1.2, -float32(i)}
		rows = append(rows, Row{LogProbs: lp, Old: lp, Ref: lp, Adv: adv[i], Weight: 1})
	}
	_, st := DefaultLoss().MicroBatch(rows, 1)
	sum := map[int]float64{}
	for i, s := range st.RowSignal {
		sum[groups[i]] += s
	}
	for g, s := range sum {
		if math.Abs(s) > 1e-12 {
			t.Errorf("group %d signal sum %v, want 0", g, s)
		}
	}
}
