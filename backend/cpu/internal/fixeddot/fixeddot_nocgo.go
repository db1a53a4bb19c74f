//go:build !cgo

package fixeddot

// kernels lists the kernels this build can run: Go alone.
func kernels() []kernel { return []kernel{kernelGo} }

// dotsWith is dotsGo, the one kernel without cgo.
func dotsWith(_ kernel, colB bool, out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	dotsGo(colB, out, ldo, a, lda, rows, b, ldb, cols, k)
}
