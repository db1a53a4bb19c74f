// Package backendtest is the conformance suite every model.Backend must pass:
// table-driven cases per op with known values, invariants (softmax mass,
// norm preservation, inverse rotations), stability at large magnitudes,
// rejection of bad arguments, odd sizes (1, 31, 33, 127) and, for every
// backward op, central finite differences of L = Σ out ⊙ r. The CPU backend
// runs it in `make test`; the CUDA backend runs it on the GPU.
//
// Tolerances come from the backend's storage dtype (Tol); finite differences
// use a step of 1e-2 on float32 ops, whose truncation and rounding error is
// ≈1e-4 relative, hence their looser FD tolerance.
package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// Options tune the suite to a backend's precision.
type Options struct {
	Tol   numcheck.Tol // forward ops
	FDTol numcheck.Tol // backward ops against finite differences
	// Ops overrides Tol for the forward checks of one op group, keyed by
	// its subtest name (MatMul, Attention, …): a backend whose matrix
	// products round their inputs (bf16 tensor cores) loosens MatMul alone
	// and keeps every fp32 kernel at Tol.
	Ops map[string]numcheck.Tol
}

// FP32 are the options for float32 backends.
var FP32 = Options{Tol: numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}, FDTol: numcheck.Tol{Atol: 2e-3, Rtol: 1e-2}}

// suite carries the backend and helpers for one run.
type suite struct {
	b   model.Backend
	o   Options
	rng *rand.Rand
}

// Run executes every case against b.
func Run(t *testing.T, b model.Backend, o Options) {
	s := &suite{b: b, o: o, rng: rand.New(rand.NewPCG(42, 7))}
	t.Run("Elementwise", s.elementwise)
	t.Run("MatMul", s.matmul)
	t.Run("Embedding", s.embedding)
	t.Run("RMSNorm", s.rmsnorm)
	t.Run("FusedResidualNorm", s.fused)
	t.Run("RoPE", s.rope)
	t.Run("SplitQKV", s.splitQKV)
	t.Run("Attention", s.attention)
	t.Run("AttentionHeadDims", s.attentionHeadDims)
	t.Run("KVCache", s.kvCache)
	t.Run("SwiGLU", s.swiglu)
	t.Run("LogSoftmaxGather", s.logSoftmaxGather)
	t.Run("HalfLogitsGrad", s.halfLogitsGrad)
	t.Run("TokenLossGrad", s.tokenLossGrad)
	t.Run("HalfInputGrads", s.halfInputGrads)
	t.Run("Rows", s.rows)
	t.Run("Cols", s.cols)
	t.Run("AdamW", s.adamw)
	t.Run("AdamWScaled", s.adamwScaled)
	t.Run("MultiTensor", s.multiTensor)
	t.Run("MemoryPool", s.memoryPool)
	t.Run("ConfigChecker", s.configChecker)
	t.Run("BadArguments", s.badArguments)
}

func (s *suite) tensor(vals []float32, shape ...int) *model.Tensor {
	t := s.b.New(shape...)
	if vals != nil {
		s.b.Upload(t, vals)
	}
	return t
}

func (s *suite) get(t *model.Tensor) []float32 {
	out := make([]float32, t.Numel())
	s.b.Download(t, out)
	return out
}

func (s *suite) randn(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * s.rng.NormFloat64())
	}
	return out
}

// noErr fails the test if the backend recorded an error.
func (s *suite) noErr(t *testing.T, op string) {
	t.Helper()
	if err := s.b.Err(); err != nil {
		s.b.ResetErr()
		t.Fatalf("%s: unexpected backend error: %v", op, err)
	}
}

// tol is the forward tolerance of the op group t runs (Options.Ops, else
// Options.Tol).
func (s *suite) tol(t *testing.T) numcheck.Tol {
	if tol, ok := s.o.Ops[path.Base(t.Name())]; ok {
		return tol
	}
	return s.o.Tol
}

// expect compares got with want and logs the observed error (go test -v
// shows it: that is how the tolerances beside each backend were chosen).
func (s *suite) expect(t *testing.T, what string, got []float32, want []float64, tol numcheck.Tol) {
	t.Helper()
	st, err := numcheck.Compare(got, want, tol)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	t.Logf("%s: max abs err %.2g, %.0f%% of the tolerance %g + %g·|want|", what, st.MaxAbs, 100*st.Used, tol.Atol, tol.Rtol)
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// fd returns the central finite-difference gradient of loss with respect to
// each element of x (modified in place and restored).
func fd(x []float32, loss func() float64, apply func()) []float64 {
	const h = 1e-2
	out := make([]float64, len(x))
	for i := range x {
		orig := x[i]
		x[i] = orig + h
		apply()
		lp := loss()
		x[i] = orig - h
		apply()
		lm := loss()
		x[i] = orig
		apply()
		out[i] = (lp - lm) / (2 * h)
	}
	return out
}

// dotLoss is Σ out ⊙ r in float64.
func dotLoss(out []float32, r []float32) float64 {
	var l float64
	for i := range out {
		l += float64(out[i]) * float64(r[i])
	}
	return l
}

func (s *suite) elementwise(t *testing.T) {
	a := s.tensor([]float32{1, -2, 3, 0.5}, 2, 2)
	c := s.tensor([]float32{10, 20, 30, 40}, 4)
	s.b.Add(a, c)
	s.expect(t, "add", s.get(a), []float64{11, 18, 33, 40.5}, s.tol(t))
	s.b.Scale(a, -2)
	s.expect(t, "scale", s.get(a), []float64{-22, -36, -66, -81}, s.tol(t))
	if got := s.b.SumSquares(c); math.Abs(got-3000) > 3000*s.tol(t).Rtol {
		t.Errorf("sumsquares = %v, want 3000", got)
	}
	s.b.Copy(a, c)
	s.expect(t, "copy", s.get(a), []float64{10, 20, 30, 40}, s.tol(t))
	s.b.Zero(a.Rows(1, 2))
	s.expect(t, "zero rows view", s.get(a), []float64{10, 20, 0, 0}, s.tol(t))
	s.noErr(t, "elementwise")
}

// refMatMul is op(a)·op(b) in float64.
func refMatMul(a, b []float32, M, K, N int, ta, tb bool) []float64 {
	out := make([]float64, M*N)
	for i := 0; i < M; i++ {
		for j := 0; j < N; j++ {
			var s float64
			for k := 0; k < K; k++ {
				av := a[i*K+k]
				if ta {
					av = a[k*M+i]
				}
				bv := b[k*N+j]
				if tb {
					bv = b[j*K+k]
				}
				s += float64(av) * float64(bv)
			}
			out[i*N+j] = s
		}
	}
	return out
}

func (s *suite) matmul(t *testing.T) {
	// Known values: [[1,2,3],[4,5,6]] · [[1,0],[0,1],[1,1]] = [[4,5],[10,11]].
	a := s.tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	bm := s.tensor([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	c := s.b.New(2, 2)
	s.b.MatMul(c, a, bm, false, false, false)
	s.expect(t, "known", s.get(c), []float64{4, 5, 10, 11}, s.tol(t))
	s.b.MatMul(c, a, bm, false, false, true)
	s.expect(t, "accumulate", s.get(c), []float64{8, 10, 20, 22}, s.tol(t))
	for _, dims := range [][3]int{{1, 1, 1}, {1, 31, 33}, {33, 31, 1}, {31, 33, 127}, {127, 64, 3}} {
		M, K, N := dims[0], dims[1], dims[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			av, bv := s.randn(M*K, 1), s.randn(K*N, 1)
			ashape, bshape := []int{M, K}, []int{K, N}
			if tr[0] {
				ashape = []int{K, M}
			}
			if tr[1] {
				bshape = []int{N, K}
			}
			c := s.b.New(M, N)
			s.b.MatMul(c, s.tensor(av, ashape...), s.tensor(bv, bshape...), tr[0], tr[1], false)
			// atol scales with √K: each output sums K unit-variance products.
			tol := s.tol(t)
			tol.Atol *= math.Sqrt(float64(K))
			s.expect(t, fmt.Sprintf("%dx%dx%d trans %v", M, K, N, tr), s.get(c), refMatMul(av, bv, M, K, N, tr[0], tr[1]), tol)
		}
	}
	s.noErr(t, "matmul")
}

func (s *suite) embedding(t *testing.T) {
	table := s.tensor([]float32{0, 1, 10, 11, 20, 21}, 3, 2)
	out := s.b.New(4, 2)
	ids := []int32{2, 0, 2, 1}
	s.b.Embedding(out, table, ids)
	s.expect(t, "lookup", s.get(out), []float64{20, 21, 0, 1, 20, 21, 10, 11}, s.tol(t))
	dt := s.tensor([]float32{1, 1, 1, 1, 1, 1}, 3, 2)
	s.b.EmbeddingBackward(dt, s.tensor([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2), ids)
	s.expect(t, "backward accumulates repeated ids", s.get(dt), []float64{4, 5, 8, 9, 7, 9}, s.tol(t))
	s.noErr(t, "embedding")
}

func (s *suite) rmsnorm(t *testing.T) {
	x := s.tensor([]float32{3, 4, 0, 0}, 1, 4) // mean x² = 6.25, rms 2.5
	w := s.tensor([]float32{1, 2, 1, 1}, 4)
	out, rstd := s.b.New(1, 4), s.b.New(1)
	s.b.RMSNorm(out, rstd, x, w, 0)
	s.expect(t, "known", s.get(out), []float64{1.2, 3.2, 0, 0}, s.tol(t))
	s.expect(t, "rstd", s.get(rstd), []float64{0.4}, s.tol(t))
	// Large magnitudes must not overflow (x² beyond float32 range).
	big := s.tensor([]float32{3e20, 4e20, 0, 0}, 1, 4)
	s.b.RMSNorm(out, nil, big, w, 1e-6)
	s.expect(t, "large magnitude", s.get(out), []float64{1.2, 3.2, 0, 0}, s.tol(t))
	for _, n := range []int{1, 31, 33, 127} {
		rows := 3
		xv, wv, r := s.randn(rows*n, 1), s.randn(n, 1), s.randn(rows*n, 1)
		xt, wt := s.tensor(xv, rows, n), s.tensor(wv, n)
		out, rstd := s.b.New(rows, n), s.b.New(rows)
		s.b.RMSNorm(out, rstd, xt, wt, 1e-6)
		dx, dw := s.b.New(rows, n), s.b.New(n)
		s.b.RMSNormBackward(dx, dw, s.tensor(r, rows, n), xt, wt, rstd)
		loss := func() float64 { s.b.RMSNorm(out, nil, xt, wt, 1e-6); return dotLoss(s.get(out), r) }
		s.expect(t, fmt.Sprintf("dx n=%d", n), s.get(dx), fd(xv, loss, func() { s.b.Upload(xt, xv) }), s.o.FDTol)
		s.expect(t, fmt.Sprintf("dw n=%d", n), s.get(dw), fd(wv, loss, func() { s.b.Upload(wt, wv) }), s.o.FDTol)
	}
	s.noErr(t, "rmsnorm")
}

func (s *suite) rope(t *testing.T) {
	// Position 0 is the identity; position 1 with D=2 rotates by 1 radian.
	x := s.tensor([]float32{1, 2, 1, 0}, 2, 1, 2)
	s.b.RoPE(x, []int32{0, 1}, 10000, false)
	s.expect(t, "known", s.get(x), []float64{1, 2, math.Cos(1), math.Sin(1)}, s.tol(t))
	for _, d := range []int{2, 8, 64} {
		xv := s.randn(5*3*d, 1)
		xt := s.tensor(xv, 5, 3, d)
		pos := []int32{0, 1, 7, 100, 4095}
		s.b.RoPE(xt, pos, 1e6, false)
		got := s.get(xt)
		for r := 0; r < 15; r++ { // rotations preserve each head's norm
			var a, b float64
			for k := 0; k < d; k++ {
				a += float64(xv[r*d+k]) * float64(xv[r*d+k])
				b += float64(got[r*d+k]) * float64(got[r*d+k])
			}
			if math.Abs(a-b) > 1e-4*a {
				t.Errorf("D=%d row %d: norm² %v became %v", d, r, a, b)
			}
		}
		s.b.RoPE(xt, pos, 1e6, true)
		s.expect(t, fmt.Sprintf("inverse D=%d", d), s.get(xt), f64(xv), s.tol(t))
	}
	s.noErr(t, "rope")
}

// refSplitQKV is SplitQKV in float64: per token t and head j of the fused
// row, query and key heads RMS-normed by their weight and rotated by
// pos[t]·theta^(−2i/D), value heads copied. It returns qn, kn, v and the
// rstds (queries then keys, per token).
func refSplitQKV(qkv, qw, kw []float32, pos []int32, d model.QKVDims, theta, eps float64) (qn, kn, v, rq, rk []float64) {
	half := d.D / 2
	for t := 0; t < d.N; t++ {
		for j := 0; j < d.H+2*d.G; j++ {
			x := qkv[t*d.Width()+j*d.D : t*d.Width()+(j+1)*d.D]
			if j >= d.H+d.G {
				v = append(v, f64(x)...)
				continue
			}
			w, out, rs := qw, &qn, &rq
			if j >= d.H {
				w, out, rs = kw, &kn, &rk
			}
			var ss float64
			for _, e := range x {
				ss += float64(e) * float64(e)
			}
			r := 1 / math.Sqrt(ss/float64(d.D)+eps)
			*rs = append(*rs, r)
			y := make([]float64, d.D)
			for i := 0; i < half; i++ {
				ang := float64(pos[t]) * math.Pow(theta, -2*float64(i)/float64(d.D))
				c, sn := math.Cos(ang), math.Sin(ang)
				y1, y2 := float64(x[i])*r*float64(w[i]), float64(x[i+half])*r*float64(w[i+half])
				y[i], y[i+half] = y1*c-y2*sn, y2*c+y1*sn
			}
			*out = append(*out, y...)
		}
	}
	return qn, kn, v, rq, rk
}

// splitQKV checks the fused projection's split against refSplitQKV (head
// dims with one, several and more than one pass of the GPU's 64 threads;
// GQA and plain heads) and its backward against finite differences of
// L = Σ qn⊙rq + Σ kn⊙rk + Σ v⊙rv. A query/key/value head taken from the
// wrong place in the row, rotated in the wrong half, or normed by the
// other weight fails the forward.
func (s *suite) splitQKV(t *testing.T) {
	const theta, eps = 1e6, 1e-6
	cases := []struct {
		d  model.QKVDims
		fd bool // finite differences (every element: small shapes)
	}{
		{model.QKVDims{N: 3, H: 4, G: 2, D: 8}, true},
		// D = 2: forward only, a 2-element head of small norm curves too
		// much for the finite differences' step (2 % off where seen).
		{model.QKVDims{N: 2, H: 3, G: 1, D: 2}, false},
		{model.QKVDims{N: 1, H: 2, G: 1, D: 130}, true},
		{model.QKVDims{N: 5, H: 16, G: 8, D: 128}, false},
	}
	for _, c := range cases {
		d := c.d
		name := fmt.Sprintf("N=%d H=%d G=%d D=%d", d.N, d.H, d.G, d.D)
		pos := make([]int32, d.N)
		for i := range pos {
			pos[i] = int32(3*i + i*i*97) // 0, 100, 400, … : distinct angles
		}
		xv, qwv, kwv := s.randn(d.N*d.Width(), 2), s.randn(d.D, 1), s.randn(d.D, 1)
		qkv, qw, kw := s.tensor(xv, d.N, d.Width()), s.tensor(qwv, d.D), s.tensor(kwv, d.D)
		qn, kn, v := s.b.New(d.N, d.H, d.D), s.b.New(d.N, d.G, d.D), s.b.New(d.N, d.G, d.D)
		rq, rk := s.b.New(d.N*d.H), s.b.New(d.N*d.G)
		s.b.SplitQKV(qn, kn, v, rq, rk, qkv, qw, kw, pos, theta, eps)
		wq, wk, wv, wrq, wrk := refSplitQKV(xv, qwv, kwv, pos, d, theta, eps)
		s.expect(t, name+" qn", s.get(qn), wq, s.tol(t))
		s.expect(t, name+" kn", s.get(kn), wk, s.tol(t))
		s.expect(t, name+" v", s.get(v), wv, s.tol(t))
		s.expect(t, name+" rstd q", s.get(rq), wrq, s.tol(t))
		s.expect(t, name+" rstd k", s.get(rk), wrk, s.tol(t))
		if !c.fd {
			continue
		}
		r1, r2, r3 := s.randn(qn.Numel(), 1), s.randn(kn.Numel(), 1), s.randn(v.Numel(), 1)
		dqkv, dqw, dkw := s.b.New(d.N, d.Width()), s.b.New(d.D), s.b.New(d.D)
		s.b.SplitQKVBackward(dqkv, dqw, dkw, s.tensor(r1, qn.Shape...), s.tensor(r2, kn.Shape...), s.tensor(r3, v.Shape...),
			qkv, qw, kw, rq, rk, pos, theta)
		loss := func() float64 {
			s.b.SplitQKV(qn, kn, v, s.b.New(d.N*d.H), s.b.New(d.N*d.G), qkv, qw, kw, pos, theta, eps)
			return dotLoss(s.get(qn), r1) + dotLoss(s.get(kn), r2) + dotLoss(s.get(v), r3)
		}
		s.expect(t, name+" dqkv", s.get(dqkv), fd(xv, loss, func() { s.b.Upload(qkv, xv) }), s.o.FDTol)
		s.expect(t, name+" dqw", s.get(dqw), fd(qwv, loss, func() { s.b.Upload(qw, qwv) }), s.o.FDTol)
		s.expect(t, name+" dkw", s.get(dkw), fd(kwv, loss, func() { s.b.Upload(kw, kwv) }), s.o.FDTol)
	}
	s.noErr(t, "split qkv")
}

// refAttention is causal GQA attention per segment in float64.
func refAttention(q, k, v []float32, H, G, D int, segs []model.Segment, scale float64, nq int) []float64 {
	out := make([]float64, nq*H*D)
	for _, sg := range segs {
		for h := 0; h < H; h++ {
			g := h / (H / G)
			for i := 0; i < sg.QLen; i++ {
				nk := sg.KLen - sg.QLen + i + 1
				sc := make([]float64, nk)
				mx := math.Inf(-1)
				for j := range sc {
					for d := 0; d < D; d++ {
						sc[j] += float64(q[((sg.Q0+i)*H+h)*D+d]) * float64(k[((sg.K0+j)*G+g)*D+d])
					}
					sc[j] *= scale
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := 0; d < D; d++ {
						out[((sg.Q0+i)*H+h)*D+d] += sc[j] / sum * float64(v[((sg.K0+j)*G+g)*D+d])
					}
				}
			}
		}
	}
	return out
}

func (s *suite) attention(t *testing.T) {
	// A query that sees one key returns that key's value.
	q1 := s.tensor([]float32{1, 0}, 1, 1, 2)
	k1 := s.tensor([]float32{0.5, 0.5}, 1, 1, 2)
	v1 := s.tensor([]float32{3, -4}, 1, 1, 2)
	o1 := s.b.New(1, 1, 2)
	s.b.Attention(o1, nil, q1, k1, v1, []model.Segment{{QLen: 1, KLen: 1}}, 1)
	s.expect(t, "single key", s.get(o1), []float64{3, -4}, s.tol(t))

	H, G, D := 4, 2, 8
	// Training layout (two packed sequences of 5 and 3 tokens) and a decode
	// layout (one query each over a 7-key and a 2-key cache region).
	layouts := []struct {
		name   string
		nq, nk int
		segs   []model.Segment
	}{
		{"packed", 8, 8, []model.Segment{{Q0: 0, QLen: 5, K0: 0, KLen: 5}, {Q0: 5, QLen: 3, K0: 5, KLen: 3}}},
		{"decode", 2, 16, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 7}, {Q0: 1, QLen: 1, K0: 8, KLen: 2}}},
		{"chunked prefill", 3, 8, []model.Segment{{Q0: 0, QLen: 3, K0: 0, KLen: 6}}},
	}
	scale := 1 / math.Sqrt(float64(D))
	for _, l := range layouts {
		qv, kv, vv := s.randn(l.nq*H*D, 1), s.randn(l.nk*G*D, 1), s.randn(l.nk*G*D, 1)
		qt, kt, vt := s.tensor(qv, l.nq, H, D), s.tensor(kv, l.nk, G, D), s.tensor(vv, l.nk, G, D)
		out, lse := s.b.New(l.nq, H, D), s.b.New(l.nq, H)
		s.b.Attention(out, lse, qt, kt, vt, l.segs, float32(scale))
		s.expect(t, l.name, s.get(out), refAttention(qv, kv, vv, H, G, D, l.segs, scale, l.nq), s.tol(t))
		if l.name != "packed" {
			continue
		}
		r := s.randn(l.nq*H*D, 1)
		dq, dk, dv := s.b.New(l.nq, H, D), s.b.New(l.nk, G, D), s.b.New(l.nk, G, D)
		s.b.AttentionBackward(dq, dk, dv, s.tensor(r, l.nq, H, D), qt, kt, vt, out, lse, l.segs, float32(scale))
		loss := func() float64 {
			o := s.b.New(l.nq, H, D)
			s.b.Attention(o, nil, qt, kt, vt, l.segs, float32(scale))
			return dotLoss(s.get(o), r)
		}
		s.expect(t, "dq", s.get(dq), fd(qv, loss, func() { s.b.Upload(qt, qv) }), s.o.FDTol)
		s.expect(t, "dk", s.get(dk), fd(kv, loss, func() { s.b.Upload(kt, kv) }), s.o.FDTol)
		s.expect(t, "dv", s.get(dv), fd(vv, loss, func() { s.b.Upload(vt, vv) }), s.o.FDTol)
	}
	// Large scores: softmax must stay finite and select the best key.
	qb := s.tensor([]float32{1e4, 0}, 1, 1, 2)
	kb := s.tensor([]float32{1, 0, -1, 0, 0.5, 0}, 3, 1, 2)
	vb := s.tensor([]float32{1, 1, 2, 2, 3, 3}, 3, 1, 2)
	ob := s.b.New(1, 1, 2)
	s.b.Attention(ob, nil, qb, kb, vb, []model.Segment{{QLen: 1, KLen: 3}}, 1)
	s.expect(t, "large scores", s.get(ob), []float64{1, 1}, s.tol(t))
	s.noErr(t, "attention")
}

// MaxHeadDim is the largest head dim attentionHeadDims runs: Config.Validate
// admits every even head dim, and the CUDA backend serves them up to 256
// (and refuses larger ones, which its own tests check).
const MaxHeadDim = 256

// attentionHeadDims runs attention at every even head dim up to
// MaxHeadDim, GQA 2:1, in a decode layout (one query each over 1, 9 and 70
// cache rows) and a prefill layout (one 20-token sequence), against
// refAttention. Kernels split a row of D elements over threads and lanes
// in ways that can go wrong only at some sizes (a per-key lane count that
// is not a power of two broke the split-K decode kernels at D = 24, 40,
// 48, …), so every size the model accepts is run; under go test -short
// (make test-short) a sample: the smallest, 24, 36, 48 and 96 (lane counts
// not powers of two), 64, 128, 130 and the largest.
func (s *suite) attentionHeadDims(t *testing.T) {
	const H, G = 4, 2
	var dims []int
	for D := 2; D <= MaxHeadDim; D += 2 {
		dims = append(dims, D)
	}
	if testing.Short() {
		dims = []int{2, 8, 24, 36, 48, 64, 96, 128, 130, MaxHeadDim}
	}
	layouts := []struct {
		name   string
		nq, nk int
		segs   []model.Segment
	}{
		{"decode", 3, 90, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 1, QLen: 1, K0: 5, KLen: 9}, {Q0: 2, QLen: 1, K0: 20, KLen: 70}}},
		{"prefill", 20, 20, []model.Segment{{Q0: 0, QLen: 20, K0: 0, KLen: 20}}},
	}
	for _, D := range dims {
		scale := 1 / math.Sqrt(float64(D))
		for _, l := range layouts {
			qv, kv, vv := s.randn(l.nq*H*D, 1), s.randn(l.nk*G*D, 1), s.randn(l.nk*G*D, 1)
			out := s.b.New(l.nq, H, D)
			s.b.Attention(out, nil, s.tensor(qv, l.nq, H, D), s.tensor(kv, l.nk, G, D), s.tensor(vv, l.nk, G, D), l.segs, float32(scale))
			if err := s.b.Err(); err != nil {
				s.b.ResetErr()
				t.Fatalf("head_dim %d %s: %v", D, l.name, err)
			}
			want := refAttention(qv, kv, vv, H, G, D, l.segs, scale, l.nq)
			if _, err := numcheck.Compare(s.get(out), want, s.tol(t)); err != nil {
				t.Errorf("head_dim %d %s: %v", D, l.name, err)
			}
		}
	}
}

func (s *suite) swiglu(t *testing.T) {
	g := s.tensor([]float32{0, 1, -1, 20}, 4)
	u := s.tensor([]float32{5, 2, 2, 0.5}, 4)
	out := s.b.New(4)
	s.b.SwiGLU(out, g, u)
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	s.expect(t, "known", s.get(out), []float64{0, 2 * sig(1), -2 * sig(-1), 0.5 * 20 * sig(20)}, s.tol(t))
	gv, uv, r := s.randn(33, 2), s.randn(33, 1), s.randn(33, 1)
	gt, ut := s.tensor(gv, 33), s.tensor(uv, 33)
	dg, du := s.b.New(33), s.b.New(33)
	s.b.SwiGLUBackward(dg, du, s.tensor(r, 33), gt, ut)
	o := s.b.New(33)
	loss := func() float64 { s.b.SwiGLU(o, gt, ut); return dotLoss(s.get(o), r) }
	s.expect(t, "dgate", s.get(dg), fd(gv, loss, func() { s.b.Upload(gt, gv) }), s.o.FDTol)
	s.expect(t, "dup", s.get(du), fd(uv, loss, func() { s.b.Upload(ut, uv) }), s.o.FDTol)
	s.noErr(t, "swiglu")
}

func (s *suite) logSoftmaxGather(t *testing.T) {
	// Uniform logits: log p = −log V, entropy = log V.
	V := 127
	logits := s.tensor(make([]float32, 2*V), 2, V)
	lp, lse, ent := s.b.New(2), s.b.New(2), s.b.New(2)
	s.b.LogSoftmaxGather(lp, lse, ent, logits, []int32{0, 126})
	lv := math.Log(float64(V))
	s.expect(t, "uniform logp", s.get(lp), []float64{-lv, -lv}, s.tol(t))
	s.expect(t, "uniform entropy", s.get(ent), []float64{lv, lv}, s.tol(t))
	// Probability mass sums to one over all targets, at large magnitudes too.
	for _, scale := range []float64{1, 1e4} {
		row := s.randn(V, scale)
		rows := make([]float32, 0, V*V)
		targets := make([]int32, V)
		for i := 0; i < V; i++ {
			rows = append(rows, row...)
			targets[i] = int32(i)
		}
		lp, lse := s.b.New(V), s.b.New(V)
		s.b.LogSoftmaxGather(lp, lse, nil, s.tensor(rows, V, V), targets)
		var mass float64
		for _, v := range s.get(lp) {
			if math.IsNaN(float64(v)) || v > 0 {
				t.Fatalf("scale %g: invalid log-prob %v", scale, v)
			}
			mass += math.Exp(float64(v))
		}
		if math.Abs(mass-1) > 1e-4 {
			t.Errorf("scale %g: probability mass %v, want 1", scale, mass)
		}
	}
	// Backward against finite differences, on an odd vocabulary.
	M, Vs := 3, 33
	xv, r := s.randn(M*Vs, 2), s.randn(M, 1)
	targets := []int32{0, 32, 17}
	xt := s.tensor(xv, M, Vs)
	lp, lse = s.b.New(M), s.b.New(M)
	s.b.LogSoftmaxGather(lp, lse, nil, xt, targets)
	dx := s.b.New(M, Vs)
	s.b.LogSoftmaxGatherBackward(dx, s.tensor(r, M), xt, lse, targets)
	loss := func() float64 { s.b.LogSoftmaxGather(lp, lse, nil, xt, targets); return dotLoss(s.get(lp), r) }
	s.expect(t, "dlogits", s.get(dx), fd(xv, loss, func() { s.b.Upload(xt, xv) }), s.o.FDTol)
	s.noErr(t, "logsoftmax gather")
}

func (s *suite) rows(t *testing.T) {
	src := s.tensor([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	dst := s.b.New(2, 2)
	s.b.GatherRows(dst, src, []int32{2, 0})
	s.expect(t, "gather", s.get(dst), []float64{5, 6, 1, 2}, s.tol(t))
	big := s.tensor([]float32{1, 1, 1, 1, 1, 1}, 3, 2)
	s.b.ScatterRows(big, dst, []int32{1, 1}, true)
	s.expect(t, "scatter accumulate", s.get(big), []float64{1, 1, 7, 9, 1, 1}, s.tol(t))
	s.b.ScatterRows(big, dst, []int32{0, 2}, false)
	s.expect(t, "scatter overwrite", s.get(big), []float64{5, 6, 7, 9, 1, 2}, s.tol(t))
	s.noErr(t, "rows")
}

// cols checks AddCols and CopyCols against index arithmetic done here, on
// an odd width and every column offset, and AddCols into a bf16 activation
// (HalfPrecision.ActivationHalf) against the fp32 sum rounded once.
func (s *suite) cols(t *testing.T) {
	const R, W, w = 3, 7, 3
	wide, narrow := s.randn(R*W, 1), s.randn(R*w, 1)
	for col0 := 0; col0+w <= W; col0++ {
		add, cp := make([]float64, R*W), make([]float64, R*w)
		for r := range R {
			for j := range W {
				add[r*W+j] = float64(wide[r*W+j])
			}
			for j := range w {
				add[r*W+col0+j] += float64(narrow[r*w+j])
				cp[r*w+j] = float64(wide[r*W+col0+j])
			}
		}
		dst := s.tensor(wide, R, W)
		s.b.AddCols(dst, s.tensor(narrow, R, w), col0)
		s.expect(t, fmt.Sprintf("add cols at %d", col0), s.get(dst), add, s.tol(t))
		out := s.tensor(s.randn(R*w, 1), R, w)
		s.b.CopyCols(out, s.tensor(wide, R, W), col0)
		s.expect(t, fmt.Sprintf("copy cols at %d", col0), s.get(out), cp, numcheck.Tol{})
		if as := model.TrainerCapsOf(s.b).Half; as != nil {
			h, eye := as.ActivationHalf(R, W), make([]float32, W*W)
			for j := range W {
				eye[j*W+j] = 1
			}
			// A product is what writes a bf16 activation: wide·I.
			s.b.MatMul(h, s.tensor(wide, R, W), s.tensor(eye, W, W), false, false, false)
			// wide rounded to bf16, or wide itself where the backend's
			// products (and so its activations) are fp32.
			before := s.get(h)
			half := !slices.Equal(before, wide)
			s.b.AddCols(h, s.tensor(narrow, R, w), col0)
			want, tol := f64(before), numcheck.Tol{}
			for r := range R {
				for j := range w {
					sum := float32(want[r*W+col0+j]) + narrow[r*w+j]
					if half {
						sum = model.BF16ToF32(model.F32ToBF16(sum))
					}
					want[r*W+col0+j] = float64(sum)
				}
			}
			s.expect(t, fmt.Sprintf("add cols into an activation (bf16 %v) at %d", half, col0), s.get(h), want, tol)
		}
	}
	s.noErr(t, "cols")
}

// adamw checks two steps against values computed by hand from the update
// rule m = β1 m + (1−β1) g, v = β2 v + (1−β2) g², p ← p(1−lr·wd) − lr·m̂/(√v̂+ε).
func (s *suite) adamw(t *testing.T) {
	p := s.tensor([]float32{1, -0.5}, 2)
	g := s.tensor([]float32{0.1, -0.2}, 2)
	m, v := s.b.New(2), s.b.New(2)
	h := model.AdamWParams{LR: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.01, Step: 1}
	s.b.AdamW(p, g, m, v, h)
	// Step 1: m̂ = g, v̂ = g², so the step is lr·sign(g) (up to ε).
	// p0 = 1·(1−0.001) − 0.1 = 0.899; p1 = −0.5·0.999 + 0.1 = −0.3995.
	s.expect(t, "step 1", s.get(p), []float64{0.899, -0.3995}, s.tol(t))
	s.expect(t, "m after 1", s.get(m), []float64{0.01, -0.02}, s.tol(t))
	s.expect(t, "v after 1", s.get(v), []float64{0.0001, 0.0004}, s.tol(t))
	s.b.Upload(g, []float32{0.3, 0.2})
	h.Step = 2
	s.b.AdamW(p, g, m, v, h)
	// Step 2, element 0: m = 0.009+0.03 = 0.039, v = 0.000099+0.0009 = 0.000999,
	// m̂ = 0.039/0.19, v̂ = 0.000999/0.0199; p = 0.899·0.999 − 0.1·m̂/√v̂.
	want0 := 0.899*0.999 - 0.1*(0.039/0.19)/(math.Sqrt(0.000999/0.0199)+1e-8)
	// element 1: m = −0.018+0.02 = 0.002, v = 0.000396+0.0004 = 0.000796.
	want1 := -0.3995*0.999 - 0.1*(0.002/0.19)/(math.Sqrt(0.000796/0.0199)+1e-8)
	s.expect(t, "step 2", s.get(p), []float64{want0, want1}, s.tol(t))
	s.noErr(t, "adamw")
}

// badArguments: each malformed call records an error instead of crashing.
func (s *suite) badArguments(t *testing.T) {
	b := s.b
	cases := []struct {
		name string
		call func()
	}{
		{"matmul inner dims", func() { b.MatMul(b.New(2, 2), b.New(2, 3), b.New(2, 2), false, false, false) }},
		{"matmul output shape", func() { b.MatMul(b.New(3, 2), b.New(2, 3), b.New(3, 2), false, false, false) }},
		{"embedding id out of range", func() { b.Embedding(b.New(1, 2), b.New(3, 2), []int32{3}) }},
		{"embedding negative id", func() { b.Embedding(b.New(1, 2), b.New(3, 2), []int32{-1}) }},
		{"rmsnorm weight size", func() { b.RMSNorm(b.New(2, 4), nil, b.New(2, 4), b.New(3), 1e-6) }},
		{"rope odd head dim", func() { b.RoPE(b.New(1, 1, 3), []int32{0}, 1e4, false) }},
		{"rope positions", func() { b.RoPE(b.New(2, 1, 4), []int32{0}, 1e4, false) }},
		{"split qkv row width", func() {
			b.SplitQKV(b.New(1, 2, 4), b.New(1, 1, 4), b.New(1, 1, 4), b.New(2), b.New(1), b.New(1, 12), b.New(4), b.New(4), []int32{0}, 1e4, 1e-6)
		}},
		{"attention heads not divisible", func() {
			b.Attention(b.New(1, 3, 2), nil, b.New(1, 3, 2), b.New(1, 2, 2), b.New(1, 2, 2), []model.Segment{{QLen: 1, KLen: 1}}, 1)
		}},
		{"attention segment out of range", func() {
			b.Attention(b.New(1, 1, 2), nil, b.New(1, 1, 2), b.New(1, 1, 2), b.New(1, 1, 2), []model.Segment{{QLen: 1, KLen: 2}}, 1)
		}},
		{"logsoftmax target out of range", func() { b.LogSoftmaxGather(b.New(1), b.New(1), nil, b.New(1, 4), []int32{4}) }},
		{"gather index out of range", func() { b.GatherRows(b.New(1, 2), b.New(2, 2), []int32{2}) }},
		{"scatter count", func() { b.ScatterRows(b.New(2, 2), b.New(1, 2), []int32{0, 1}, false) }},
		{"adamw step 0", func() { b.AdamW(b.New(1), b.New(1), b.New(1), b.New(1), model.AdamWParams{LR: 1}) }},
		{"add sizes", func() { b.Add(b.New(2), b.New(3)) }},
		{"add cols past the end", func() { b.AddCols(b.New(2, 4), b.New(2, 2), 3) }},
		{"add cols rows", func() { b.AddCols(b.New(2, 4), b.New(3, 2), 0) }},
		{"copy cols negative", func() { b.CopyCols(b.New(2, 2), b.New(2, 4), -1) }},
		{"upload size", func() { b.Upload(b.New(2), []float32{1}) }},
	}
	for _, c := range cases {
		b.ResetErr()
		c.call()
		if b.Err() == nil {
			t.Errorf("%s: no error recorded", c.name)
		}
		b.ResetErr()
	}
}
