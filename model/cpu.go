package model

// The reference CPU backend: the float32 specification every other backend
// is tested against (docs/architecture.md, decision 1). Plain loops, float64
// accumulators, no cleverness beyond splitting independent rows across cores.
// Shapes are checked on every call; a bad call records an error (see
// Backend) and leaves its outputs untouched.
//
// Users run the fast CPU backend (backend/cpu), which embeds this one for
// its argument checks, error recording and the ops that are plain copies
// (cpu_embed.go), and replaces the hot ops with BLAS products and row-parallel
// float32 loops. The model tests that need an independent oracle, and the
// fast backend's own tests, compare against this one.

import (
	"fmt"
	"math"
	"runtime"
	"sync"
)

// ReferenceCPU is the reference backend. Its tensors are backed by []float32.
type ReferenceCPU struct {
	mu      sync.Mutex
	err     error
	workers int
}

// NewReferenceCPU returns the reference backend using every available core.
func NewReferenceCPU() *ReferenceCPU { return &ReferenceCPU{workers: runtime.GOMAXPROCS(0)} }

// Name identifies the backend in logs.
func (b *ReferenceCPU) Name() string { return "cpu-reference" }

// Err returns the first recorded error.
func (b *ReferenceCPU) Err() error { b.mu.Lock(); defer b.mu.Unlock(); return b.err }

// ResetErr clears the recorded error.
func (b *ReferenceCPU) ResetErr() { b.mu.Lock(); b.err = nil; b.mu.Unlock() }

// failf records the first error and reports whether work must be skipped.
func (b *ReferenceCPU) failf(format string, a ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		b.err = fmt.Errorf(format, a...)
	}
}

// ok reports whether no error has been recorded, so ops can skip work.
func (b *ReferenceCPU) ok() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.err == nil }

// data returns t's elements as a slice of the backing array.
func (b *ReferenceCPU) data(t *Tensor) []float32 {
	return t.Store.([]float32)[t.Off : t.Off+t.Numel()]
}

// check validates that every tensor is a CPU tensor (not nil).
func (b *ReferenceCPU) check(op string, ts ...*Tensor) bool {
	if !b.ok() {
		return false
	}
	for i, t := range ts {
		if t == nil {
			b.failf("%s: tensor argument %d is nil", op, i)
			return false
		}
		if _, gone := t.Store.(releasedStore); gone {
			b.failf("%s: tensor argument %d %v was released", op, i, t.Shape)
			return false
		}
		s, isCPU := t.Store.([]float32)
		if !isCPU {
			b.failf("%s: tensor argument %d is not a CPU tensor", op, i)
			return false
		}
		if t.Off < 0 || t.Off+t.Numel() > len(s) {
			b.failf("%s: tensor argument %d (shape %v, offset %d) exceeds its storage", op, i, t.Shape, t.Off)
			return false
		}
	}
	return true
}

// sameSize records an error unless the tensors have equal element counts.
func (b *ReferenceCPU) sameSize(op string, ts ...*Tensor) bool { return b.keep(SizeCheck(op, ts...)) }

// keep records err, if any, and reports whether the op may go on.
func (b *ReferenceCPU) keep(err error) bool {
	if err != nil {
		b.failf("%w", err)
		return false
	}
	return true
}

// parallelFor runs body over [0, n) split into contiguous chunks, one per
// worker, when the work is large enough to be worth a goroutine.
func (b *ReferenceCPU) parallelFor(n, costPerItem int, body func(lo, hi int)) {
	w := b.workers
	if w > n {
		w = n
	}
	if w <= 1 || n*costPerItem < 1<<15 {
		body(0, n)
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := n*k/w, n*(k+1)/w
		wg.Add(1)
		go func() { defer wg.Done(); body(lo, hi) }()
	}
	wg.Wait()
}

// New allocates a zero-filled tensor.
func (b *ReferenceCPU) New(shape ...int) *Tensor {
	for _, d := range shape {
		if d < 0 {
			b.failf("new: negative dimension in %v", shape)
			return &Tensor{Shape: make([]int, len(shape)), Store: []float32{}}
		}
	}
	return &Tensor{Shape: append([]int(nil), shape...), Store: make([]float32, numel(shape))}
}

// Upload copies host values into t.
func (b *ReferenceCPU) Upload(t *Tensor, src []float32) {
	if !b.check("upload", t) {
		return
	}
	if len(src) != t.Numel() {
		b.failf("upload: %d values into tensor %v", len(src), t.Shape)
		return
	}
	copy(b.data(t), src)
}

// Download copies t into host memory.
func (b *ReferenceCPU) Download(t *Tensor, dst []float32) {
	if !b.check("download", t) {
		return
	}
	if len(dst) != t.Numel() {
		b.failf("download: tensor %v into %d values", t.Shape, len(dst))
		return
	}
	copy(dst, b.data(t))
}

// Zero sets t to 0.
func (b *ReferenceCPU) Zero(t *Tensor) {
	if b.check("zero", t) {
		clear(b.data(t))
	}
}

// Copy overwrites dst with src.
func (b *ReferenceCPU) Copy(dst, src *Tensor) {
	if b.check("copy", dst, src) && b.sameSize("copy", dst, src) {
		copy(b.data(dst), b.data(src))
	}
}

// Add accumulates dst += src.
func (b *ReferenceCPU) Add(dst, src *Tensor) {
	if !b.check("add", dst, src) || !b.sameSize("add", dst, src) {
		return
	}
	d, s := b.data(dst), b.data(src)
	for i := range d {
		d[i] += s[i]
	}
}

// Scale multiplies t by s.
func (b *ReferenceCPU) Scale(t *Tensor, s float32) {
	if !b.check("scale", t) {
		return
	}
	d := b.data(t)
	for i := range d {
		d[i] *= s
	}
}

// SumSquares returns Σ t² in float64.
func (b *ReferenceCPU) SumSquares(t *Tensor) float64 {
	if !b.check("sumsquares", t) {
		return 0
	}
	var s float64
	for _, v := range b.data(t) {
		s += float64(v) * float64(v)
	}
	return s
}

// transpose returns the (cols, rows) transpose of a (rows, cols) matrix.
func transpose(x []float32, rows, cols int) []float32 {
	out := make([]float32, len(x))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			out[j*rows+i] = x[i*cols+j]
		}
	}
	return out
}

// dot is Σ a[i]·b[i] accumulated in float64.
func dot(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i]) * float64(b[i])
		s1 += float64(a[i+1]) * float64(b[i+1])
		s2 += float64(a[i+2]) * float64(b[i+2])
		s3 += float64(a[i+3]) * float64(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// MatMul computes c = op(a)·op(b) or c += op(a)·op(b).
func (b *ReferenceCPU) MatMul(c, a, bm *Tensor, transA, transB, accumulate bool) {
	if !b.check("matmul", c, a, bm) {
		return
	}
	M, N, K, err := MatMulDims(c, a, bm, transA, transB)
	if !b.keep(err) {
		return
	}
	ar, ac := Matrix(a)
	br, bc := Matrix(bm)
	// Bring both operands to "rows over K" so every output is one contiguous dot.
	A := b.data(a)
	if transA {
		A = transpose(A, ar, ac)
	}
	B := b.data(bm)
	if !transB {
		B = transpose(B, br, bc)
	}
	C := b.data(c)
	const jBlock = 32 // keep a block of B's rows in cache while sweeping A's rows
	b.parallelFor(M, N*K, func(lo, hi int) {
		for j0 := 0; j0 < N; j0 += jBlock {
			j1 := min(j0+jBlock, N)
			for i := lo; i < hi; i++ {
				ai := A[i*K : (i+1)*K]
				ci := C[i*N : (i+1)*N]
				for j := j0; j < j1; j++ {
					v := float32(dot(ai, B[j*K:(j+1)*K]))
					if accumulate {
						ci[j] += v
					} else {
						ci[j] = v
					}
				}
			}
		}
	})
}

// checkEmbedding validates a lookup of ids in table (V, C) against rows (N, C).
func (b *ReferenceCPU) checkEmbedding(op string, rows, table *Tensor, ids []int32) (int, bool) {
	if !b.check(op, rows, table) {
		return 0, false
	}
	C, err := EmbeddingDims(op, rows, table, ids)
	return C, b.keep(err)
}

// Embedding overwrites out rows with table rows ids.
func (b *ReferenceCPU) Embedding(out, table *Tensor, ids []int32) {
	C, ok := b.checkEmbedding("embedding", out, table, ids)
	if !ok {
		return
	}
	o, tb := b.data(out), b.data(table)
	for i, id := range ids {
		copy(o[i*C:(i+1)*C], tb[int(id)*C:(int(id)+1)*C])
	}
}

// EmbeddingBackward accumulates dtable[ids[i]] += dout[i].
func (b *ReferenceCPU) EmbeddingBackward(dtable, dout *Tensor, ids []int32) {
	C, ok := b.checkEmbedding("embedding backward", dout, dtable, ids)
	if !ok {
		return
	}
	dt, d := b.data(dtable), b.data(dout)
	for i, id := range ids {
		row := dt[int(id)*C : (int(id)+1)*C]
		for j := range row {
			row[j] += d[i*C+j]
		}
	}
}

// rmsNormArgs validates RMSNorm's arguments (rstd may be nil) and returns
// the rows, the row width and the tensors' data (RS nil without rstd).
func (b *ReferenceCPU) rmsNormArgs(out, rstd, x, w *Tensor) (R, n int, X, O, W, RS []float32, ok bool) {
	ts := []*Tensor{out, x, w}
	if rstd != nil {
		ts = append(ts, rstd)
	}
	if !b.check("rmsnorm", ts...) {
		return
	}
	R, n, err := RMSNormDims(out, rstd, x, w)
	if !b.keep(err) {
		return
	}
	if rstd != nil {
		RS = b.data(rstd)
	}
	return R, n, b.data(x), b.data(out), b.data(w), RS, true
}

// RMSNorm normalizes rows of x over the last dimension.
func (b *ReferenceCPU) RMSNorm(out, rstd, x, w *Tensor, eps float32) {
	R, n, X, O, W, RS, ok := b.rmsNormArgs(out, rstd, x, w)
	if !ok {
		return
	}
	b.parallelFor(R, n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := X[r*n : (r+1)*n]
			rs := 1 / math.Sqrt(dot(row, row)/float64(n)+float64(eps))
			if RS != nil {
				RS[r] = float32(rs)
			}
			for j, v := range row {
				O[r*n+j] = float32(float64(v)*rs) * W[j]
			}
		}
	})
}

// RMSNormBackward overwrites dx and accumulates dw.
//
// With xhat = x·r, out = xhat ⊙ w and r = (mean x² + eps)^(−1/2):
// dx = r·(g − xhat·mean(g ⊙ xhat)) where g = dout ⊙ w, and dw += Σ dout ⊙ xhat.
func (b *ReferenceCPU) RMSNormBackward(dx, dw, dout, x, w, rstd *Tensor) {
	if !b.check("rmsnorm backward", dx, dw, dout, x, w, rstd) {
		return
	}
	b.rmsNormBackward(dx, dw, dout, x, w, rstd, nil)
}

// rmsNormBackward is RMSNormBackward that adds RES (when not nil) to each
// float32 element of dx (RMSNormBackwardAdd, cpu_fused.go).
func (b *ReferenceCPU) rmsNormBackward(dx, dw, dout, x, w, rstd *Tensor, RES []float32) {
	R, n, err := RMSNormBackwardDims(dx, dw, dout, x, w, rstd)
	if !b.keep(err) {
		return
	}
	X, DX, DO, W, DW, RS := b.data(x), b.data(dx), b.data(dout), b.data(w), b.data(dw), b.data(rstd)
	for r := 0; r < R; r++ {
		rs := float64(RS[r])
		var m float64
		for j := 0; j < n; j++ {
			m += float64(DO[r*n+j]) * float64(W[j]) * float64(X[r*n+j]) * rs
		}
		m /= float64(n)
		for j := 0; j < n; j++ {
			xhat := float64(X[r*n+j]) * rs
			g := float64(DO[r*n+j]) * float64(W[j])
			DX[r*n+j] = float32(rs * (g - xhat*m))
			if RES != nil {
				DX[r*n+j] += RES[r*n+j]
			}
			DW[j] += float32(float64(DO[r*n+j]) * xhat)
		}
	}
}

// RoPE rotates pairs (i, i+D/2) of every head by pos·theta^(−2i/D).
func (b *ReferenceCPU) RoPE(x *Tensor, pos []int32, theta float64, inverse bool) {
	if !b.check("rope", x) {
		return
	}
	N, H, D, err := RoPEDims(x, pos)
	if !b.keep(err) {
		return
	}
	half := D / 2
	X := b.data(x)
	sign := 1.0
	if inverse {
		sign = -1
	}
	invFreq := make([]float64, half)
	for i := range invFreq {
		invFreq[i] = math.Pow(theta, -2*float64(i)/float64(D))
	}
	for n := 0; n < N; n++ {
		for i := 0; i < half; i++ {
			ang := float64(pos[n]) * invFreq[i]
			c, s := math.Cos(ang), sign*math.Sin(ang)
			for h := 0; h < H; h++ {
				base := (n*H + h) * D
				x1, x2 := float64(X[base+i]), float64(X[base+i+half])
				X[base+i] = float32(x1*c - x2*s)
				X[base+i+half] = float32(x2*c + x1*s)
			}
		}
	}
}

// checkAttention validates attention shapes and segments.
func (b *ReferenceCPU) checkAttention(op string, out, q, k, v *Tensor, segs []Segment) (H, G, D int, ok bool) {
	H, G, D, err := AttentionDims(op, out, q, k, v, segs)
	return H, G, D, b.keep(err)
}

// attentionArgs validates Attention's arguments (lse may be nil) and
// returns the dimensions and the tensors' data (L nil without lse).
func (b *ReferenceCPU) attentionArgs(out, lse, q, k, v *Tensor, segs []Segment) (H, G, D int, Q, K, V, O, L []float32, ok bool) {
	ts := []*Tensor{out, q, k, v}
	if lse != nil {
		ts = append(ts, lse)
	}
	if !b.check("attention", ts...) {
		return
	}
	if H, G, D, ok = b.checkAttention("attention", out, q, k, v, segs); !ok {
		return
	}
	if lse != nil && lse.Numel() != q.Shape[0]*H {
		b.failf("attention: lse %v must hold (%d, %d)", lse.Shape, q.Shape[0], H)
		return H, G, D, nil, nil, nil, nil, nil, false
	}
	if lse != nil {
		L = b.data(lse)
	}
	return H, G, D, b.data(q), b.data(k), b.data(v), b.data(out), L, true
}

// AttentionBackwardData are AttentionBackward's tensors' data.
type AttentionBackwardData struct{ Q, K, V, O, DO, L, DQ, DK, DV []float32 }

// attentionBackwardArgs validates AttentionBackward's arguments and returns
// the dimensions and the data, dq, dk and dv cleared (rows outside every
// segment stay 0).
func (b *ReferenceCPU) attentionBackwardArgs(dq, dk, dv, dout, q, k, v, out, lse *Tensor, segs []Segment) (H, G, D int, t AttentionBackwardData, ok bool) {
	const op = "attention backward"
	if !b.check(op, dq, dk, dv, dout, q, k, v, out, lse) {
		return
	}
	if H, G, D, ok = b.checkAttention(op, out, q, k, v, segs); !ok {
		return
	}
	if !b.sameSize(op, dq, q, dout) || !b.sameSize(op, dk, k, dv) || lse.Numel() != q.Shape[0]*H {
		return H, G, D, t, false
	}
	t = AttentionBackwardData{Q: b.data(q), K: b.data(k), V: b.data(v), O: b.data(out), DO: b.data(dout), L: b.data(lse),
		DQ: b.data(dq), DK: b.data(dk), DV: b.data(dv)}
	clear(t.DQ)
	clear(t.DK)
	clear(t.DV)
	return H, G, D, t, true
}

// Attention computes causal GQA attention per segment.
func (b *ReferenceCPU) Attention(out, lse, q, k, v *Tensor, segs []Segment, scale float32) {
	H, G, D, Q, K, Vv, O, L, ok := b.attentionArgs(out, lse, q, k, v, segs)
	if !ok {
		return
	}
	groups := H / G
	// One work item per (segment, head); outputs are disjoint.
	b.parallelFor(len(segs)*H, 1<<12, func(lo, hi int) {
		scores := []float64{}
		acc := make([]float64, D)
		for it := lo; it < hi; it++ {
			s, h := segs[it/H], it%H
			g := h / groups
			for i := 0; i < s.QLen; i++ {
				qi := Q[((s.Q0+i)*H+h)*D:][:D]
				nk := s.KLen - s.QLen + i + 1
				scores = scores[:0]
				mx := math.Inf(-1)
				for j := 0; j < nk; j++ {
					sc := dot(qi, K[((s.K0+j)*G+g)*D:][:D]) * float64(scale)
					scores = append(scores, sc)
					mx = math.Max(mx, sc)
				}
				var sum float64
				clear(acc)
				for j, sc := range scores {
					p := math.Exp(sc - mx)
					sum += p
					vj := Vv[((s.K0+j)*G+g)*D:][:D]
					for d := range acc {
						acc[d] += p * float64(vj[d])
					}
				}
				oi := O[((s.Q0+i)*H+h)*D:][:D]
				for d := range oi {
					oi[d] = float32(acc[d] / sum)
				}
				if L != nil {
					L[(s.Q0+i)*H+h] = float32(mx + math.Log(sum))
				}
			}
		}
	})
}

// AttentionBackward recomputes the probabilities from the saved log-sum-exp
// (as flash attention does) and overwrites dq, dk, dv.
func (b *ReferenceCPU) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse *Tensor, segs []Segment, scale float32) {
	H, G, D, t, ok := b.attentionBackwardArgs(dq, dk, dv, dout, q, k, v, out, lse, segs)
	if !ok {
		return
	}
	Q, K, Vv, O, DO, L, DQ, DK, DV := t.Q, t.K, t.V, t.O, t.DO, t.L, t.DQ, t.DK, t.DV
	groups := H / G
	// Parallel over key/value heads: each owns disjoint columns of dk and dv,
	// and its query heads own disjoint columns of dq.
	b.parallelFor(G, 1<<15, func(lo, hi int) {
		dqAcc := make([]float64, D)
		for g := lo; g < hi; g++ {
			for _, s := range segs {
				for h := g * groups; h < (g+1)*groups; h++ {
					for i := 0; i < s.QLen; i++ {
						row := (s.Q0+i)*H + h
						qi, doi, oi := Q[row*D:][:D], DO[row*D:][:D], O[row*D:][:D]
						nk := s.KLen - s.QLen + i + 1
						l := float64(L[row])
						delta := dot(doi, oi) // Σ_j p_j (dout·v_j)
						clear(dqAcc)
						for j := 0; j < nk; j++ {
							kr := ((s.K0+j)*G + g) * D
							pj := math.Exp(dot(qi, K[kr:kr+D])*float64(scale) - l)
							ds := pj * (dot(doi, Vv[kr:kr+D]) - delta) * float64(scale)
							for d := 0; d < D; d++ {
								dqAcc[d] += ds * float64(K[kr+d])
								DK[kr+d] += float32(ds * float64(qi[d]))
								DV[kr+d] += float32(pj * float64(doi[d]))
							}
						}
						for d := 0; d < D; d++ {
							DQ[row*D+d] = float32(dqAcc[d])
						}
					}
				}
			}
		}
	})
}

// SwiGLU computes silu(gate) ⊙ up.
func (b *ReferenceCPU) SwiGLU(out, gate, up *Tensor) {
	if !b.check("swiglu", out, gate, up) || !b.sameSize("swiglu", out, gate, up) {
		return
	}
	O, Gt, U := b.data(out), b.data(gate), b.data(up)
	for i, g := range Gt {
		gf := float64(g)
		O[i] = float32(gf / (1 + math.Exp(-gf)) * float64(U[i]))
	}
}

// SwiGLUBackward: d silu(g)/dg = σ(g)·(1 + g·(1−σ(g))).
func (b *ReferenceCPU) SwiGLUBackward(dgate, dup, dout, gate, up *Tensor) {
	if !b.check("swiglu backward", dgate, dup, dout, gate, up) || !b.sameSize("swiglu backward", dgate, dup, dout, gate, up) {
		return
	}
	DG, DU, DO, Gt, U := b.data(dgate), b.data(dup), b.data(dout), b.data(gate), b.data(up)
	for i, g := range Gt {
		gf := float64(g)
		sig := 1 / (1 + math.Exp(-gf))
		d := float64(DO[i])
		DU[i] = float32(d * gf * sig)
		DG[i] = float32(d * float64(U[i]) * sig * (1 + gf*(1-sig)))
	}
}

// checkLSG validates log-softmax-gather shapes.
func (b *ReferenceCPU) checkLSG(op string, logits *Tensor, targets []int32, perRow ...*Tensor) (M, V int, ok bool) {
	M, V, err := LSGDims(op, logits, targets, perRow...)
	return M, V, b.keep(err)
}

// LogSoftmaxGather computes target log-probabilities, log-sum-exp and entropy.
func (b *ReferenceCPU) LogSoftmaxGather(logp, lse, entropy, logits *Tensor, targets []int32) {
	ts := []*Tensor{logp, lse, logits}
	if entropy != nil {
		ts = append(ts, entropy)
	}
	if !b.check("logsoftmax gather", ts...) {
		return
	}
	M, V, ok := b.checkLSG("logsoftmax gather", logits, targets, logp, lse, entropy)
	if !ok {
		return
	}
	X, LP, LS := b.data(logits), b.data(logp), b.data(lse)
	var E []float32
	if entropy != nil {
		E = b.data(entropy)
	}
	b.parallelFor(M, V, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			row := X[m*V : (m+1)*V]
			mx := math.Inf(-1)
			for _, x := range row {
				mx = math.Max(mx, float64(x))
			}
			var sum, sumPX float64
			for _, x := range row {
				e := math.Exp(float64(x) - mx)
				sum += e
				sumPX += e * float64(x)
			}
			l := mx + math.Log(sum)
			LS[m] = float32(l)
			LP[m] = float32(float64(row[targets[m]]) - l)
			if E != nil {
				E[m] = float32(l - sumPX/sum)
			}
		}
	})
}

// LogSoftmaxGatherBackward overwrites dlogits = dlogp·(onehot − softmax).
func (b *ReferenceCPU) LogSoftmaxGatherBackward(dlogits, dlogp, logits, lse *Tensor, targets []int32) {
	if !b.check("logsoftmax gather backward", dlogits, dlogp, logits, lse) || !b.sameSize("logsoftmax gather backward", dlogits, logits) {
		return
	}
	M, V, ok := b.checkLSG("logsoftmax gather backward", logits, targets, dlogp, lse)
	if !ok {
		return
	}
	X, DX, DL, LS := b.data(logits), b.data(dlogits), b.data(dlogp), b.data(lse)
	b.parallelFor(M, V, func(lo, hi int) {
		for m := lo; m < hi; m++ {
			g, l := float64(DL[m]), float64(LS[m])
			for v := 0; v < V; v++ {
				DX[m*V+v] = float32(-g * math.Exp(float64(X[m*V+v])-l))
			}
			DX[m*V+int(targets[m])] += float32(g)
		}
	})
}

// rowsCheck validates row-index ops (see RowsDims).
func (b *ReferenceCPU) rowsCheck(op string, indexed, counted *Tensor, idx []int32) (int, bool) {
	w, err := RowsDims(op, indexed, counted, idx)
	return w, b.keep(err)
}

// GatherRows overwrites dst[i] = src[idx[i]].
func (b *ReferenceCPU) GatherRows(dst, src *Tensor, idx []int32) {
	if !b.check("gather rows", dst, src) {
		return
	}
	c, ok := b.rowsCheck("gather rows", src, dst, idx)
	if !ok {
		return
	}
	D, S := b.data(dst), b.data(src)
	for i, r := range idx {
		copy(D[i*c:(i+1)*c], S[int(r)*c:(int(r)+1)*c])
	}
}

// ScatterRows writes (or accumulates) dst[idx[i]] = src[i].
func (b *ReferenceCPU) ScatterRows(dst, src *Tensor, idx []int32, accumulate bool) {
	if !b.check("scatter rows", dst, src) {
		return
	}
	c, ok := b.rowsCheck("scatter rows", dst, src, idx)
	if !ok {
		return
	}
	D, S := b.data(dst), b.data(src)
	for i, r := range idx {
		row := D[int(r)*c : (int(r)+1)*c]
		if !accumulate {
			copy(row, S[i*c:(i+1)*c])
			continue
		}
		for j := range row {
			row[j] += S[i*c+j]
		}
	}
}

// AdamW applies one decoupled-weight-decay Adam step (Loshchilov & Hutter),
// in the same order as torch.optim.AdamW: decay, then the bias-corrected step.
func (b *ReferenceCPU) AdamW(p, g, m, v *Tensor, h AdamWParams) {
	if !b.check("adamw", p, g, m, v) || !b.keep(AdamWCheck(p, g, m, v, h)) {
		return
	}
	P, Gr, Mm, Vv := b.data(p), b.data(g), b.data(m), b.data(v)
	bc1 := 1 - math.Pow(h.Beta1, float64(h.Step))
	bc2 := 1 - math.Pow(h.Beta2, float64(h.Step))
	s := h.Scale()
	for i := range P {
		gi := float64(Gr[i] * s) // the float32 product Scale would have stored
		mi := h.Beta1*float64(Mm[i]) + (1-h.Beta1)*gi
		vi := h.Beta2*float64(Vv[i]) + (1-h.Beta2)*gi*gi
		Mm[i], Vv[i] = float32(mi), float32(vi)
		pi := float64(P[i]) * (1 - h.LR*h.WeightDecay)
		pi -= h.LR * (mi / bc1) / (math.Sqrt(vi/bc2) + h.Eps)
		P[i] = float32(pi)
	}
}

// AddCols accumulates src into columns [col0, col0+w) of dst.
func (b *ReferenceCPU) AddCols(dst, src *Tensor, col0 int) {
	if !b.check("add cols", dst, src) {
		return
	}
	R, W, w, err := ColsDims("add cols", dst, src, col0)
	if !b.keep(err) {
		return
	}
	d, s := b.data(dst), b.data(src)
	for r := range R {
		for j := range w {
			d[r*W+col0+j] += s[r*w+j]
		}
	}
}

// CopyCols overwrites dst with columns [col0, col0+w) of src.
func (b *ReferenceCPU) CopyCols(dst, src *Tensor, col0 int) {
	if !b.check("copy cols", dst, src) {
		return
	}
	R, W, w, err := ColsDims("copy cols", src, dst, col0)
	if !b.keep(err) {
		return
	}
	d, s := b.data(dst), b.data(src)
	for r := range R {
		copy(d[r*w:(r+1)*w], s[r*W+col0:r*W+col0+w])
	}
}
