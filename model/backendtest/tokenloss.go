package backendtest

import (
	"math"
	"testing"

	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/model"
)

// tokenLossGrad: a backend's TokenLossGrad (the fused head's per-token
// derivative, model.TokenLossGrader) against the host's TokenLoss.Grad
// (float64, grpo) on every branch: ratios inside and beyond the
// clip on both sides, the dual clip, Δ and the KL's d beyond ±20, the k3
// value beyond its clamp, dropped tokens, importance weights or none, a
// NaN log-prob, and a row range not starting at 0 over more than one
// block. Each derivative must equal the host's or lie within 2 float32
// ulps of it (a GPU's exp may round its last bit differently from Go's;
// the fast CPU backend computes the host's function and is exact).
// Backends without the op (the reference: the model computes the
// derivative on the host there) skip.
func (s *suite) tokenLossGrad(t *testing.T) {
	g := model.TrainerCapsOf(s.b).TokenLoss
	if g == nil {
		t.Skip("the backend has no TokenLossGrad (the model computes the derivatives on the host)")
	}
	const M, lo = 340, 37
	lp := make([]float32, M)
	l := &model.TokenLoss{Surrogate: grpo.Surrogate{ClipLow: 0.2, ClipHigh: 0.28, DualClip: 3, KLCoef: 0.04}, GA: 3,
		Old: make([]float32, M), Ref: make([]float32, M), Adv: make([]float64, M), Denom: make([]float64, M)}
	for k := range M {
		lp[k] = float32(-3 * s.rng.Float64())
		l.Old[k] = lp[k] + float32(0.5*s.rng.NormFloat64())
		l.Ref[k] = lp[k] + float32(0.5*s.rng.NormFloat64())
		l.Adv[k] = 1.5 * s.rng.NormFloat64()
		l.Denom[k] = 517
		switch k % 11 {
		case 1:
			l.Old[k] = lp[k] - 21 // Δ > 20
		case 2:
			l.Old[k] = lp[k] + 22 // Δ < −20
		case 3:
			l.Old[k], l.Adv[k] = lp[k]-2, -1.2 // ρ = e², Ã < 0: the dual clip
		case 4:
			l.Ref[k] = lp[k] + 25 // d > 20
		case 5:
			l.Ref[k] = lp[k] + 14 // k3 beyond its clamp of 10
		case 6:
			l.Denom[k] = 0 // a dropped (masked) token
		case 7:
			lp[k] = float32(math.NaN())
		}
	}
	for _, withIS := range []bool{false, true} {
		l.IS = nil
		if withIS {
			l.IS = make([]float32, M)
			for k := range l.IS {
				l.IS[k] = float32(0.2 + 1.5*s.rng.Float64())
			}
		}
		n := M - lo
		dl, x := s.tensor(nil, n), s.tensor(lp[lo:], n)
		g.TokenLossGrad(dl, x, l, lo, M)
		s.noErr(t, "token loss gradient")
		got := s.get(dl)
		inexact := 0
		for i, d := range got {
			want := l.Grad(lo+i, lp[lo+i])
			if d == want || (d != d && want != want) {
				continue
			}
			m := float32(math.Max(math.Abs(float64(d)), math.Abs(float64(want))))
			ulp := math.Nextafter32(m, float32(math.Inf(1))) - m
			if !(math.Abs(float64(d-want)) <= 2*float64(ulp)) {
				t.Fatalf("IS=%v: row %d: %v, want %v", withIS, lo+i, d, want)
			}
			inexact++
		}
		t.Logf("IS=%v: %d of %d derivatives within 2 ulps but not equal", withIS, inexact, n)
		model.Release(s.b, dl, x)
	}
	// A range outside the loss is an error, not a read past its tables.
	dl, x := s.tensor(nil, 4), s.tensor(nil, 4)
	g.TokenLossGrad(dl, x, l, M-2, M+2)
	if s.b.Err() == nil {
		t.Fatal("rows beyond the loss: no error")
	}
	s.b.ResetErr()
	model.Release(s.b, dl, x)
}
