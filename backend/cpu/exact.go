package cpu

// Batch-invariant products for precision.exact_logprobs (docs/algorithm.md
// §5.10). OpenBLAS picks its kernels and blocking by shape, and gemm
// itself sends small products to gemmGo: so a row's logits depend on how
// many rows share the product, and a token's log-probability differs in
// the last bits between the sampler's decode (one row per sequence, a KV
// cache) and the training forward (packed rows). In exact mode every
// element of every product is one dot product over K in a fixed order
// (dotFixed), whatever the shape, the transposes, the split over workers
// or the rows that share it. Attention's two products go through the same
// path: its score rows are then the same in decode and in training, and
// its P·v sums the causal keys in the same lanes, the keys a training
// block computes beyond a row's last (their probabilities cleared to 0)
// adding exact zeros.
//
// Every other op on the path from a token to its log-probability (RMSNorm,
// the fused residual norm, SplitQKV's norm and RoPE, SwiGLU, the softmax
// of attention, the LM head's log-softmax) already computes each row from
// that row alone in a fixed order.

import "github.com/gdrotrain/gdrotrain/model"

// SetBatchInvariant turns exact mode on or off (model.BatchInvariant).
func (b *Backend) SetBatchInvariant(on bool) { b.exact = on }

var _ model.BatchInvariant = (*Backend)(nil)

// dotLanes is the number of partial sums of dotFixed.
const dotLanes = 8

// dotFixed is Σ a[i]·b[i] in float32 with term i added to lane i mod 8,
// lanes combined in one fixed tree. The partition depends on the index
// alone, never on the length, so trailing zero terms (attention's cleared
// probabilities) leave the sum's bits unchanged (an accumulator that
// starts at +0 never becomes −0 in round-to-nearest). The explicit
// float32 conversions forbid the compiler to fuse a multiply and an add
// (the Go spec's rule), on every architecture.
func dotFixed(a, b []float32) float32 {
	b = b[:len(a)]
	var s [dotLanes]float32
	i := 0
	for ; i+dotLanes <= len(a); i += dotLanes {
		s[0] += float32(a[i] * b[i])
		s[1] += float32(a[i+1] * b[i+1])
		s[2] += float32(a[i+2] * b[i+2])
		s[3] += float32(a[i+3] * b[i+3])
		s[4] += float32(a[i+4] * b[i+4])
		s[5] += float32(a[i+5] * b[i+5])
		s[6] += float32(a[i+6] * b[i+6])
		s[7] += float32(a[i+7] * b[i+7])
	}
	for j := 0; i < len(a); i, j = i+1, j+1 {
		s[j] += float32(a[i] * b[i])
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

// gemmExact is gemm in exact mode: c[i,j] = alpha·dotFixed(op(a)[i,:],
// op(b)[:,j]) (+ beta·c[i,j], added after the dot). Strided operands are
// first copied into contiguous K-vectors (copies are exact). With split,
// the elements are shared over the workers; each is computed alone.
func (b *Backend) gemmExact(split, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	bm []float32, ldb int, beta float32, c []float32, ldc int) {
	rowsA := kVectors(!tA, m, k, a, lda)
	colsB := kVectors(tB, n, k, bm, ldb)
	body := func(lo, hi int) {
		for e := lo; e < hi; e++ {
			i, j := e/n, e%n
			d := dotFixed(rowsA(i), colsB(j))
			if alpha != 1 {
				d *= alpha
			}
			ci := &c[i*ldc+j]
			switch beta {
			case 0:
				*ci = d
			case 1:
				*ci += d
			default:
				*ci = float32(beta**ci) + d
			}
		}
	}
	if !split {
		body(0, m*n)
		return
	}
	b.ParallelFor(m*n, k, body)
}

// kVectors returns the function giving vector r (of count, each k long)
// of a matrix x with leading dimension ld: row r when rowMajor (the
// vectors are x's rows), else column r, copied once into a packed block.
func kVectors(rowMajor bool, count, k int, x []float32, ld int) func(r int) []float32 {
	if rowMajor {
		return func(r int) []float32 { return x[r*ld : r*ld+k] }
	}
	packed := make([]float32, count*k)
	for p := 0; p < k; p++ {
		row := x[p*ld : p*ld+count]
		for r, v := range row {
			packed[r*k+p] = v
		}
	}
	return func(r int) []float32 { return packed[r*k : (r+1)*k] }
}
