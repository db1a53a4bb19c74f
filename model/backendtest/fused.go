package backendtest

// The fused ops (model.ResidualNormer), on backends that have them: each
// against a float64 reference, and against the same backend's unfused ops
// (Copy, Add, RMSNorm, RMSNormBackward), which the model runs where the
// fused ones are missing. Both CPU backends add in the unfused order, so
// there the two agree bitwise (the test logs the largest difference).

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

func (s *suite) fused(t *testing.T) {
	rn, ok := s.b.(model.ResidualNormer)
	if !ok {
		t.Skipf("%s has no fused residual norm (model.ResidualNormer)", s.b.Name())
	}
	for _, n := range []int{1, 31, 33, 127, 300} {
		rows := 3
		xv, yv, wv := s.randn(rows*n, 1), s.randn(rows*n, 1), s.randn(n, 1)
		x, y, w := s.tensor(xv, rows, n), s.tensor(yv, rows, n), s.tensor(wv, n)
		sum, out, rstd := s.b.New(rows, n), s.b.New(rows, n), s.b.New(rows)
		rn.AddRMSNorm(sum, out, rstd, x, y, w, 1e-6)
		wantSum, wantOut, wantRstd := refAddRMSNorm(xv, yv, wv, n, 1e-6)
		name := fmt.Sprintf("n=%d", n)
		s.expect(t, name+" sum", s.get(sum), wantSum, s.tol(t))
		s.expect(t, name+" out", s.get(out), wantOut, s.tol(t))
		s.expect(t, name+" rstd", s.get(rstd), wantRstd, s.tol(t))
		// The unfused ops on the same backend.
		usum, uout, urstd := s.b.New(rows, n), s.b.New(rows, n), s.b.New(rows)
		s.b.Copy(usum, x)
		s.b.Add(usum, y)
		s.b.RMSNorm(uout, urstd, usum, w, 1e-6)
		s.same(t, name+" sum vs Copy+Add", s.get(sum), s.get(usum))
		s.same(t, name+" out vs RMSNorm", s.get(out), s.get(uout))
		// In place: sum is x.
		rn.AddRMSNorm(x, out, nil, x, y, w, 1e-6)
		s.same(t, name+" in place sum", s.get(x), s.get(usum))
		s.same(t, name+" in place out", s.get(out), s.get(uout))

		dv, resv := s.randn(rows*n, 1), s.randn(rows*n, 1)
		dout, res := s.tensor(dv, rows, n), s.tensor(resv, rows, n)
		dx, dw := s.b.New(rows, n), s.tensor(wv, n) // dw accumulates onto w's values
		rn.RMSNormBackwardAdd(dx, dw, dout, usum, w, urstd, res)
		udx, udw := s.b.New(rows, n), s.tensor(wv, n)
		s.b.RMSNormBackward(udx, udw, dout, usum, w, urstd)
		wantDx := f64(s.get(udx))
		for i := range wantDx {
			wantDx[i] += float64(resv[i])
		}
		s.expect(t, name+" dx = res + ∂", s.get(dx), wantDx, s.tol(t))
		s.same(t, name+" dx vs RMSNormBackward+Add", s.get(dx), func() []float32 { s.b.Add(udx, res); return s.get(udx) }())
		s.same(t, name+" dw vs RMSNormBackward", s.get(dw), s.get(udw))
		// A dx with a bf16 copy (model.HalfPrecision, as the backward's residual
		// gradients have): the same fp32 dx, and a product reading dx·I
		// gives it rounded to bf16 (the copy the pass wrote), or dx itself
		// where the backend's products keep fp32.
		if sh := model.TrainerCapsOf(s.b).Half; sh != nil {
			hdx := s.b.New(rows, n)
			if _, err := sh.Shadow(hdx); err != nil {
				t.Fatal(err)
			}
			rn.RMSNormBackwardAdd(hdx, s.tensor(wv, n), dout, usum, w, urstd, res)
			fp := s.get(dx)
			if got := s.get(hdx); !slices.Equal(got, fp) {
				t.Fatalf("%s: dx with a bf16 copy differs from dx without", name)
			}
			eye := make([]float32, n*n)
			for j := range n {
				eye[j*n+j] = 1
			}
			prod := s.b.New(rows, n)
			s.b.MatMul(prod, hdx, s.tensor(eye, n, n), false, false, false)
			got := s.get(prod)
			for i := range fp {
				// dx itself may reach the product's tile loads, which round
				// it to bf16, or to tf32 where cuBLAS's FAST_16BF does so
				// (the emulator's GDROTRAIN_EMU_FAST16BF=tf32 lane).
				r := model.BF16ToF32(model.F32ToBF16(fp[i]))
				if got[i] != fp[i] && got[i] != r && got[i] != roundTF32(fp[i]) {
					t.Fatalf("%s: dx·I element %d is %v; dx %v, rounded to bf16 %v, to tf32 %v", name, i, got[i], fp[i], r, roundTF32(fp[i]))
				}
			}
		}
	}
	s.noErr(t, "fused residual norm")
	b := s.b
	for _, c := range []struct {
		name string
		call func()
	}{
		{"add rmsnorm sizes", func() { rn.AddRMSNorm(b.New(2, 4), b.New(2, 4), nil, b.New(2, 4), b.New(2, 3), b.New(4), 1e-6) }},
		{"rmsnorm backward add res size", func() {
			rn.RMSNormBackwardAdd(b.New(2, 4), b.New(4), b.New(2, 4), b.New(2, 4), b.New(4), b.New(2), b.New(2, 3))
		}},
		{"rmsnorm backward add res is dx", func() {
			dx := b.New(2, 4)
			rn.RMSNormBackwardAdd(dx, b.New(4), b.New(2, 4), b.New(2, 4), b.New(4), b.New(2), dx)
		}},
	} {
		c.call()
		if err := b.Err(); err == nil {
			t.Errorf("%s: no error recorded", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
		b.ResetErr()
	}
}

// same checks that a fused op's result equals the unfused ops' within the
// forward tolerance and logs how far apart they are (0 on the CPU
// backends, which add in the same order).
func (s *suite) same(t *testing.T, what string, fused, unfused []float32) {
	t.Helper()
	var worst float64
	for i := range fused {
		worst = math.Max(worst, math.Abs(float64(fused[i])-float64(unfused[i])))
	}
	t.Logf("%s: largest difference %.2g", what, worst)
	s.expect(t, what, fused, f64(unfused), s.tol(t))
}

// refAddRMSNorm is x + y (rounded to float32, as the residual stream is)
// and its RMSNorm in float64.
func refAddRMSNorm(x, y, w []float32, n int, eps float64) (sum, out, rstd []float64) {
	rows := len(x) / n
	sum, out, rstd = make([]float64, len(x)), make([]float64, len(x)), make([]float64, rows)
	for r := 0; r < rows; r++ {
		var ss float64
		for j := 0; j < n; j++ {
			v := float64(x[r*n+j] + y[r*n+j])
			sum[r*n+j] = v
			ss += v * v
		}
		rs := 1 / math.Sqrt(ss/float64(n)+eps)
		rstd[r] = rs
		for j := 0; j < n; j++ {
			out[r*n+j] = sum[r*n+j] * rs * float64(w[j])
		}
	}
	return sum, out, rstd
}

// halfLogitsGrad: where the backend keeps activations in bf16
// (model.HalfPrecision), LogSoftmaxGatherBackward into a bf16 activation
// gives the fp32 result rounded to nearest even, exactly (the LM head's
// gradient chunks, model/head.go).
func (s *suite) halfLogitsGrad(t *testing.T) {
	as := model.TrainerCapsOf(s.b).Half
	if as == nil {
		t.Skipf("%s keeps no bf16 activations", s.b.Name())
	}
	const M, V = 3, 1031
	logits := s.tensor(s.randn(M*V, 4), M, V)
	targets := []int32{0, 1030, 517}
	lp, lse, dl := s.b.New(M), s.b.New(M), s.tensor(s.randn(M, 1), M)
	s.b.LogSoftmaxGather(lp, lse, nil, logits, targets)
	full, half := s.b.New(M, V), as.ActivationHalf(M, V)
	s.b.LogSoftmaxGatherBackward(full, dl, logits, lse, targets)
	s.b.LogSoftmaxGatherBackward(half, dl, logits, lse, targets)
	want, got := s.get(full), s.get(half)
	bf16 := func(f float32) float32 { // round to nearest even (no NaN here)
		u := math.Float32bits(f)
		u += 0x7fff + (u>>16)&1
		return math.Float32frombits(u &^ 0xffff)
	}
	if slices.Equal(got, want) { // fp32 storage (the CUDA backend under fp32 or tf32 products)
		t.Logf("ActivationHalf is fp32 on this backend: the gradient equals the fp32 one")
		return
	}
	for i := range want {
		if r := bf16(want[i]); got[i] != r {
			t.Fatalf("element %d: bf16 dlogits %v, fp32 %v rounds to %v", i, got[i], want[i], r)
		}
	}
	s.noErr(t, "bf16 logits gradient")
}

// halfInputGrads: where the backend keeps activations in bf16
// (model.HalfPrecision), SwiGLUBackward into bf16 dgate, dup and
// SplitQKVBackward into a bf16 dqkv (from bf16 gate, up and qkv) give the
// fp32 gradients of the same inputs rounded to nearest even, exactly (the
// backward's dgu and dqkv, model/backward.go), and CopyCols reads such a
// gradient back widened exactly (LoRA's q/k/v blocks).
func (s *suite) halfInputGrads(t *testing.T) {
	as := model.TrainerCapsOf(s.b).Half
	if as == nil {
		t.Skipf("%s keeps no bf16 activations", s.b.Name())
	}
	// half is a bf16 activation holding vals rounded (a product writes it:
	// vals·I), or vals where the backend's activations are fp32.
	half := func(vals []float32, R, W int) *model.Tensor {
		eye := make([]float32, W*W)
		for j := range W {
			eye[j*W+j] = 1
		}
		h := as.ActivationHalf(R, W)
		s.b.MatMul(h, s.tensor(vals, R, W), s.tensor(eye, W, W), false, false, false)
		return h
	}
	rounds := func(what string, got, want []float32) {
		t.Helper()
		if slices.Equal(got, want) {
			return // fp32 storage (the CUDA backend under fp32 or tf32 products)
		}
		for i := range want {
			if r := model.BF16ToF32(model.F32ToBF16(want[i])); got[i] != r {
				t.Fatalf("%s element %d: bf16 %v, fp32 %v rounds to %v", what, i, got[i], want[i], r)
			}
		}
	}
	const R, F = 5, 37
	gate, up := half(s.randn(R*F, 2), R, F), half(s.randn(R*F, 1), R, F)
	dout := s.tensor(s.randn(R*F, 1), R, F)
	dg, du := s.b.New(R, F), s.b.New(R, F)
	hg, hu := as.ActivationHalf(R, F), as.ActivationHalf(R, F)
	s.b.SwiGLUBackward(dg, du, dout, gate, up)
	s.b.SwiGLUBackward(hg, hu, dout, gate, up)
	rounds("swiglu dgate", s.get(hg), s.get(dg))
	rounds("swiglu dup", s.get(hu), s.get(du))

	d := model.QKVDims{N: 3, H: 4, G: 2, D: 8}
	pos := []int32{0, 7, 300}
	qkv := half(s.randn(d.N*d.Width(), 2), d.N, d.Width())
	qw, kw := s.tensor(s.randn(d.D, 1), d.D), s.tensor(s.randn(d.D, 1), d.D)
	qn, kn, v := as.ActivationHalf(d.N, d.H, d.D), as.ActivationHalf(d.N, d.G, d.D), as.ActivationHalf(d.N, d.G, d.D)
	rq, rk := s.b.New(d.N*d.H), s.b.New(d.N*d.G)
	s.b.SplitQKV(qn, kn, v, rq, rk, qkv, qw, kw, pos, 1e6, 1e-6)
	dq, dk, dv := s.tensor(s.randn(qn.Numel(), 1), qn.Shape...), s.tensor(s.randn(kn.Numel(), 1), kn.Shape...), s.tensor(s.randn(v.Numel(), 1), v.Shape...)
	full, hqkv := s.b.New(d.N, d.Width()), as.ActivationHalf(d.N, d.Width())
	dqw, dkw, hqw, hkw := s.b.New(d.D), s.b.New(d.D), s.b.New(d.D), s.b.New(d.D)
	s.b.SplitQKVBackward(full, dqw, dkw, dq, dk, dv, qkv, qw, kw, rq, rk, pos, 1e6)
	s.b.SplitQKVBackward(hqkv, hqw, hkw, dq, dk, dv, qkv, qw, kw, rq, rk, pos, 1e6)
	rounds("split qkv dqkv", s.get(hqkv), s.get(full))
	s.same(t, "split qkv dqw with a bf16 dqkv", s.get(hqw), s.get(dqw))
	s.same(t, "split qkv dkw with a bf16 dqkv", s.get(hkw), s.get(dkw))
	cols := s.b.New(d.N, d.D)
	s.b.CopyCols(cols, hqkv, d.H*d.D)
	all := s.get(hqkv)
	for r := range d.N {
		for j := range d.D {
			if got, want := s.get(cols)[r*d.D+j], all[r*d.Width()+d.H*d.D+j]; got != want {
				t.Fatalf("copy cols from a bf16 activation: row %d col %d is %v, want %v", r, j, got, want)
			}
		}
	}
	s.noErr(t, "bf16 input gradients")
}

// adamwScaled: AdamW with a gradient scale (clipping's coefficient, fused
// into the update) gives bitwise what Scale then AdamW gives.
func (s *suite) adamwScaled(t *testing.T) {
	const n, scale = 1031, float32(0.37)
	pv, gv, mv, vv := s.randn(n, 1), s.randn(n, 3), s.randn(n, 0.1), s.randn(n, 0.1)
	for i := range vv {
		vv[i] *= vv[i] // second moments are ≥ 0
	}
	h := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: scale}
	p, g, m, v := s.tensor(pv, n), s.tensor(gv, n), s.tensor(mv, n), s.tensor(vv, n)
	s.b.AdamW(p, g, m, v, h)
	up, ug, um, uv := s.tensor(pv, n), s.tensor(gv, n), s.tensor(mv, n), s.tensor(vv, n)
	s.b.Scale(ug, scale)
	h.GradScale = 0
	s.b.AdamW(up, ug, um, uv, h)
	for _, c := range []struct {
		name      string
		got, want *model.Tensor
	}{{"p", p, up}, {"m", m, um}, {"v", v, uv}} {
		if got, want := s.get(c.got), s.get(c.want); !slices.Equal(got, want) {
			s.same(t, "scaled AdamW "+c.name+" vs Scale+AdamW", got, want)
			t.Errorf("scaled AdamW %s differs from Scale then AdamW", c.name)
		}
	}
	s.expect(t, "gradient left unscaled", s.get(g), f64(gv), s.tol(t))
	s.noErr(t, "adamw scaled")
}

// roundTF32 rounds f to tf32's 10 mantissa bits, to nearest even (finite
// values).
func roundTF32(f float32) float32 {
	u := math.Float32bits(f)
	u += 0xfff + (u>>13)&1
	return math.Float32frombits(u &^ 0x1fff)
}
