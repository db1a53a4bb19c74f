package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// The fast CPU backend against the reference on random inputs at sizes the
// conformance suite does not reach: products large enough to be split over
// workers, attention with several 64-row query blocks, chunked prefill and
// decode, vocabulary-sized rows, and every op twice to check that results
// do not depend on goroutine timing.

// fastTol is backendtest.FP32: float32 sums against the reference's float64.
var fastTol = numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}

type fastPair struct {
	t    *testing.T
	ref  *model.ReferenceCPU
	fast *Backend
	rng  *rand.Rand
}

func fastVariants(t *testing.T, f func(t *testing.T, p *fastPair)) {
	for _, v := range []struct {
		name string
		o    Options
	}{{"blas", Options{}}, {"go-kernels", Options{NoBLAS: true}}, {"blas-3-workers", Options{Workers: 3}}} {
		t.Run(v.name, func(t *testing.T) {
			fast := NewBackendWith(v.o)
			if !v.o.NoBLAS && fast.blas == nil {
				if os.Getenv("GDROTRAIN_REQUIRE_BLAS") != "" {
					t.Fatalf("GDROTRAIN_REQUIRE_BLAS is set but: %v", fast.blasErr)
				}
				t.Skipf("no OpenBLAS: %v", fast.blasErr)
			}
			f(t, &fastPair{t: t, ref: model.NewReferenceCPU(), fast: fast, rng: rand.New(rand.NewPCG(3, 4))})
		})
	}
}

func (p *fastPair) randn(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * p.rng.NormFloat64())
	}
	return out
}

// both holds one tensor's copy on each backend.
type both struct{ r, f *model.Tensor }

func (p *fastPair) tensor(vals []float32, shape ...int) both {
	r, f := p.ref.New(shape...), p.fast.New(shape...)
	if vals != nil {
		p.ref.Upload(r, vals)
		p.fast.Upload(f, vals)
	}
	return both{r, f}
}

// compare checks the fast tensor against the reference one and that the
// backends recorded no error.
func (p *fastPair) compare(what string, x both, tol numcheck.Tol) {
	p.t.Helper()
	for _, e := range []error{p.ref.Err(), p.fast.Err()} {
		if e != nil {
			p.t.Fatalf("%s: %v", what, e)
		}
	}
	want, got := make([]float32, x.r.Numel()), make([]float32, x.f.Numel())
	p.ref.Download(x.r, want)
	p.fast.Download(x.f, got)
	if st, err := numcheck.Compare(got, want, tol); err != nil {
		p.t.Errorf("%s: %v", what, err)
	} else if testing.Verbose() {
		p.t.Logf("%s: max abs %.2g, max rel %.2g", what, st.MaxAbs, st.MaxRel)
	}
}

// repeatable runs op twice on the fast backend and checks out is bitwise
// the same (op must overwrite out).
func (p *fastPair) repeatable(what string, out *model.Tensor, op func()) {
	p.t.Helper()
	first := make([]float32, out.Numel())
	p.fast.Download(out, first)
	op()
	again := make([]float32, out.Numel())
	p.fast.Download(out, again)
	for i := range first {
		if math.Float32bits(first[i]) != math.Float32bits(again[i]) {
			p.t.Errorf("%s: element %d differs between two runs: %v, %v", what, i, first[i], again[i])
			return
		}
	}
}

func TestFastCPUMatMul(t *testing.T) {
	fastVariants(t, func(t *testing.T, p *fastPair) {
		for _, d := range [][3]int{{300, 70, 260}, {17, 300, 1000}, {1000, 33, 5}, {64, 512, 64}} {
			M, K, N := d[0], d[1], d[2]
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				ash, bsh := []int{M, K}, []int{K, N}
				if tr[0] {
					ash = []int{K, M}
				}
				if tr[1] {
					bsh = []int{N, K}
				}
				a, b := p.tensor(p.randn(M*K, 1), ash...), p.tensor(p.randn(K*N, 1), bsh...)
				c := p.tensor(p.randn(M*N, 1), M, N)
				tol := fastTol
				tol.Atol *= math.Sqrt(float64(K) + 1)
				for _, acc := range []bool{true, false} {
					p.ref.MatMul(c.r, a.r, b.r, tr[0], tr[1], acc)
					p.fast.MatMul(c.f, a.f, b.f, tr[0], tr[1], acc)
					p.compare(fmt.Sprintf("%dx%dx%d trans %v accumulate %v", M, K, N, tr, acc), c, tol)
				}
				p.repeatable("matmul", c.f, func() { p.fast.MatMul(c.f, a.f, b.f, tr[0], tr[1], false) })
			}
		}
	})
}

func TestFastCPURowOps(t *testing.T) {
	fastVariants(t, func(t *testing.T, p *fastPair) {
		// RMSNorm forward and backward, many rows (the parallel path).
		R, n := 333, 96
		x, w := p.tensor(p.randn(R*n, 2), R, n), p.tensor(p.randn(n, 1), n)
		out, rstd := p.tensor(nil, R, n), p.tensor(nil, R)
		p.ref.RMSNorm(out.r, rstd.r, x.r, w.r, 1e-6)
		p.fast.RMSNorm(out.f, rstd.f, x.f, w.f, 1e-6)
		p.compare("rmsnorm", out, fastTol)
		p.compare("rmsnorm rstd", rstd, fastTol)
		dout := p.tensor(p.randn(R*n, 1), R, n)
		dx, dw := p.tensor(nil, R, n), p.tensor(p.randn(n, 1), n)
		p.ref.RMSNormBackward(dx.r, dw.r, dout.r, x.r, w.r, rstd.r)
		p.fast.RMSNormBackward(dx.f, dw.f, dout.f, x.f, w.f, rstd.f)
		p.compare("rmsnorm dx", dx, fastTol)
		// dw sums R rows of unit-size terms.
		p.compare("rmsnorm dw", dw, numcheck.Tol{Atol: fastTol.Atol * math.Sqrt(float64(R)), Rtol: fastTol.Rtol})
		p.repeatable("rmsnorm dx", dx.f, func() { p.fast.RMSNormBackward(dx.f, p.fast.New(n), dout.f, x.f, w.f, rstd.f) })

		// RoPE, forward and inverse, positions up to 5000.
		N, H, D := 50, 3, 32
		pos := make([]int32, N)
		for i := range pos {
			pos[i] = int32(p.rng.IntN(5000))
		}
		xr := p.tensor(p.randn(N*H*D, 1), N, H, D)
		for _, inv := range []bool{false, true} {
			p.ref.RoPE(xr.r, pos, 1e6, inv)
			p.fast.RoPE(xr.f, pos, 1e6, inv)
			p.compare(fmt.Sprintf("rope inverse %v", inv), xr, fastTol)
		}

		// SwiGLU with gates up to ±40 (saturated sigmoids).
		m := 100003
		g, u := p.tensor(p.randn(m, 8), m), p.tensor(p.randn(m, 1), m)
		o := p.tensor(nil, m)
		p.ref.SwiGLU(o.r, g.r, u.r)
		p.fast.SwiGLU(o.f, g.f, u.f)
		p.compare("swiglu", o, fastTol)
		d := p.tensor(p.randn(m, 1), m)
		dg, du := p.tensor(nil, m), p.tensor(nil, m)
		p.ref.SwiGLUBackward(dg.r, du.r, d.r, g.r, u.r)
		p.fast.SwiGLUBackward(dg.f, du.f, d.f, g.f, u.f)
		p.compare("swiglu dgate", dg, fastTol)
		p.compare("swiglu dup", du, fastTol)

		// Add, Scale, AdamW on a long odd-sized vector.
		a, c := p.tensor(p.randn(m, 1), m), p.tensor(p.randn(m, 1), m)
		p.ref.Add(a.r, c.r)
		p.fast.Add(a.f, c.f)
		p.ref.Scale(a.r, -0.7)
		p.fast.Scale(a.f, -0.7)
		p.compare("add, scale", a, fastTol)
		mm, vv := p.tensor(p.randn(m, 0.1), m), p.tensor(make([]float32, m), m)
		h := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3}
		p.ref.AdamW(a.r, c.r, mm.r, vv.r, h)
		p.fast.AdamW(a.f, c.f, mm.f, vv.f, h)
		p.compare("adamw p", a, numcheck.Tol{}) // the same float64 code: bitwise equal
		p.compare("adamw v", vv, numcheck.Tol{})
	})
}

func TestFastCPULogSoftmax(t *testing.T) {
	fastVariants(t, func(t *testing.T, p *fastPair) {
		for _, c := range []struct {
			M, V  int
			scale float64
		}{{7, 50001, 3}, {40, 256, 1}, {3, 151936, 10}, {5, 1000, 1e4}} {
			x := p.tensor(p.randn(c.M*c.V, c.scale), c.M, c.V)
			targets := make([]int32, c.M)
			for i := range targets {
				targets[i] = int32(p.rng.IntN(c.V))
			}
			lp, lse, ent := p.tensor(nil, c.M), p.tensor(nil, c.M), p.tensor(nil, c.M)
			p.ref.LogSoftmaxGather(lp.r, lse.r, ent.r, x.r, targets)
			p.fast.LogSoftmaxGather(lp.f, lse.f, ent.f, x.f, targets)
			name := fmt.Sprintf("M=%d V=%d scale %g", c.M, c.V, c.scale)
			// Log-probs of order −log V ± several scales: atol covers the
			// float32 rounding of the row's log-sum-exp (≈ |lse|·6e−8).
			tol := numcheck.Tol{Atol: fastTol.Atol * (1 + c.scale), Rtol: fastTol.Rtol}
			p.compare(name+" logp", lp, tol)
			p.compare(name+" lse", lse, tol)
			p.compare(name+" entropy", ent, tol)
			dl := p.tensor(p.randn(c.M, 1), c.M)
			dx := p.tensor(nil, c.M, c.V)
			p.ref.LogSoftmaxGatherBackward(dx.r, dl.r, x.r, lse.r, targets)
			p.fast.LogSoftmaxGatherBackward(dx.f, dl.f, x.f, lse.f, targets)
			p.compare(name+" dlogits", dx, fastTol)
		}
	})
}

func TestFastCPUAttention(t *testing.T) {
	fastVariants(t, func(t *testing.T, p *fastPair) {
		H, G, D := 4, 2, 16
		layouts := []struct {
			name     string
			nq, nk   int
			segs     []model.Segment
			backward bool
		}{
			{"packed", 220, 220, []model.Segment{{Q0: 0, QLen: 150, K0: 0, KLen: 150}, {Q0: 150, QLen: 70, K0: 150, KLen: 70}}, true},
			{"chunked prefill", 100, 240, []model.Segment{{Q0: 0, QLen: 100, K0: 10, KLen: 230}}, true},
			{"overlapping keys", 30, 50, []model.Segment{{Q0: 0, QLen: 10, K0: 0, KLen: 40}, {Q0: 10, QLen: 20, K0: 20, KLen: 30}}, true},
			{"decode", 3, 300, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 7}, {Q0: 1, QLen: 1, K0: 100, KLen: 200}, {Q0: 2, QLen: 1, K0: 299, KLen: 1}}, false},
		}
		scale := float32(1 / math.Sqrt(float64(D)))
		for _, l := range layouts {
			q := p.tensor(p.randn(l.nq*H*D, 1.5), l.nq, H, D)
			k, v := p.tensor(p.randn(l.nk*G*D, 1.5), l.nk, G, D), p.tensor(p.randn(l.nk*G*D, 1), l.nk, G, D)
			out, lse := p.tensor(nil, l.nq, H, D), p.tensor(nil, l.nq, H)
			p.ref.Attention(out.r, lse.r, q.r, k.r, v.r, l.segs, scale)
			p.fast.Attention(out.f, lse.f, q.f, k.f, v.f, l.segs, scale)
			p.compare(l.name+" out", out, fastTol)
			p.compare(l.name+" lse", lse, fastTol)
			p.repeatable(l.name+" out", out.f, func() { p.fast.Attention(out.f, nil, q.f, k.f, v.f, l.segs, scale) })
			if !l.backward {
				continue
			}
			dout := p.tensor(p.randn(l.nq*H*D, 1), l.nq, H, D)
			dq, dk, dv := p.tensor(p.randn(l.nq*H*D, 1), l.nq, H, D), p.tensor(p.randn(l.nk*G*D, 1), l.nk, G, D), p.tensor(p.randn(l.nk*G*D, 1), l.nk, G, D)
			p.ref.AttentionBackward(dq.r, dk.r, dv.r, dout.r, q.r, k.r, v.r, out.r, lse.r, l.segs, scale)
			p.fast.AttentionBackward(dq.f, dk.f, dv.f, dout.f, q.f, k.f, v.f, out.f, lse.f, l.segs, scale)
			// dk and dv sum over every query of the group's heads.
			tol := numcheck.Tol{Atol: fastTol.Atol * math.Sqrt(float64(2*l.nq)), Rtol: fastTol.Rtol}
			p.compare(l.name+" dq", dq, tol)
			p.compare(l.name+" dk", dk, tol)
			p.compare(l.name+" dv", dv, tol)
			p.repeatable(l.name+" dk", dk.f, func() {
				p.fast.AttentionBackward(dq.f, dk.f, dv.f, dout.f, q.f, k.f, v.f, out.f, lse.f, l.segs, scale)
			})
		}
	})
}

// TestFastCPUModel runs a training forward and backward of a small model
// (several query blocks per sequence, GQA, untied head) on both backends.
func TestFastCPUModel(t *testing.T) {
	fastVariants(t, func(t *testing.T, p *fastPair) {
		o := model.RandomOptions{Layers: 2, Hidden: 96, Intermediate: 160, Heads: 4, KVHeads: 2, HeadDim: 24,
			Vocab: 300, RopeTheta: 1e4, MaxPositions: 512, InitStd: 0.05}
		cfg, err := o.Config()
		if err != nil {
			t.Fatal(err)
		}
		var seqs []model.Sequence
		var dl [][]float32
		for i, n := range []int{150, 33, 70} {
			toks := make([]int32, n)
			for j := range toks {
				toks[j] = int32(p.rng.IntN(o.Vocab))
			}
			seqs = append(seqs, model.Sequence{Tokens: toks, Start: 1 + i})
			dl = append(dl, p.randn(n-1-i, 1))
		}
		run := func(b model.Backend) (*model.Pass, *model.Params) {
			m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 7, cfg.InitializerRange, 0)}
			pass, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			g := model.NewParams(b, cfg)
			if err := m.Backward(pass, dl, g); err != nil {
				t.Fatal(err)
			}
			return pass, g
		}
		rp, rg := run(p.ref)
		fp, fg := run(p.fast)
		if st, err := numcheck.Compare(slices.Concat(fp.LogProbs...), slices.Concat(rp.LogProbs...), numcheck.Tol{Atol: 2e-5, Rtol: 1e-4}); err != nil {
			t.Errorf("log-probs: %v", err)
		} else {
			t.Logf("log-probs: max abs %.2g", st.MaxAbs)
		}
		rn, fn := rg.Named(cfg), fg.Named(cfg)
		for i := range rn {
			want, got := make([]float32, (*rn[i].Ptr).Numel()), make([]float32, (*fn[i].Ptr).Numel())
			p.ref.Download(*rn[i].Ptr, want)
			p.fast.Download(*fn[i].Ptr, got)
			// Gradients sum over 250 tokens; atol is relative to the largest.
			var mx float64
			for _, v := range want {
				mx = max(mx, math.Abs(float64(v)))
			}
			if _, err := numcheck.Compare(got, want, numcheck.Tol{Atol: 1e-4 * mx, Rtol: 1e-3}); err != nil {
				t.Errorf("grad %s: %v", rn[i].Name, err)
			}
		}
	})
}

// TestFastCPUWorkerCountInvariant: the fast backend's results do not depend
// on how many workers it runs (products split into row or column blocks,
// fixed-size row blocks for reductions), so a run resumed on a machine with
// another core count repeats the same arithmetic. Under -short: 1 and 3
// workers (one split against none).
func TestFastCPUWorkerCountInvariant(t *testing.T) {
	o := model.RandomOptions{Layers: 2, Hidden: 128, Intermediate: 352, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 3000, RopeTheta: 1e4, MaxPositions: 512, InitStd: 0.05}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	var seqs []model.Sequence
	var dl [][]float32
	for _, n := range []int{200, 130, 90} {
		toks := make([]int32, n)
		for j := range toks {
			toks[j] = int32(rng.IntN(o.Vocab))
		}
		seqs = append(seqs, model.Sequence{Tokens: toks, Start: 10})
		d := make([]float32, n-10)
		for j := range d {
			d[j] = float32(rng.NormFloat64())
		}
		dl = append(dl, d)
	}
	for _, noBLAS := range []bool{false, true} {
		var first [][]float32
		workers := []int{1, 2, 3, 5}
		if testing.Short() {
			workers = []int{1, 3}
		}
		for _, w := range workers {
			b := NewBackendWith(Options{Workers: w, NoBLAS: noBLAS})
			m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 7, cfg.InitializerRange, 0)}
			pass, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			g := model.NewParams(b, cfg)
			if err := m.Backward(pass, dl, g); err != nil {
				t.Fatal(err)
			}
			got := [][]float32{slices.Concat(pass.LogProbs...)}
			for _, np := range g.Named(cfg) {
				x := make([]float32, (*np.Ptr).Numel())
				b.Download(*np.Ptr, x)
				got = append(got, x)
			}
			if first == nil {
				first = got
				continue
			}
			for i := range got {
				for j := range got[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(first[i][j]) {
						t.Fatalf("no BLAS %v, %d workers: tensor %d element %d is %v, with 1 worker %v",
							noBLAS, w, i, j, got[i][j], first[i][j])
					}
				}
			}
		}
	}
}
