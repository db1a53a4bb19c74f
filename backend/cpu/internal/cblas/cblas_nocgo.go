//go:build !cgo

package cblas

// Lib is a loaded CBLAS library; without cgo none can be loaded.
type Lib struct{ Path, Config, Core, Note string }

func open(name string) (*Lib, error) {
	return nil, errNoCgo
}

// SetThreads does nothing without cgo.
func (l *Lib) SetThreads(n int) bool { return false }

// Threads returns 0 without cgo.
func (l *Lib) Threads() int { return 0 }

// Sgemm is never reached without cgo (Open fails).
func (l *Lib) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int) {
	panic("cblas: built without cgo")
}
