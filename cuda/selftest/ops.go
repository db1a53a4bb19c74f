package selftest

// The per-op cases: each one runs an op (or a forward/backward pair) on a
// backend from inputs drawn from a fixed seed and returns every output as
// one host array, so the same function gives the CPU reference and the
// GPU's answer. Sizes are awkward on purpose (not multiples of the kernels'
// block sizes, several tiles long) and small enough for a self-test of a
// few seconds.

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// OpCase is one op comparison.
type OpCase struct {
	Name string
	// Kernels names the CUDA kernels (or "gemm") the case exercises, for
	// the failure message.
	Kernels string
	Run     func(b model.Backend) []float32
	// Products marks ops whose arithmetic runs as matrix products in the
	// backend's precision (attention on tensor cores): their tolerance is
	// the precision's (productTol), not opTol.
	Products bool
	// Magnitude, for matrix products, returns Σ_k |a_ik|·|b_kj| per output
	// (run on the CPU): the error bound of a product whose inputs are
	// rounded to the precision's significand scales with it, not with the
	// result, which cancellation can make arbitrarily small.
	Magnitude func(b model.Backend) []float32
	// BF16Only marks a case that only bf16 products run (the training
	// route on bf16 activations): the other precisions skip it.
	BF16Only bool
	// Locate, when set, names what output element i belongs to (a case
	// that runs many shapes: the head dim), for the failure message.
	Locate func(i int) string
}

// opTol is the tolerance of every op but the matrix products. Kernels
// accumulate in float32 where the CPU reference uses float64: 2e-4 relative
// covers reductions over a few thousand terms (observed ≤ 3e-6 absolute on
// the emulator).
var opTol = numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}

// productRoundoff is the relative error bound of one product a·b whose
// inputs are each rounded to the precision's significand (2 × its unit
// roundoff), plus float32 accumulation: |C − C_exact| ≤ u·Σ|a||b|. bf16
// keeps 8 significant bits (u = 2·2⁻⁸), tf32 11 (2·2⁻¹¹; cuBLAS may use
// tf32 for FAST_16BF, which this bound also covers), fp32 24 with K-term
// float32 accumulation (K·2⁻²⁴ for K ≤ 128 stays below 2⁻¹⁶).
var productRoundoff = map[string]float64{"fp32": 0x1p-16, "tf32": 0x1p-10, "bf16": 0x1p-7}

// productTol is the tolerance of ops computed through products (attention:
// scores, probabilities and values each rounded to the product's inputs).
// Observed on the emulator (outputs and gradients of order 1, D up to
// 128): bf16 ≤ 2.0e-2 absolute, tf32 ≤ 3.8e-3, fp32 ≤ 2.2e-6 (opTol).
var productTol = map[string]numcheck.Tol{"fp32": opTol, "tf32": {Atol: 1e-2, Rtol: 1e-2}, "bf16": {Atol: 4e-2, Rtol: 4e-2}}

// gen draws reproducible inputs.
type gen struct{ rng *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, 9))} }

func (g *gen) randn(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * g.rng.NormFloat64())
	}
	return out
}

func (g *gen) ids(n, limit int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(g.rng.IntN(limit))
	}
	return out
}

// OpCases returns every op case. Inputs are drawn once, here, so each case
// sees the same values on both backends.
func OpCases() []OpCase {
	g := newGen(5)
	var cases []OpCase
	add := func(c OpCase) { cases = append(cases, c) }

	const N, C, F = 37, 72, 1000
	x, y := g.randn(N*C, 1), g.randn(N*C, 1)
	add(OpCase{Name: "add/scale/copy/zero", Kernels: "add_f32, scale_f32, copy", Run: func(b model.Backend) []float32 {
		a, c, z, w := model.NewFrom(b, x, N, C), model.NewFrom(b, y, N, C), b.New(6, C), model.NewFrom(b, y[:3*C], 3, C)
		b.Add(a, c)
		b.Scale(a, 0.37)
		b.Copy(z, a.Rows(3, 9).View(6*C))
		b.Zero(w)
		return model.Values(b, a, z, w)
	}})
	big := g.randn(300001, 1)
	add(OpCase{Name: "sumsquares", Kernels: "sumsq_partial, sum_chunks", Run: func(b model.Backend) []float32 {
		return []float32{float32(b.SumSquares(model.NewFrom(b, big, len(big))))}
	}})
	for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		M, K, Nn := 37, 72, 45
		aShape, bShape := []int{M, K}, []int{K, Nn}
		if tr[0] {
			aShape = []int{K, M}
		}
		if tr[1] {
			bShape = []int{Nn, K}
		}
		av, bv, cv := g.randn(M*K, 1), g.randn(K*Nn, 1), g.randn(M*Nn, 1)
		products := func(b model.Backend, av, bv, cv []float32) []float32 {
			c1, c2 := b.New(M, Nn), model.NewFrom(b, cv, M, Nn)
			A, B := model.NewFrom(b, av, aShape...), model.NewFrom(b, bv, bShape...)
			b.MatMul(c1, A, B, tr[0], tr[1], false)
			b.MatMul(c2, A, B, tr[0], tr[1], true)
			return model.Values(b, c1, c2)
		}
		add(OpCase{Name: "matmul " + transName(tr), Kernels: "gemm",
			Run:       func(b model.Backend) []float32 { return products(b, av, bv, cv) },
			Magnitude: func(b model.Backend) []float32 { return products(b, abs(av), abs(bv), abs(cv)) }})
	}
	for _, n := range []int{C, F} {
		xs, ws, dy := g.randn(N*n, 2), g.randn(n, 0.5), g.randn(N*n, 1)
		add(OpCase{Name: "rmsnorm fwd+bwd", Kernels: "rmsnorm_fwd, rmsnorm_bwd_dxdw, sum_chunks", Run: func(b model.Backend) []float32 {
			X, W, out, rs := model.NewFrom(b, xs, N, n), model.NewFrom(b, ws, n), b.New(N, n), b.New(N)
			b.RMSNorm(out, rs, X, W, 1e-6)
			dx, dw := b.New(N, n), model.NewFrom(b, ws, n) // dw accumulates onto w's values
			b.RMSNormBackward(dx, dw, model.NewFrom(b, dy, N, n), X, W, rs)
			return model.Values(b, out, rs, dx, dw)
		}})
	}
	for _, n := range []int{C, F} {
		xs, ys, ws, dy, res := g.randn(N*n, 2), g.randn(N*n, 1), g.randn(n, 0.5), g.randn(N*n, 1), g.randn(N*n, 1)
		add(OpCase{Name: "fused residual rmsnorm fwd+bwd", Kernels: "add_rmsnorm_fwd, rmsnorm_bwd_dxdw_res, sum_chunks", Run: func(b model.Backend) []float32 {
			X, Y, W, sum, out, rs := model.NewFrom(b, xs, N, n), model.NewFrom(b, ys, N, n), model.NewFrom(b, ws, n), b.New(N, n), b.New(N, n), b.New(N)
			model.AddRMSNorm(b, sum, out, rs, X, Y, W, 1e-6)
			dx, dw := b.New(N, n), model.NewFrom(b, ws, n) // dw accumulates onto w's values
			model.RMSNormBackwardAdd(b, dx, dw, model.NewFrom(b, dy, N, n), sum, W, rs, model.NewFrom(b, res, N, n))
			return model.Values(b, sum, out, rs, dx, dw)
		}})
	}
	pos := g.ids(N, 9000)
	for _, D := range []int{16, 128} {
		xs := g.randn(N*3*D, 1)
		add(OpCase{Name: "rope", Kernels: "rope", Run: func(b model.Backend) []float32 {
			X := model.NewFrom(b, xs, N, 3, D)
			b.RoPE(X, pos, 1e6, false)
			f := model.Values(b, X)
			b.RoPE(X, pos, 1e6, true)
			return append(f, model.Values(b, X)...)
		}})
	}
	for _, D := range []int{16, 128} {
		const H, G = 4, 2
		d := model.QKVDims{N: N, H: H, G: G, D: D}
		xs, qw, kw := g.randn(N*d.Width(), 2), g.randn(D, 1), g.randn(D, 1)
		dq, dk, dv := g.randn(N*H*D, 1), g.randn(N*G*D, 1), g.randn(N*G*D, 1)
		add(OpCase{Name: "split qkv fwd+bwd", Kernels: "qkv_split_fwd, qkv_split_bwd_dx, qkv_split_bwd_dw_partial", Run: func(b model.Backend) []float32 {
			X, QW, KW := model.NewFrom(b, xs, N, d.Width()), model.NewFrom(b, qw, D), model.NewFrom(b, kw, D)
			qn, kn, v, rq, rk := b.New(N, H, D), b.New(N, G, D), b.New(N, G, D), b.New(N*H), b.New(N*G)
			b.SplitQKV(qn, kn, v, rq, rk, X, QW, KW, pos, 1e6, 1e-6)
			dx, dqw, dkw := b.New(N, d.Width()), model.NewFrom(b, qw, D), model.NewFrom(b, kw, D) // the norms' gradients accumulate onto their values
			b.SplitQKVBackward(dx, dqw, dkw, model.NewFrom(b, dq, N, H, D), model.NewFrom(b, dk, N, G, D), model.NewFrom(b, dv, N, G, D), X, QW, KW, rq, rk, pos, 1e6)
			return model.Values(b, qn, kn, v, rq, rk, dx, dqw, dkw)
		}})
	}
	gate, up, dout := g.randn(F*3, 3), g.randn(F*3, 1), g.randn(F*3, 1)
	add(OpCase{Name: "swiglu fwd+bwd", Kernels: "swiglu_fwd, swiglu_bwd", Run: func(b model.Backend) []float32 {
		G, U, out, dg, du := model.NewFrom(b, gate, F, 3), model.NewFrom(b, up, F, 3), b.New(F, 3), b.New(F, 3), b.New(F, 3)
		b.SwiGLU(out, G, U)
		b.SwiGLUBackward(dg, du, model.NewFrom(b, dout, F, 3), G, U)
		return model.Values(b, out, dg, du)
	}})
	for _, V := range []int{1000, 4099} {
		const M = 7
		logits, dl, targets := g.randn(M*V, 4), g.randn(M, 1), g.ids(M, V)
		add(OpCase{Name: "logsoftmax gather fwd+bwd", Kernels: "lsg_fwd, lsg_bwd", Run: func(b model.Backend) []float32 {
			L, lp, lse, ent, dL := model.NewFrom(b, logits, M, V), b.New(M), b.New(M), b.New(M), b.New(M, V)
			b.LogSoftmaxGather(lp, lse, ent, L, targets)
			b.LogSoftmaxGatherBackward(dL, model.NewFrom(b, dl, M), L, lse, targets)
			return model.Values(b, lp, lse, ent, dL)
		}})
	}
	const V = 50
	table, ids := g.randn(V*C, 1), []int32{3, 7, 3, 49, 0, 7, 7, 12, 3}
	rowsIn := g.randn(len(ids)*C, 1)
	add(OpCase{Name: "embedding / gather / scatter", Kernels: "copy_rows, accumulate_rows", Run: func(b model.Backend) []float32 {
		T, out := model.NewFrom(b, table, V, C), b.New(len(ids), C)
		b.Embedding(out, T, ids)
		dT := model.NewFrom(b, table, V, C)
		b.EmbeddingBackward(dT, model.NewFrom(b, rowsIn, len(ids), C), ids)
		gr, s1, s2 := b.New(len(ids), C), model.NewFrom(b, table, V, C), model.NewFrom(b, table, V, C)
		b.GatherRows(gr, T, ids)
		b.ScatterRows(s1, model.NewFrom(b, rowsIn, len(ids), C), ids, false)
		b.ScatterRows(s2, model.NewFrom(b, rowsIn, len(ids), C), ids, true)
		return model.Values(b, out, dT, gr, s1, s2)
	}})
	pv, gv, mv, vv := g.randn(F, 1), g.randn(F, 1), g.randn(F, 0.1), g.randn(F, 0.1)
	for i := range vv {
		vv[i] *= vv[i]
	}
	add(OpCase{Name: "adamw", Kernels: "adamw", Run: func(b model.Backend) []float32 {
		P, G, Mm, Vv := model.NewFrom(b, pv, F), model.NewFrom(b, gv, F), model.NewFrom(b, mv, F), model.NewFrom(b, vv, F)
		for step := 1; step <= 3; step++ {
			b.AdamW(P, G, Mm, Vv, model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: step})
		}
		return model.Values(b, P, Mm, Vv)
	}})
	for _, c := range attentionShapes() {
		q, k, v := g.randn(c.nq*c.H*c.D, 1), g.randn(c.nk*c.G*c.D, 1), g.randn(c.nk*c.G*c.D, 1)
		do := g.randn(c.nq*c.H*c.D, 1)
		scale := float32(1 / math.Sqrt(float64(c.D)))
		add(OpCase{Name: "attention " + c.name, Kernels: "attn_* or gemm", Products: true, Run: func(b model.Backend) []float32 {
			Q, K, Vt := model.NewFrom(b, q, c.nq, c.H, c.D), model.NewFrom(b, k, c.nk, c.G, c.D), model.NewFrom(b, v, c.nk, c.G, c.D)
			out, lse := b.New(c.nq, c.H, c.D), b.New(c.nq, c.H)
			b.Attention(out, lse, Q, K, Vt, c.segs, scale)
			res := model.Values(b, out, lse)
			if c.backward {
				dq, dk, dv := b.New(c.nq, c.H, c.D), b.New(c.nk, c.G, c.D), b.New(c.nk, c.G, c.D)
				b.AttentionBackward(dq, dk, dv, model.NewFrom(b, do, c.nq, c.H, c.D), Q, K, Vt, out, lse, c.segs, scale)
				res = append(res, model.Values(b, dq, dk, dv)...)
			}
			return res
		}})
	}
	cases = append(cases, headDimCases(g)...)
	add(trainingAttentionCase(g))
	samp := g.randn(5*3001, 3)
	add(OpCase{Name: "device sampling reductions", Kernels: "topk_rows, chunk_sums", Run: func(b model.Backend) []float32 {
		L := model.NewFrom(b, samp, 5, 3001)
		if rs := model.SamplerCapsOf(b).Device; rs != nil {
			return sampling(rs.TopK(L, 8))(rs.ChunkSums(L, 0.7, 512))
		}
		return sampling(hostTopK(model.Values(b, L), 3001, 8))(hostChunkSums(model.Values(b, L), 3001, 0.7, 512))
	}})
	return cases
}

// headDimCases run attention at every head dim the CUDA backend serves
// (every even one up to cuda.MaxHeadDim; model configs admit only even
// ones, and larger ones are refused when a model is loaded), since the
// kernels split a row over threads and warp lanes in ways that can fail at
// some sizes only (the split-K decode kernels did at 24, 40, 48, …): a
// decode step (one query each over 1, 9 and 300 cache rows: the split-K
// kernels, their 300 keys in two splits), one over a bf16 KV cache where
// the backend keeps one (model.KVStore), and a prefill of 17 tokens with
// its backward (the tensor-core routes), GQA 2:1.
func headDimCases(g *gen) []OpCase {
	const H, G = 2, 1
	var dims []int
	for D := 2; D <= cuda.MaxHeadDim; D += 2 {
		dims = append(dims, D)
	}
	decode := []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 1, QLen: 1, K0: 2, KLen: 9}, {Q0: 2, QLen: 1, K0: 12, KLen: 300}}
	// Fewer cache rows for the bf16 cache: writing them (one thread per
	// element) is most of the check's time on the emulator.
	decodeHalf := []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 1, QLen: 1, K0: 2, KLen: 9}, {Q0: 2, QLen: 1, K0: 12, KLen: 40}}
	prefill := []model.Segment{{Q0: 0, QLen: 17, K0: 0, KLen: 17}}
	var cases []OpCase
	for _, l := range []struct {
		name, kernels string
		nq, nk        int
		segs          []model.Segment
		halfKV        bool
		backward      bool
	}{
		{"decode", "attn_decode_split_p2, attn_decode_combine, attn_fwd", 3, 312, decode, false, false},
		{"decode, bf16 KV cache", "attn_decode_split_kvh_p2, attn_decode_combine, attn_fwd_kvh", 3, 52, decodeHalf, true, false},
		{"prefill fwd+bwd", "attn_* or gemm", 17, 17, prefill, false, true},
	} {
		type inputs struct{ q, k, v, dout []float32 }
		in := make([]inputs, len(dims))
		var ends []int // the end of each head dim's outputs
		n := 0
		for i, D := range dims {
			in[i] = inputs{g.randn(l.nq*H*D, 1), g.randn(l.nk*G*D, 1), g.randn(l.nk*G*D, 1), g.randn(l.nq*H*D, 1)}
			if l.halfKV {
				roundBF16(in[i].k)
				roundBF16(in[i].v)
			}
			n += l.nq * H * (D + 1)
			if l.backward {
				n += (l.nq*H + 2*l.nk*G) * D
			}
			ends = append(ends, n)
		}
		cases = append(cases, OpCase{Name: "attention every head_dim, " + l.name, Kernels: l.kernels, Products: l.backward,
			Run: func(b model.Backend) []float32 {
				var res []float32
				for i, D := range dims {
					scale := float32(1 / math.Sqrt(float64(D)))
					Q, K, V := model.NewFrom(b, in[i].q, l.nq, H, D), kvUpload(b, in[i].k, l.halfKV, l.nk, G, D), kvUpload(b, in[i].v, l.halfKV, l.nk, G, D)
					out, lse := b.New(l.nq, H, D), b.New(l.nq, H)
					b.Attention(out, lse, Q, K, V, l.segs, scale)
					res = append(res, model.Values(b, out, lse)...)
					if l.backward {
						dq, dk, dv := b.New(l.nq, H, D), b.New(l.nk, G, D), b.New(l.nk, G, D)
						b.AttentionBackward(dq, dk, dv, model.NewFrom(b, in[i].dout, l.nq, H, D), Q, K, V, out, lse, l.segs, scale)
						res = append(res, model.Values(b, dq, dk, dv)...)
					}
					model.Release(b, Q, K, V, out, lse)
				}
				return res
			},
			Locate: func(i int) string {
				k, _ := slices.BinarySearch(ends, i+1)
				return fmt.Sprintf("head_dim %d", dims[min(k, len(dims)-1)])
			}})
	}
	return cases
}

// kvUpload writes a key or value tensor as a bf16 KV cache where the
// backend keeps one (half set, model.KVStore: written by ScatterRows as
// the model writes its cache), else in fp32.
func kvUpload(b model.Backend, vals []float32, half bool, rows, heads, d int) *model.Tensor {
	hs := model.SamplerCapsOf(b).KV
	if !half || hs == nil {
		return model.NewFrom(b, vals, rows, heads, d)
	}
	t := hs.NewHalf(rows, heads, d)
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	src := model.NewFrom(b, vals, rows, heads*d)
	b.ScatterRows(t.View(rows, heads*d), src, idx, false)
	model.Release(b, src)
	return t
}

// roundBF16 rounds x to bf16 values (nearest even) in place, so a bf16 KV
// cache holds them exactly and both backends read the same numbers.
func roundBF16(x []float32) {
	for i, f := range x {
		u := math.Float32bits(f)
		u += 0x7fff + (u >> 16 & 1)
		x[i] = math.Float32frombits(u &^ 0xffff)
	}
}

// attnShape is one attention case: H query heads over G key/value heads of
// size D, queries and keys in segments.
type attnShape struct {
	name     string
	H, G, D  int
	nq, nk   int
	segs     []model.Segment
	backward bool
}

// attentionShapes covers training (packed, several key tiles, Qwen3's
// D = 128), decoding over cache slots and chunked prefill.
func attentionShapes() []attnShape {
	return []attnShape{
		{"packed training", 4, 2, 16, 130, 130, []model.Segment{{Q0: 0, QLen: 20, K0: 0, KLen: 20}, {Q0: 20, QLen: 110, K0: 20, KLen: 110}}, true},
		{"qwen3 head dim", 8, 2, 128, 70, 70, []model.Segment{{Q0: 0, QLen: 70, K0: 0, KLen: 70}}, true},
		{"decode over slots", 4, 1, 16, 3, 300, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 140}, {Q0: 1, QLen: 1, K0: 150, KLen: 1}, {Q0: 2, QLen: 1, K0: 151, KLen: 149}}, false},
		{"chunked prefill", 2, 2, 16, 50, 200, []model.Segment{{Q0: 0, QLen: 50, K0: 100, KLen: 100}}, true},
	}
}

func transName(tr [2]bool) string {
	s := ""
	for _, v := range tr {
		if v {
			s += "T"
		} else {
			s += "N"
		}
	}
	return s
}

// sampling flattens TopK's and ChunkSums's answers into one array (ids as
// values: an exact match is required of them by any tolerance below 1).
func sampling(ids [][]int32, vals [][]float32) func(mx []float64, sums [][]float64) []float32 {
	return func(mx []float64, sums [][]float64) []float32 {
		var out []float32
		for r := range ids {
			for i := range ids[r] {
				out = append(out, float32(ids[r][i]), vals[r][i])
			}
			out = append(out, float32(mx[r]))
			for _, s := range sums[r] {
				out = append(out, float32(s))
			}
		}
		return out
	}
}

// hostTopK is model.DeviceSampler.TopK's definition: per row of width V, the
// k largest values in descending order, ties broken by the lower id.
func hostTopK(logits []float32, V, k int) ([][]int32, [][]float32) {
	var ids [][]int32
	var vals [][]float32
	for r := 0; r < len(logits)/V; r++ {
		row := logits[r*V : (r+1)*V]
		idx := make([]int32, V)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(row[b], row[a]) })
		ids = append(ids, idx[:k])
		v := make([]float32, k)
		for i, id := range idx[:k] {
			v[i] = row[id]
		}
		vals = append(vals, v)
	}
	return ids, vals
}

// hostChunkSums is model.DeviceSampler.ChunkSums's definition, in float64.
func hostChunkSums(logits []float32, V int, temperature float64, chunk int) ([]float64, [][]float64) {
	var mx []float64
	var sums [][]float64
	for r := 0; r < len(logits)/V; r++ {
		row := logits[r*V : (r+1)*V]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v)/temperature)
		}
		var s []float64
		for lo := 0; lo < V; lo += chunk {
			var acc float64
			for _, v := range row[lo:min(lo+chunk, V)] {
				acc += math.Exp(float64(v)/temperature - m)
			}
			s = append(s, acc)
		}
		mx, sums = append(mx, m), append(sums, s)
	}
	return mx, sums
}

func abs(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Abs(float64(v)))
	}
	return out
}

// trainingAttentionCase is attention as a training pass under bf16
// products runs it: bf16 queries, keys, values and output
// (model.HalfPrecision), Qwen3's head dim, packed segments over several
// tiles, forward and backward, under bf16 products only. On an H100 or H200 it is the warpgroup-MMA
// kernels' check (their shared-memory layouts and asynchrony are the
// emulator's model of the PTX ISA until a GPU has run them); elsewhere the
// mma.sync kernels'. The CPU runs fp32 attention on the same bf16 values,
// its output rounded as the GPU's is.
func trainingAttentionCase(g *gen) OpCase {
	const H, G, D = 4, 2, 128
	segs := []model.Segment{{Q0: 0, QLen: 37, K0: 0, KLen: 37}, {Q0: 37, QLen: 150, K0: 37, KLen: 150}}
	n := 187
	q, k, v := g.randn(n*H*D, 1), g.randn(n*G*D, 1), g.randn(n*G*D, 1)
	roundBF16(q)
	roundBF16(k)
	roundBF16(v)
	do := g.randn(n*H*D, 1)
	scale := float32(1 / math.Sqrt(D))
	return OpCase{Name: "attention, bf16 activations, head_dim 128", Kernels: "attn_wg_*_h (sm_90) or attn_flash_*_h", Products: true, BF16Only: true,
		Run: func(b model.Backend) []float32 {
			Q, K, V := actUpload(b, q, n, H, D), actUpload(b, k, n, G, D), actUpload(b, v, n, G, D)
			out, lse := actUpload(b, nil, n, H, D), b.New(n, H)
			b.Attention(out, lse, Q, K, V, segs, scale)
			res := model.Values(b, out, lse)
			if model.TrainerCapsOf(b).Half == nil {
				roundBF16(res[:out.Numel()]) // the GPU keeps a bf16 output
				b.Upload(out, res[:out.Numel()])
			}
			dq, dk, dv := b.New(n, H, D), b.New(n, G, D), b.New(n, G, D)
			b.AttentionBackward(dq, dk, dv, model.NewFrom(b, do, n, H, D), Q, K, V, out, lse, segs, scale)
			return append(res, model.Values(b, dq, dk, dv)...)
		}}
}

// actUpload is a bf16 activation holding vals (bf16 values already) where
// the backend keeps them (model.HalfPrecision), written through a
// product with the identity (exact), else an fp32 tensor; nil vals leaves
// it unwritten.
func actUpload(b model.Backend, vals []float32, shape ...int) *model.Tensor {
	as := model.TrainerCapsOf(b).Half
	if as == nil {
		if vals == nil {
			return b.New(shape...)
		}
		return model.NewFrom(b, vals, shape...)
	}
	t := as.ActivationHalf(shape...)
	if vals != nil {
		cols := shape[len(shape)-1]
		rows := len(vals) / cols
		id := make([]float32, cols*cols)
		for i := 0; i < cols; i++ {
			id[i*cols+i] = 1
		}
		b.MatMul(t.View(rows, cols), model.NewFrom(b, vals, rows, cols), model.NewFrom(b, id, cols, cols), false, false, false)
	}
	return t
}
