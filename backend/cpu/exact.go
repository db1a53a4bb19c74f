package cpu

// Batch-invariant products for precision.exact_logprobs (docs/algorithm.md
// §5.10). OpenBLAS picks its kernels and blocking by shape, and gemm
// itself sends small products to gemmGo: so a row's logits depend on how
// many rows share the product, and a token's log-probability differs in
// the last bits between the sampler's decode (one row per sequence, a KV
// cache) and the training forward (packed rows). In exact mode every
// element of every product is one dot product over K in a fixed order
// (fixeddot.Dot), whatever the shape, the transposes, the split over workers
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

import (
	"github.com/gdrotrain/gdrotrain/backend/cpu/internal/fixeddot"
	"github.com/gdrotrain/gdrotrain/model"
)

// SetBatchInvariant turns exact mode on or off (model.BatchInvariant).
func (b *Backend) SetBatchInvariant(on bool) { b.exact = on }

// IsBatchInvariant reports whether exact mode is on (model.BatchInvariant).
func (b *Backend) IsBatchInvariant() bool { return b.exact }

var _ model.BatchInvariant = (*Backend)(nil)

// The exact product's work items: blocks of op(a)'s rows by op(b)'s
// columns, sized by K so that a block of op(a) (≈256 KB) stays in the L2
// cache while the block's columns (≈192 KB) stream past it, a few columns
// at a time from L1 (fixeddot's tiles). Blocks run in row-major order, so
// consecutive blocks of one worker share their rows. Blocks only group
// independent dots: they change no element's bits.
const (
	exactBlockA = 64 << 10 // floats of op(a) in a block
	exactBlockB = 48 << 10 // floats of op(b) in a block
)

// exactBlock returns the rows and columns of a block for K = k: whole
// tiles of fixeddot's AVX kernel (4 rows, 3 columns), at least one.
func exactBlock(k int) (rows, cols int) {
	k = max(k, 1)
	rows = min(max(exactBlockA/k/4*4, 4), 256)
	cols = min(max(exactBlockB/k/3*3, 3), 384)
	return rows, cols
}

// gemmExact is gemm in exact mode: c[i,j] = alpha·Dot(op(a)[i,:],
// op(b)[:,j]) (+ beta·c[i,j], added after the dot), each Dot in
// fixeddot's fixed order (C where cgo is on, the same bits in Go
// otherwise). Strided K-vectors are copied into contiguous ones (copies
// are exact), except op(b)'s for a product of fewer than exactPackRows
// rows: DotsN reads those in place (a decode step's P·v would pack all of
// v for one query). With split, the blocks are shared over the workers.
func (b *Backend) gemmExact(split, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	bm []float32, ldb int, beta float32, c []float32, ldc int) {
	av, la, pa := b.kVectors(!tA, m, k, a, lda)
	inPlace := !tB && m < exactPackRows
	bv, lb, pb := bm, ldb, (*[]float32)(nil)
	if !inPlace {
		bv, lb, pb = b.kVectors(tB, n, k, bm, ldb)
	}
	// dots is fixeddot.Dots on op(b)'s columns j0 … as rows of bv, or
	// DotsN on them as bm's columns.
	dots := func(out []float32, ldo int, a []float32, rows, j0, cols int) {
		if inPlace {
			fixeddot.DotsN(out, ldo, a, la, rows, bm[j0:], ldb, cols, k)
		} else {
			fixeddot.Dots(out, ldo, a, la, rows, bv[j0*lb:], lb, cols, k)
		}
	}
	br, bc := exactBlock(k)
	rb, cb := (m+br-1)/br, (n+bc-1)/bc
	body := func(lo, hi int) {
		if alpha == 1 && beta == 0 {
			// The dots are c's elements: written in place.
			for it := lo; it < hi; it++ {
				i0, j0 := it/cb*br, it%cb*bc
				rows, cols := min(br, m-i0), min(bc, n-j0)
				dots(c[i0*ldc+j0:], ldc, av[i0*la:], rows, j0, cols)
			}
			return
		}
		p, tmp := b.buf(br * bc)
		defer b.put(p)
		for it := lo; it < hi; it++ {
			i0, j0 := it/cb*br, it%cb*bc
			rows, cols := min(br, m-i0), min(bc, n-j0)
			dots(tmp, cols, av[i0*la:], rows, j0, cols)
			for i := 0; i < rows; i++ {
				ci := c[(i0+i)*ldc+j0 : (i0+i)*ldc+j0+cols]
				for j, d := range tmp[i*cols : (i+1)*cols] {
					if alpha != 1 {
						d *= alpha
					}
					switch beta {
					case 0:
						ci[j] = d
					case 1:
						ci[j] += d
					default:
						ci[j] = float32(beta*ci[j]) + d
					}
				}
			}
		}
	}
	if !split {
		body(0, rb*cb)
	} else {
		b.ParallelFor(rb*cb, br*bc*k, body)
	}
	for _, p := range []*[]float32{pa, pb} {
		if p != nil {
			b.put(p)
		}
	}
}

// exactPackRows: from this many rows of op(a) on, packing op(b)'s strided
// K-vectors once costs less than DotsN's strided reads for every row
// (BenchmarkAttentionExact: DotsN made a decode step's attention 4× faster
// and training's 2× slower).
const exactPackRows = 8

// kVectorsBlock is the number of a column's terms kVectors copies at once:
// the block's source rows stay in L1 while every column takes its terms.
const kVectorsBlock = 16

// kVectors returns count vectors of length k of a matrix x with leading
// dimension ld, as a matrix of rows and its leading dimension: x itself
// when rowMajor (the vectors are x's rows), else x's columns copied into a
// packed block from the scratch pool, returned third to be put back (nil
// for x itself).
func (b *Backend) kVectors(rowMajor bool, count, k int, x []float32, ld int) ([]float32, int, *[]float32) {
	if rowMajor {
		return x, ld, nil
	}
	p, packed := b.buf(count * k)
	for p0 := 0; p0 < k; p0 += kVectorsBlock {
		p1 := min(p0+kVectorsBlock, k)
		for r := 0; r < count; r++ {
			dst := packed[r*k+p0 : r*k+p1]
			for q := range dst {
				dst[q] = x[(p0+q)*ld+r]
			}
		}
	}
	return packed, k, p
}
