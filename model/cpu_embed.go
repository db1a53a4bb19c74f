package model

// What a backend that embeds the reference needs from it (backend/cpu, the
// fast CPU backend, which replaces the hot ops and keeps the rest): the
// reference's argument checks, error recording and worker pool, so that the
// two check arguments, fail and split work alike. None of this is part of
// the Backend interface.

import "fmt"

// NewReferenceCPUWorkers returns the reference backend splitting rows over
// w workers (NewReferenceCPU uses every available core).
func NewReferenceCPUWorkers(w int) *ReferenceCPU { return &ReferenceCPU{workers: w} }

// Workers is the number of goroutines the backend splits rows over.
func (b *ReferenceCPU) Workers() int { return b.workers }

// Data returns t's elements as a slice of the backing array (t must have
// passed Check).
func (b *ReferenceCPU) Data(t *Tensor) []float32 { return b.data(t) }

// Check reports whether no error has been recorded and every tensor is a
// CPU tensor within its storage; otherwise it records the first problem.
func (b *ReferenceCPU) Check(op string, ts ...*Tensor) bool { return b.check(op, ts...) }

// Keep records err, if any, and reports whether the op may go on.
func (b *ReferenceCPU) Keep(err error) bool { return b.keep(err) }

// releasedStore is the storage of a CPU tensor given back to a pool
// (backend/cpu's MemoryPool): every op refuses it, naming the release.
type releasedStore struct{}

// Unstore takes t's storage for a pool and marks t released, so that a
// later use or a second release is an error rather than a read of memory
// the pool has handed out again. It fails on a tensor already released or
// not on the CPU. Views of t made before keep the storage: like a CUDA
// buffer's, their use after the release is the caller's bug.
func (b *ReferenceCPU) Unstore(t *Tensor) ([]float32, error) {
	switch s := t.Store.(type) {
	case releasedStore:
		return nil, fmt.Errorf("release: tensor %v was already released", t.Shape)
	case []float32:
		t.Store = releasedStore{}
		return s, nil
	default:
		return nil, fmt.Errorf("release: tensor %v is not a CPU tensor", t.Shape)
	}
}

// ParallelFor runs body over [0, n) split into contiguous chunks, one per
// worker, when n·costPerItem is large enough to be worth a goroutine.
func (b *ReferenceCPU) ParallelFor(n, costPerItem int, body func(lo, hi int)) {
	b.parallelFor(n, costPerItem, body)
}

// RMSNormArgs validates RMSNorm's arguments (rstd may be nil) and returns
// the rows, the row width and the tensors' data (RS nil without rstd).
func (b *ReferenceCPU) RMSNormArgs(out, rstd, x, w *Tensor) (R, n int, X, O, W, RS []float32, ok bool) {
	return b.rmsNormArgs(out, rstd, x, w)
}

// AttentionArgs validates Attention's arguments (lse may be nil) and
// returns the dimensions and the tensors' data (L nil without lse).
func (b *ReferenceCPU) AttentionArgs(out, lse, q, k, v *Tensor, segs []Segment) (H, G, D int, Q, K, V, O, L []float32, ok bool) {
	return b.attentionArgs(out, lse, q, k, v, segs)
}

// AttentionBackwardArgs validates AttentionBackward's arguments and returns
// the dimensions and the data, dq, dk and dv cleared (rows outside every
// segment stay 0).
func (b *ReferenceCPU) AttentionBackwardArgs(dq, dk, dv, dout, q, k, v, out, lse *Tensor, segs []Segment) (H, G, D int, t AttentionBackwardData, ok bool) {
	return b.attentionBackwardArgs(dq, dk, dv, dout, q, k, v, out, lse, segs)
}
