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
	dotsWith(best, out, ldo, a, lda, rows, b, ldb, cols, k)
}

// Dot is Σ a[i]·b[i] in the fixed order (b at least as long as a). The
// partition depends on the index alone, never on the length, so trailing
// zero terms leave the sum's bits unchanged (an accumulator that starts at
// +0 never becomes −0 in round-to-nearest). The explicit float32
// conversions forbid the compiler to fuse a multiply and an add (the Go
// spec's rule), on every architecture.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s [Lanes]float32
	i := 0
	for ; i+Lanes <= len(a); i += Lanes {
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
