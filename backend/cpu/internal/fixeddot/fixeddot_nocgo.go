//go:build !cgo

package fixeddot

// Dots is DotsGo.
func Dots(out []float32, ldo int, a []float32, lda, rows int, b []float32, ldb, cols, k int) {
	DotsGo(out, ldo, a, lda, rows, b, ldb, cols, k)
}
