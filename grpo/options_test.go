package grpo

// Tests of the options of docs/algorithm.md §5.10–5.11 and §9.2: rollout
// correction, overlong shaping and pass@k, each against a hand-derived
// table or an independent computation (finite differences, enumeration).

import (
	"math"
	"testing"
)

func lps(p ...float64) []float32 {
	out := make([]float32, len(p))
	for i, x := range p {
		out[i] = float32(math.Log(x))
	}
	return out
}

// TestCorrectionWeights: ratios π_old/π_samp of 1.8, 0.5 and 3 (sequence
// ratio 2.7) under each mode, by hand (no ratio on a boundary: the
// log-probs are float32).
func TestCorrectionWeights(t *testing.T) {
	old, samp := lps(0.9, 0.2, 0.9), lps(0.5, 0.4, 0.3)
	cases := []struct {
		mode, name        string
		cap, low, high    float64
		want              []float64 // nil: no weights
		truncated, masked int
	}{
		{CorrectNone, "none", 2, 0.6, 2.5, nil, 0, 0},
		{CorrectTokenTIS, "token_tis cap 2", 2, 0.6, 2.5, []float64{1.8, 0.5, 2}, 1, 0},
		{CorrectTokenTIS, "token_tis cap 4", 4, 0.6, 2.5, []float64{1.8, 0.5, 3}, 0, 0},
		{CorrectTokenMIS, "token_mis [0.6, 2.5]", 2, 0.6, 2.5, []float64{1.8, 0, 0}, 0, 2},
		{CorrectTokenMIS, "token_mis [0.45, 3.1]", 2, 0.45, 3.1, []float64{1.8, 0.5, 3}, 0, 0},
		{CorrectSeqTIS, "seq_tis cap 2", 2, 0.6, 2.5, []float64{2, 2, 2}, 3, 0},
		{CorrectSeqTIS, "seq_tis cap 5", 5, 0.6, 2.5, []float64{2.7, 2.7, 2.7}, 0, 0},
		{CorrectSeqMIS, "seq_mis [0.6, 2.5]", 2, 0.6, 2.5, []float64{0, 0, 0}, 0, 3},
		{CorrectSeqMIS, "seq_mis [0.6, 4]", 2, 0.6, 4, []float64{2.7, 2.7, 2.7}, 0, 0},
	}
	for _, c := range cases {
		cc := CorrectionConfig{Mode: c.mode, Cap: c.cap, Low: c.low, High: c.high}
		if err := cc.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w, m, err := cc.Weights(old, samp)
		if err != nil {
			t.Fatal(err)
		}
		if (w == nil) != (c.want == nil) || len(w) != len(c.want) && w != nil {
			t.Fatalf("%s: weights %v, want %v", c.name, w, c.want)
		}
		for k := range c.want {
			if math.Abs(float64(w[k])-c.want[k]) > 1e-6 {
				t.Errorf("%s: w[%d] = %v, want %v", c.name, k, w[k], c.want[k])
			}
		}
		if m.Truncated != c.truncated || m.Masked != c.masked {
			t.Errorf("%s: truncated %d masked %d, want %d %d", c.name, m.Truncated, m.Masked, c.truncated, c.masked)
		}
		// The mismatch figures do not depend on the mode.
		ln := math.Log
		for _, f := range []struct {
			name      string
			got, want float64
		}{
			{"Σ|Δ|", m.AbsSum, ln(1.8) + ln(2) + ln(3)}, {"max|Δ|", m.AbsMax, ln(3)}, {"Σ Δ", m.LogRatio, ln(2.7)},
			{"Σ k3", m.K3Sum, (0.8 - ln(1.8)) + (-0.5 + ln(2)) + (2 - ln(3))},
		} {
			if math.Abs(f.got-f.want) > 1e-6 {
				t.Errorf("%s: %s = %v, want %v", c.name, f.name, f.got, f.want)
			}
		}
		wantOOB := 0 // tokens whose ratio leaves [low, high]
		for _, r := range []float64{1.8, 0.5, 3} {
			if r < c.low || r > c.high {
				wantOOB++
			}
		}
		if m.OutOfBand != wantOOB {
			t.Errorf("%s: %d tokens out of band, want %d", c.name, m.OutOfBand, wantOOB)
		}
	}
	if _, _, err := DefaultCorrection().Weights(old, samp[:2]); err == nil {
		t.Error("a length mismatch was accepted")
	}
	for _, bad := range []CorrectionConfig{{Mode: "tis", Cap: 2, Low: 0.5, High: 2}, {Mode: CorrectTokenTIS, Cap: 0.5, Low: 0.5, High: 2},
		{Mode: CorrectTokenMIS, Cap: 2, Low: 0, High: 2}, {Mode: CorrectTokenMIS, Cap: 2, Low: 0.5, High: 0.9}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestMismatchKLIsUnbiased: the k3 figure averaged over tokens drawn from
// π_samp is KL(π_samp ‖ π_old), computed here by enumeration.
func TestMismatchKLIsUnbiased(t *testing.T) {
	ps := []float64{0.5, 0.2, 0.15, 0.1, 0.05}
	po := []float64{0.4, 0.3, 0.1, 0.15, 0.05}
	var kl, est float64
	for a := range ps {
		kl += ps[a] * math.Log(ps[a]/po[a])
		_, m, _ := DefaultCorrection().Weights(lps(po[a]), lps(ps[a]))
		est += ps[a] * m.K3Sum
	}
	if math.Abs(kl-est) > 1e-6 {
		t.Fatalf("E[k3] = %v, KL = %v", est, kl)
	}
}

// microRows builds a micro-batch of three rows of random-ish log-probs.
func microRows(is bool) []Row {
	mk := func(v ...float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	rows := []Row{
		{LogProbs: mk(-1.0, -0.5, -2.0), Old: mk(-1.1, -0.4, -2.3), Ref: mk(-1.2, -0.6, -2.0), Adv: 0.8, Weight: 1.3, GroupSize: 2},
		{LogProbs: mk(-0.3, -1.7), Old: mk(-0.2, -1.9), Ref: mk(-0.3, -1.5), Adv: -0.8, Weight: 1.3, GroupSize: 2},
		{LogProbs: mk(-2.2, -0.9, -0.1, -1.3), Old: mk(-2.0, -0.95, -0.12, -1.0), Ref: mk(-2.1, -0.9, -0.2, -1.1), Adv: 1.1, Weight: 0.7, GroupSize: 1},
	}
	if is {
		rows[0].IS, rows[1].IS, rows[2].IS = mk(1.5, 0, 0.7), mk(2, 0.2), mk(1, 1, 0.4, 1.9)
	}
	return rows
}

// TestMicroBatchCorrection: the importance weights scale the policy term
// (checked by central differences of the loss, which also sees the KL term
// unweighted), in every aggregation mode and with the GDRO multipliers;
// weights of 1 change nothing bitwise; a masked row leaves the loss as if
// it were absent.
func TestMicroBatchCorrection(t *testing.T) {
	for _, agg := range []string{"token-mean", "seq-mean-token-mean", "prompt-mean-token-mean"} {
		c := DefaultLoss()
		c.Aggregation, c.KLCoef = agg, 0.05
		rows := microRows(true)
		grads, _ := c.MicroBatch(rows, 2)
		for i := range rows {
			for k := range rows[i].LogProbs {
				const h = 1e-3
				x := rows[i].LogProbs[k]
				rows[i].LogProbs[k] = x + h
				_, up := c.MicroBatch(rows, 2)
				rows[i].LogProbs[k] = x - h
				_, dn := c.MicroBatch(rows, 2)
				rows[i].LogProbs[k] = x
				fd := (up.Loss - dn.Loss) / (2 * h) / 2
				if math.Abs(fd-float64(grads[i][k])) > 2e-4 {
					t.Errorf("%s row %d token %d: gradient %v, finite difference %v", agg, i, k, grads[i][k], fd)
				}
			}
		}
		// The weighted policy loss, by hand for token-mean: Σ w·L / tokens.
		if agg == "token-mean" {
			var want float64
			for _, r := range rows {
				for k := range r.LogProbs {
					tt := c.Token(float64(r.LogProbs[k]), float64(r.Old[k]), float64(r.Ref[k]), r.Adv*r.Weight, r.Adv)
					want += (float64(r.IS[k])*tt.Policy + c.KLCoef*tt.KL) / 9
				}
			}
			if _, st := c.MicroBatch(rows, 1); math.Abs(st.Loss-want) > 1e-12 {
				t.Errorf("token-mean loss %v, by hand %v", st.Loss, want)
			}
		}
		// Weights of 1 are no weights.
		plain, ones := microRows(false), microRows(false)
		for i := range ones {
			ones[i].IS = make([]float32, len(ones[i].LogProbs))
			for k := range ones[i].IS {
				ones[i].IS[k] = 1
			}
		}
		g1, s1 := c.MicroBatch(plain, 1)
		g2, s2 := c.MicroBatch(ones, 1)
		if s1.Loss != s2.Loss || g1[2][3] != g2[2][3] {
			t.Errorf("%s: weights of 1 changed the loss %v → %v", agg, s1.Loss, s2.Loss)
		}
		// A masked row is an absent row; its gradient is zero.
		masked := microRows(true)
		masked[1].Masked = true
		gm, sm := c.MicroBatch(masked, 1)
		without := []Row{microRows(true)[0], microRows(true)[2]}
		if agg == "prompt-mean-token-mean" { // the group-size bookkeeping sees one row of prompt 0 either way
			without[0].GroupSize = 2
		}
		gw, sw := c.MicroBatch(without, 1)
		if agg != "prompt-mean-token-mean" && math.Abs(sm.Loss-sw.Loss) > 1e-12 {
			t.Errorf("%s: masked loss %v, without the row %v", agg, sm.Loss, sw.Loss)
		}
		if agg != "prompt-mean-token-mean" && gm[2][0] != gw[1][0] {
			t.Errorf("%s: the masked row changed another row's gradient", agg)
		}
		for _, g := range gm[1] {
			if g != 0 {
				t.Errorf("%s: masked row has gradient %v", agg, gm[1])
				break
			}
		}
		if len(sm.RowSignal) != 3 || sm.RowSignal[1] == 0 {
			t.Errorf("%s: a masked row must still report its signal: %v", agg, sm.RowSignal)
		}
	}
}

// TestOverlongPenalty: DAPO's soft overlong punishment, by hand (limit 10,
// ramp 4: free up to 6 tokens, then −¼ per token).
func TestOverlongPenalty(t *testing.T) {
	o := OverlongConfig{SoftPenaltyTokens: 4, PenaltyFactor: 1}
	want := []float64{0, 0, 0, 0, 0, 0, 0, -0.25, -0.5, -0.75, -1}
	for n, w := range want {
		if got := o.Penalty(n, 10); math.Abs(got-w) > 1e-15 {
			t.Errorf("length %d: penalty %v, want %v", n, got, w)
		}
	}
	o.PenaltyFactor = 0.5
	if got := o.Penalty(8, 10); got != -0.25 {
		t.Errorf("factor 0.5, length 8: %v", got)
	}
	if got := (OverlongConfig{PenaltyFactor: 1}).Penalty(10, 10); got != 0 {
		t.Errorf("ramp 0 must be off, got %v", got)
	}
	if (OverlongConfig{SoftPenaltyTokens: 10, PenaltyFactor: 1}).CheckLimit(10) == nil {
		t.Error("a ramp as long as the limit was accepted")
	}
}

// TestPassAtKByEnumeration: the unbiased estimator equals the share of
// k-subsets of the n samples that hold a correct one, counted.
func TestPassAtKByEnumeration(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				hit, all := 0, 0
				for mask := 0; mask < 1<<n; mask++ {
					if popcount(mask) != k {
						continue
					}
					all++
					if mask&(1<<c-1) != 0 { // samples 0…c−1 are the correct ones
						hit++
					}
				}
				if got, want := PassAtK(n, c, k), float64(hit)/float64(all); math.Abs(got-want) > 1e-12 {
					t.Errorf("pass@%d(n=%d, c=%d) = %v, enumeration %v", k, n, c, got, want)
				}
			}
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestPassAtK(t *testing.T) {
	cases := []struct {
		n, c, k int
		want    float64
	}{
		{4, 0, 1, 0}, {4, 4, 1, 1}, {4, 1, 1, 0.25}, {4, 1, 4, 1}, {4, 1, 2, 0.5}, {8, 2, 4, 1 - (6.0*5*4*3)/(8*7*6*5)}, {8, 7, 2, 1},
	}
	for _, c := range cases {
		if got := PassAtK(c.n, c.c, c.k); abs(got-c.want) > 1e-12 {
			t.Errorf("pass@%d(n=%d, c=%d) = %v want %v", c.k, c.n, c.c, got, c.want)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
