// Package fixeddot computes float32 dot products in one fixed order, the
// same bits with and without cgo, whatever the length or the rows and
// columns computed together: the products of the CPU backend's exact mode
// (precision.exact_logprobs, docs/algorithm.md §5.10). Term i of a dot is
// added to lane i mod 8 by a multiply then an add, each rounded (no fused
// multiply-add), and the lanes are combined in one fixed tree. With cgo a
// C kernel computes it: AVX where the CPU has it (the eight lanes are one
// ymm register, a tile of 4 rows by 3 columns at once), else a portable C
// loop (SSE on x86-64); without cgo, DotsGo. Every kernel gives DotsGo's
// bits (TestKernelsMatch).
package fixeddot

// Lanes is the number of partial sums of a dot.
const Lanes = 8

// kernel names one implementation of Dots.
type kernel int

const (
	kernelGo  kernel = iota // DotsGo
	kernelSSE               // the portable C loop
	kernelAVX               // the AVX intrinsics, 4×3 tiles
)

func (k kernel) String() string {
	return [...]string{"go", "sse", "avx"}[k]
}

// best is the kernel Dots uses: the last of kernels(), the fastest this
// machine runs. Tests call dotsWith with each.
var best = func() kernel { ks := kernels(); return ks[len(ks)-1] }()

// Dots overwrites out[i·ldo+j] = Dot(a[i·lda:][:k], b[j·ldb:][:k]) for
// i < rows, j < cols, with the fastest kernel (DotsGo's bits).
func Dots(out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	dotsWith(best, false, out, ldo, a, lda, rows, b, ldb, cols, k)
}

// DotsN is Dots with b's vectors as columns: out[i·ldo+j] = Dot(a[i·lda:][:k],
// (b[j], b[ldb+j], …, b[(k−1)·ldb+j])), b a row-major k×cols matrix. The
// kernels read it in place (a vector of eight columns per term), so a
// product whose K-vectors are columns needs no packing; same bits.
func DotsN(out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	dotsWith(best, true, out, ldo, a, lda, rows, b, ldb, cols, k)
}

// Dot is Σ a[i]·b[i] in the fixed order (b at least as long as a). The
// partition depends on the index alone, never on the length, so trailing
// zero terms leave the sum's bits unchanged (an accumulator that starts at
// +0 never becomes −0 in round-to-nearest). The explicit float32
// conversions forbid the compiler to fuse a multiply and an add (the Go
// spec's rule), on every architecture.
//
// The lanes are eight variables, not an array, so that the compiler keeps
// them in registers. A tail shorter than the lanes adds its products to
// the first lanes and +0 to the others, which leaves them unchanged (they
// are never −0).
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+Lanes <= len(a); i += Lanes {
		x, y := a[i:i+Lanes:i+Lanes], b[i:i+Lanes:i+Lanes]
		s0 += float32(x[0] * y[0])
		s1 += float32(x[1] * y[1])
		s2 += float32(x[2] * y[2])
		s3 += float32(x[3] * y[3])
		s4 += float32(x[4] * y[4])
		s5 += float32(x[5] * y[5])
		s6 += float32(x[6] * y[6])
		s7 += float32(x[7] * y[7])
	}
	if i < len(a) {
		var p [Lanes]float32
		for j, x := range a[i:] {
			p[j] = float32(x * b[i+j])
		}
		s0 += p[0]
		s1 += p[1]
		s2 += p[2]
		s3 += p[3]
		s4 += p[4]
		s5 += p[5]
		s6 += p[6]
		s7 += p[7]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// dotsGo is DotsGo (colB false) or DotsN's Go kernel (colB true).
func dotsGo(colB bool, out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	if !colB {
		DotsGo(out, ldo, a, lda, rows, b, ldb, cols, k)
		return
	}
	col := make([]float32, k)
	for j := 0; j < cols; j++ {
		for p := range col {
			col[p] = b[p*ldb+j]
		}
		for i := 0; i < rows; i++ {
			out[i*ldo+j] = Dot(a[i*lda:i*lda+k], col)
		}
	}
}

// DotsGo overwrites out[i·ldo+j] = Dot(a[i·lda:][:k], b[j·ldb:][:k]) for
// i < rows, j < cols.
func DotsGo(out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	for j := 0; j < cols; j++ {
		bj := b[j*ldb : j*ldb+k]
		for i := 0; i < rows; i++ {
			out[i*ldo+j] = Dot(a[i*lda:i*lda+k], bj)
		}
	}
}
