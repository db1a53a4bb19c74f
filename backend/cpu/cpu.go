// Package cpu is the fast CPU backend: what users without a GPU run (the
// demo, the miniature studies, CI). It computes the same functions as the
// reference (model.ReferenceCPU, model/cpu.go) to float32 rounding, at the
// machine's speed:
//
//   - Matrix products, including attention's q·kᵀ and p·v, go through
//     OpenBLAS sgemm (gemm.go), or gonum's Go Sgemm where OpenBLAS is
//     missing (with one log line).
//     In exact mode (SetBatchInvariant, precision.exact_logprobs) every
//     product is instead fixed-order dot products (exact.go), so a row's
//     results do not depend on the rows that share the product.
//   - RMSNorm, RoPE, SwiGLU, attention's softmax and the log-softmax over
//     the vocabulary run in parallel over rows (and heads), in float32 with
//     the float32 exponential of internal/fastexp (a vectorized C loop
//     where cgo is on, the same bits in Go otherwise), on per-worker scratch
//     taken from a pool: no allocation inside the loops.
//
// Float64 stays where float32 would change results beyond the tolerance
// (backendtest.FP32, rtol 1e-4):
//   - RMSNorm's Σx²: x² overflows float32 beyond |x| ≈ 1.8e19 (the
//     conformance suite's large-magnitude case), and its mean feeds every
//     output of the row;
//   - the log-softmax sums over the vocabulary (Σe^(x−max) and Σe^(x−max)·x,
//     up to 152k terms; the entropy l − Σp·x cancels when p·x changes sign);
//   - AdamW's per-element update, which is the reference's code: with a
//     learning rate of 1e-6 and weight decay 0.01, 1 − lr·wd rounds to 1 in
//     float32;
//   - SumSquares (its contract) and the RoPE angles, computed once per
//     (position, frequency) into a cached float32 table.
//
// Everything else is the reference's code, embedded (Embedding and its
// backward, Gather/ScatterRows, Copy, SumSquares), or that code run in
// parallel chunks (AdamW): copies and per-element updates with no arithmetic worth a
// second version.
//
// Beyond Backend it implements the capabilities whose numbers are the
// fallback's own (model/capabilities.go says which and why not the
// others): the multi-tensor optimizer ops and the loss's derivatives
// (multi.go), a memory pool that poisons what it recycles (pool.go), the
// fused residual norm (fused.go) and exact mode (exact.go).
//
// Results do not depend on the number of workers or on goroutine timing:
// products are split into blocks fixed by their shape, reductions (dw of
// RMSNorm, dk and dv of attention) are summed in a fixed order, and the
// exponential gives the same bits with and without cgo. So a run resumed
// on a machine with another core count (and the same CPU type, which
// decides OpenBLAS's kernels) repeats the uninterrupted one.
package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/gdrotrain/gdrotrain/backend/cpu/internal/cblas"
	"github.com/gdrotrain/gdrotrain/backend/cpu/internal/fastexp"
	"github.com/gdrotrain/gdrotrain/model"
)

// Backend is the fast CPU backend. Its tensors are the reference's ([]float32),
// so tensors move freely between the two.
type Backend struct {
	*model.ReferenceCPU            // argument checks, error recording, workers, and the ops that are plain copies
	blas                *cblas.Lib // nil: gonum's Go kernels
	blasErr             error      // why blas is nil

	ropeMu sync.Mutex
	rope   map[ropeKey]*ropeTable

	scratch sync.Pool // *[]float32, per-worker buffers
	free    freeLists // released tensors' storage (pool.go)

	// exact: batch-invariant products (exact.go, precision.exact_logprobs).
	exact bool
}

// Options configure NewBackendWith.
type Options struct {
	Workers int  // goroutines for parallel loops (0: GOMAXPROCS)
	NoBLAS  bool // use the Go matrix kernels even where OpenBLAS is installed
}

// NewBackend returns the fast CPU backend on every core, with OpenBLAS when the
// machine has it (see cblas.Env to choose or refuse a library).
func NewBackend() *Backend { return NewBackendWith(Options{}) }

// NewBackendWith returns the fast CPU backend with options.
func NewBackendWith(o Options) *Backend {
	w := o.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	b := &Backend{ReferenceCPU: model.NewReferenceCPUWorkers(w), rope: map[ropeKey]*ropeTable{}}
	if o.NoBLAS {
		b.blasErr = cblas.ErrOff
	} else {
		b.blas, b.blasErr = loadBLAS()
	}
	return b
}

// Name identifies the backend in logs.
func (b *Backend) Name() string { return "cpu" }

// MatMulLibrary describes what computes the matrix products, for logs and
// the benchmark: the OpenBLAS build, the core whose kernels it runs and how
// that core was chosen, and its file; or the Go fallback and why.
func (b *Backend) MatMulLibrary() string {
	if b.blas != nil {
		return b.blas.Describe() + " (" + b.blas.Path + ")"
	}
	return "Go kernels (gonum Sgemm): " + b.blasErr.Error()
}

// BLASCore is the OpenBLAS core whose kernels compute the products
// ("SkylakeX"), or "" (the Go kernels, or a CBLAS that does not say).
func (b *Backend) BLASCore() string {
	if b.blas == nil {
		return ""
	}
	return b.blas.Core
}

// buf returns a scratch slice of n floats (contents undefined) and the
// handle to give back with put.
func (b *Backend) buf(n int) (*[]float32, []float32) {
	p, _ := b.scratch.Get().(*[]float32)
	if p == nil {
		p = new([]float32)
	}
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	return p, (*p)[:n]
}

func (b *Backend) put(p *[]float32) { b.scratch.Put(p) }

// sameSize records an error unless every tensor has the same number of
// elements, as the reference checks.
func (b *Backend) sameSize(op string, ts ...*model.Tensor) bool {
	return b.Keep(model.SizeCheck(op, ts...))
}

// checkLSG validates log-softmax-gather shapes, as the reference does.
func (b *Backend) checkLSG(op string, logits *model.Tensor, targets []int32, perRow ...*model.Tensor) (M, V int, ok bool) {
	M, V, err := model.LSGDims(op, logits, targets, perRow...)
	return M, V, b.Keep(err)
}

// Add accumulates dst += src.
func (b *Backend) Add(dst, src *model.Tensor) {
	if !b.Check("add", dst, src) || !b.sameSize("add", dst, src) {
		return
	}
	d, s := b.Data(dst), b.Data(src)
	b.ParallelFor(len(d), 1, func(lo, hi int) {
		d, s := d[lo:hi], s[lo:hi]
		for i := range d {
			d[i] += s[i]
		}
	})
}

// Scale multiplies t by s.
func (b *Backend) Scale(t *model.Tensor, s float32) {
	if !b.Check("scale", t) {
		return
	}
	d := b.Data(t)
	b.ParallelFor(len(d), 1, func(lo, hi int) {
		for i := range d[lo:hi] {
			d[lo+i] *= s
		}
	})
}

// sumSq64 is Σ x² accumulated in float64 (four partial sums).
func sumSq64(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a, b, c, d := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += a * a
		s1 += b * b
		s2 += c * c
		s3 += d * d
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i]) * float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// dot32 is Σ a[i]·b[i] in float32 (four partial sums).
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// RMSNorm normalizes rows of x over the last dimension, rows in parallel.
func (b *Backend) RMSNorm(out, rstd, x, w *model.Tensor, eps float32) {
	R, n, X, O, W, RS, ok := b.RMSNormArgs(out, rstd, x, w)
	if !ok {
		return
	}
	b.ParallelFor(R, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			normRow(O[r*n:(r+1)*n], RS, r, X[r*n:(r+1)*n], W, eps)
		}
	})
}

// rmsRowBlock is how many rows of RMSNormBackward sum their dw terms into
// one partial buffer. It is fixed, not one block per worker, so that dw does
// not depend on the number of workers (a run resumed on another machine
// repeats the same sums).
const rmsRowBlock = 64

// RMSNormBackward overwrites dx and accumulates dw (see ReferenceCPU's for
// the formula). Blocks of rows run in parallel; each block sums its rows'
// dw terms into its own buffer, and the buffers are added to dw in block
// order (so the result does not depend on which goroutine finishes first).
func (b *Backend) RMSNormBackward(dx, dw, dout, x, w, rstd *model.Tensor) {
	if !b.Check("rmsnorm backward", dx, dw, dout, x, w, rstd) {
		return
	}
	b.rmsNormBackward(dx, dw, dout, x, w, rstd, nil)
}

// rmsNormBackward is RMSNormBackward that adds RES (when not nil) to each
// float32 element of dx (RMSNormBackwardAdd, fused.go).
func (b *Backend) rmsNormBackward(dx, dw, dout, x, w, rstd *model.Tensor, RES []float32) {
	R, n, err := model.RMSNormBackwardDims(dx, dw, dout, x, w, rstd)
	if !b.Keep(err) {
		return
	}
	X, DX, DO, W, DW, RS := b.Data(x), b.Data(dx), b.Data(dout), b.Data(w), b.Data(dw), b.Data(rstd)
	nb := (R + rmsRowBlock - 1) / rmsRowBlock
	pp, part := b.buf(nb * n) // (blocks, n)
	defer b.put(pp)
	b.ParallelFor(nb, 4*n*rmsRowBlock, func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			acc := part[blk*n : (blk+1)*n]
			clear(acc)
			for r := blk * rmsRowBlock; r < min((blk+1)*rmsRowBlock, R); r++ {
				xr, dor, dxr := X[r*n:(r+1)*n], DO[r*n:(r+1)*n], DX[r*n:(r+1)*n]
				rs := RS[r]
				var m0, m1 float32
				j := 0
				for ; j+2 <= n; j += 2 {
					m0 += dor[j] * W[j] * xr[j]
					m1 += dor[j+1] * W[j+1] * xr[j+1]
				}
				if j < n {
					m0 += dor[j] * W[j] * xr[j]
				}
				m := (m0 + m1) * rs / float32(n)
				for j := range dxr {
					xhat := xr[j] * rs
					dxr[j] = rs * (dor[j]*W[j] - xhat*m)
					acc[j] += dor[j] * xhat
				}
				if RES != nil { // after the row: the same float32 sums as a separate Add
					for j, v := range RES[r*n : (r+1)*n] {
						dxr[j] += v
					}
				}
			}
		}
	})
	for blk := 0; blk < nb; blk++ {
		for j, v := range part[blk*n : (blk+1)*n] {
			DW[j] += v
		}
	}
}

// ropeKey identifies a cos/sin table.
type ropeKey struct {
	theta float64
	d     int
}

// ropeTable holds cos and sin of pos·theta^(−2i/D) for pos < len/half, as
// (pos, D/2) float32, computed in float64 as the reference does.
type ropeTable struct{ cos, sin []float32 }

// ropeTab returns a table covering positions [0, maxPos], growing it to the
// next power of two when needed. Tables are never modified once published.
func (b *Backend) ropeTab(theta float64, d, maxPos int) *ropeTable {
	half := d / 2
	key := ropeKey{theta, d}
	b.ropeMu.Lock()
	defer b.ropeMu.Unlock()
	t := b.rope[key]
	if t != nil && len(t.cos) >= (maxPos+1)*half {
		return t
	}
	np := 256
	for np <= maxPos {
		np *= 2
	}
	t = &ropeTable{cos: make([]float32, np*half), sin: make([]float32, np*half)}
	invFreq := make([]float64, half)
	for i := range invFreq {
		invFreq[i] = math.Pow(theta, -2*float64(i)/float64(d))
	}
	for p := 0; p < np; p++ {
		for i, f := range invFreq {
			s, c := math.Sincos(float64(p) * f)
			t.cos[p*half+i], t.sin[p*half+i] = float32(c), float32(s)
		}
	}
	b.rope[key] = t
	return t
}

// RoPE rotates pairs (i, i+D/2) of every head, tokens in parallel.
func (b *Backend) RoPE(x *model.Tensor, pos []int32, theta float64, inverse bool) {
	if !b.Check("rope", x) {
		return
	}
	N, H, D, err := model.RoPEDims(x, pos)
	if !b.Keep(err) {
		return
	}
	if N == 0 {
		return
	}
	maxPos := 0
	for _, p := range pos {
		if p < 0 {
			b.ReferenceCPU.RoPE(x, pos, theta, inverse) // no table for negative positions
			return
		}
		maxPos = max(maxPos, int(p))
	}
	half := D / 2
	tab := b.ropeTab(theta, D, maxPos)
	X := b.Data(x)
	sign := float32(1)
	if inverse {
		sign = -1
	}
	b.ParallelFor(N, H*D, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			cs := tab.cos[int(pos[n])*half:][:half]
			sn := tab.sin[int(pos[n])*half:][:half]
			for h := 0; h < H; h++ {
				x1 := X[(n*H+h)*D:][:half]
				x2 := X[(n*H+h)*D+half:][:half]
				for i := range x1 {
					c, s := cs[i], sign*sn[i]
					a, bb := x1[i], x2[i]
					x1[i] = a*c - bb*s
					x2[i] = bb*c + a*s
				}
			}
		}
	})
}

// attnBlock is the number of query rows attention handles per sgemm: the
// scores of one block are (attnBlock, keys) floats of scratch, and causal
// blocks skip the keys after their last query.
const attnBlock = 64

// attnItem is one unit of attention work: query rows [i0, i1) of segment s
// for query head h.
type attnItem struct{ s, h, i0, i1 int }

// attnItems lists the forward's work items of segs for H heads.
func attnItems(segs []model.Segment, H int) []attnItem {
	var items []attnItem
	for si, s := range segs {
		for h := 0; h < H; h++ {
			for i0 := 0; i0 < s.QLen; i0 += attnBlock {
				items = append(items, attnItem{si, h, i0, min(i0+attnBlock, s.QLen)})
			}
		}
	}
	return items
}

// Attention computes causal GQA attention per segment: for each (segment,
// head, block of query rows), S = q·kᵀ·scale by sgemm, a causal softmax over
// each row in float32, and out = P·v by sgemm.
func (b *Backend) Attention(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	if isKV(k) || isKV(v) {
		b.attentionKV(out, lse, q, k, v, segs, scale) // a bf16 or fp8 cache (kvcache.go)
		return
	}
	H, G, D, Q, K, Vv, O, L, ok := b.AttentionArgs(out, lse, q, k, v, segs)
	if !ok {
		return
	}
	groups := H / G
	items := attnItems(segs, H)
	maxK := 0
	for _, s := range segs {
		maxK = max(maxK, s.KLen)
	}
	b.ParallelFor(len(items), attnBlock*maxK*D, func(lo, hi int) {
		p, S := b.buf(attnBlock * maxK)
		defer b.put(p)
		pm, mx := b.buf(attnBlock)
		defer b.put(pm)
		for _, it := range items[lo:hi] {
			s, h := segs[it.s], it.h
			g := h / groups
			nq := it.i1 - it.i0
			nk := s.KLen - s.QLen + it.i1 // keys the block's last query sees
			qo := ((s.Q0+it.i0)*H + h) * D
			ko := (s.K0*G + g) * D
			// S (nq, nk) = q_block (nq, D; stride H·D) · k (nk, D; stride G·D)ᵀ · scale
			b.gemm(false, false, true, nq, nk, D, scale, Q[qo:], H*D, K[ko:], G*D, 0, S, nk)
			// Row i sees n0+i keys: max, e^(s−max) in place (one cgo call
			// for the block), then the sum and the normalization here.
			n0 := s.KLen - s.QLen + it.i0 + 1
			fastexp.MaxExpRows(S, nq, nk, n0, mx)
			for i := 0; i < nq; i++ {
				row := S[i*nk : (i+1)*nk]
				r := row[:n0+i]
				var sum float32
				for _, e := range r {
					sum += e
				}
				inv := 1 / sum
				for j := range r {
					r[j] *= inv
				}
				clear(row[n0+i:])
				if L != nil {
					L[(s.Q0+it.i0+i)*H+h] = mx[i] + float32(math.Log(float64(sum)))
				}
			}
			// out_block (nq, D; stride H·D) = P (nq, nk) · v (nk, D; stride G·D)
			b.gemm(false, false, false, nq, D, nk, 1, S, nk, Vv[ko:], G*D, 0, O[qo:], H*D)
		}
	})
}

// AttentionBackward recomputes the probabilities from the saved log-sum-exp
// and overwrites dq, dk, dv. A work item is one key/value group of one
// segment with all its query heads and query blocks, so it alone writes its
// rows of dk and dv (summed over heads and blocks by sgemm's beta = 1, in a
// fixed order) and of dq. Per (head, block of query rows):
//
//	P = exp(q·kᵀ·scale − lse) (causal),  dP = dout·vᵀ,  dS = P ⊙ (dP − Σ dout⊙out)·scale,
//	dv += Pᵀ·dout,  dk += dSᵀ·q,  dq = dS·k.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse *model.Tensor, segs []model.Segment, scale float32) {
	H, G, D, t, ok := b.AttentionBackwardArgs(dq, dk, dv, dout, q, k, v, out, lse, segs)
	if !ok {
		return
	}
	Q, K, Vv, O, DO, L, DQ, DK, DV := t.Q, t.K, t.V, t.O, t.DO, t.L, t.DQ, t.DK, t.DV
	groups := H / G
	// Segments whose key rows overlap (never in training, where each packed
	// sequence attends to itself) would write the same dk rows: then one
	// item covers every segment of a group.
	type item struct{ s0, s1, g int } // segments [s0, s1) of group g
	var items []item
	maxK, overlap := 0, false
	for si, s := range segs {
		maxK = max(maxK, s.KLen)
		for _, o := range segs[:si] {
			if s.KLen > 0 && o.KLen > 0 && s.K0 < o.K0+o.KLen && o.K0 < s.K0+s.KLen {
				overlap = true
			}
		}
	}
	for g := 0; g < G; g++ {
		if overlap {
			items = append(items, item{0, len(segs), g})
			continue
		}
		for si := range segs {
			items = append(items, item{si, si + 1, g})
		}
	}
	b.ParallelFor(len(items), 4*maxK*maxK*D, func(lo, hi int) {
		pp, P := b.buf(attnBlock * maxK)
		defer b.put(pp)
		pd, dP := b.buf(attnBlock * maxK)
		defer b.put(pd)
		for _, it := range items[lo:hi] {
			for _, s := range segs[it.s0:it.s1] {
				b.attnBackwardSegment(s, it.g, H, G, D, groups, scale, Q, K, Vv, O, DO, L, DQ, DK, DV, P, dP)
			}
		}
	})
}

// attnBackwardSegment is AttentionBackward for one segment and group g, with
// scratch P and dP of attnBlock·KLen floats each.
func (b *Backend) attnBackwardSegment(s model.Segment, g, H, G, D, groups int, scale float32,
	Q, K, Vv, O, DO, L, DQ, DK, DV, P, dP []float32) {
	var lse [attnBlock]float32
	ko := (s.K0*G + g) * D
	for h := g * groups; h < (g+1)*groups; h++ {
		for i0 := 0; i0 < s.QLen; i0 += attnBlock {
			i1 := min(i0+attnBlock, s.QLen)
			nq, nk := i1-i0, s.KLen-s.QLen+i1 // the block's last query sees nk keys
			qo := ((s.Q0+i0)*H + h) * D
			// P (nq, nk) = q·kᵀ·scale, then exp(· − lse) below.
			b.gemm(false, false, true, nq, nk, D, scale, Q[qo:], H*D, K[ko:], G*D, 0, P, nk)
			// dP (nq, nk) = dout·vᵀ.
			b.gemm(false, false, true, nq, nk, D, 1, DO[qo:], H*D, Vv[ko:], G*D, 0, dP, nk)
			// P = e^(q·kᵀ·scale − lse) on the n0+i keys row i sees.
			n0 := s.KLen - s.QLen + i0 + 1
			for i := 0; i < nq; i++ {
				lse[i] = L[(s.Q0+i0+i)*H+h]
			}
			fastexp.ExpRows(P, nq, nk, n0, lse[:nq])
			for i := 0; i < nq; i++ {
				row := (s.Q0+i0+i)*H + h
				valid := n0 + i
				delta := dot32(DO[row*D:][:D], O[row*D:][:D]) // Σ_j p_j (dout·v_j)
				pr, dr := P[i*nk:(i+1)*nk], dP[i*nk:(i+1)*nk]
				for j, pj := range pr[:valid] {
					dr[j] = pj * (dr[j] - delta) * scale // dS
				}
				clear(pr[valid:])
				clear(dr[valid:])
			}
			b.gemm(false, true, false, nk, D, nq, 1, P, nk, DO[qo:], H*D, 1, DV[ko:], G*D)  // dv += Pᵀ·dout
			b.gemm(false, true, false, nk, D, nq, 1, dP, nk, Q[qo:], H*D, 1, DK[ko:], G*D)  // dk += dSᵀ·q
			b.gemm(false, false, false, nq, D, nk, 1, dP, nk, K[ko:], G*D, 0, DQ[qo:], H*D) // dq = dS·k
		}
	}
}

// SwiGLU computes silu(gate) ⊙ up in parallel chunks.
func (b *Backend) SwiGLU(out, gate, up *model.Tensor) {
	if !b.Check("swiglu", out, gate, up) || !b.sameSize("swiglu", out, gate, up) {
		return
	}
	O, Gt, U := b.Data(out), b.Data(gate), b.Data(up)
	b.ParallelFor(len(O), 16, func(lo, hi int) {
		fastexp.SiLUMul(O[lo:hi], Gt[lo:hi], U[lo:hi])
	})
}

// SwiGLUBackward: d silu(g)/dg = σ(g)·(1 + g·(1−σ(g))).
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up *model.Tensor) {
	if !b.Check("swiglu backward", dgate, dup, dout, gate, up) || !b.sameSize("swiglu backward", dgate, dup, dout, gate, up) {
		return
	}
	DG, DU, DO, Gt, U := b.Data(dgate), b.Data(dup), b.Data(dout), b.Data(gate), b.Data(up)
	b.ParallelFor(len(Gt), 16, func(lo, hi int) {
		fastexp.SiLUMulBackward(DG[lo:hi], DU[lo:hi], DO[lo:hi], Gt[lo:hi], U[lo:hi])
	})
}

// LogSoftmaxGather computes target log-probabilities, log-sum-exp and
// entropy, rows in parallel; the sums over the vocabulary are float64.
func (b *Backend) LogSoftmaxGather(logp, lse, entropy, logits *model.Tensor, targets []int32) {
	ts := []*model.Tensor{logp, lse, logits}
	if entropy != nil {
		ts = append(ts, entropy)
	}
	if !b.Check("logsoftmax gather", ts...) {
		return
	}
	M, V, ok := b.checkLSG("logsoftmax gather", logits, targets, logp, lse, entropy)
	if !ok {
		return
	}
	X, LP, LS := b.Data(logits), b.Data(logp), b.Data(lse)
	var E []float32
	if entropy != nil {
		E = b.Data(entropy)
	}
	b.ParallelFor(M, 8*V, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			row := X[m*V : (m+1)*V]
			mx := fastexp.Max(row)
			if math.IsInf(float64(mx), 0) || mx != mx {
				// An inf or NaN logit, or all −inf: NaN, as in the reference.
				nan := float32(math.NaN())
				LS[m], LP[m] = nan, nan
				if E != nil {
					E[m] = nan
				}
				continue
			}
			// sum = Σ e^(x−mx), sumX = Σ e^(x−mx)·(x−mx), in float64; the
			// shift keeps sumX from cancelling around large logits.
			sum, sumX := fastexp.SumExp(row, mx)
			l := float64(mx) + math.Log(sum)
			LS[m] = float32(l)
			LP[m] = float32(float64(row[targets[m]]) - l)
			if E != nil {
				E[m] = float32(l - float64(mx) - sumX/sum) // −Σ p log p = l − Σ p x
			}
		}
	})
}

// LogSoftmaxGatherBackward overwrites dlogits = dlogp·(onehot − softmax).
func (b *Backend) LogSoftmaxGatherBackward(dlogits, dlogp, logits, lse *model.Tensor, targets []int32) {
	if !b.Check("logsoftmax gather backward", dlogits, dlogp, logits, lse) || !b.sameSize("logsoftmax gather backward", dlogits, logits) {
		return
	}
	M, V, ok := b.checkLSG("logsoftmax gather backward", logits, targets, dlogp, lse)
	if !ok {
		return
	}
	X, DX, DL, LS := b.Data(logits), b.Data(dlogits), b.Data(dlogp), b.Data(lse)
	b.ParallelFor(M, 4*V, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			g, l := DL[m], LS[m]
			x, dx := X[m*V:(m+1)*V], DX[m*V:(m+1)*V]
			if g == 0 {
				clear(dx)
				continue
			}
			fastexp.ShiftScale(dx, x, l, -g)
			dx[targets[m]] += g
		}
	})
}

// AdamW is the reference's update (float64 per element), split over workers.
func (b *Backend) AdamW(p, g, m, v *model.Tensor, h model.AdamWParams) {
	if !b.Check("adamw", p, g, m, v) || !b.Keep(model.AdamWCheck(p, g, m, v, h)) {
		return
	}
	n := p.Numel()
	b.ParallelFor(n, 16, func(lo, hi int) {
		b.ReferenceCPU.AdamW(p.View(n).Rows(lo, hi), g.View(n).Rows(lo, hi), m.View(n).Rows(lo, hi), v.View(n).Rows(lo, hi), h)
	})
}
