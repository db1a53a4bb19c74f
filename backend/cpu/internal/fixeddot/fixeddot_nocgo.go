//go:build !cgo

package fixeddot

// kernels lists the kernels this build can run: Go alone.
func kernels() []kernel { return []kernel{kernelGo} }

// dotsWith is DotsGo, the one kernel without cgo.
func dotsWith(_ kernel, out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	DotsGo(out, ldo, a, lda, rows, b, ldb, cols, k)
}
