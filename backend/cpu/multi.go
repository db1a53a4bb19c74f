package cpu

// The trainer's value-preserving capabilities (model.MultiTensorOptimizer,
// model.TokenLossGrader): the same numbers as the fallback the callers take
// without them, so that the conformance suite (model/backendtest: multi.go,
// tokenloss.go) runs them on the CPU too and the CPU is the reference the
// CUDA kernels are held to. What they save here is not a launch or a
// download but the per-tensor fork and join: a model has hundreds of
// tensors, most of them too small to be split over workers alone, so the
// whole list is split at once.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gdrotrain/gdrotrain/model"
)

var (
	_ model.MultiTensorOptimizer = (*Backend)(nil)
	_ model.TokenLossGrader      = (*Backend)(nil)
)

// piece is elements [lo, hi) of tensor i of a list.
type piece struct{ i, lo, hi int }

// pieces splits the concatenation of ts into the parts of elements
// [lo, hi) that fall in each tensor, in order.
func pieces(ts []*model.Tensor, lo, hi int) []piece {
	var out []piece
	start := 0
	for i, t := range ts {
		n := t.Numel()
		a, z := max(lo, start), min(hi, start+n)
		if a < z {
			out = append(out, piece{i, a - start, z - start})
		}
		start += n
	}
	return out
}

// total is the number of elements of ts.
func total(ts []*model.Tensor) int {
	n := 0
	for _, t := range ts {
		n += t.Numel()
	}
	return n
}

// AdamWAll applies AdamW to every (ps[i], gs[i], ms[i], vs[i]): the
// reference's per-element update (AdamW's), over the concatenated elements
// split once over the workers, so bit for bit AdamW on each tensor in turn.
// A bad argument anywhere records an error and updates nothing.
func (b *Backend) AdamWAll(ps, gs, ms, vs []*model.Tensor, h model.AdamWParams) {
	if len(gs) != len(ps) || len(ms) != len(ps) || len(vs) != len(ps) {
		b.Keep(fmt.Errorf("adamw all: %d parameters, %d gradients, %d first and %d second moments", len(ps), len(gs), len(ms), len(vs)))
		return
	}
	for i := range ps {
		if !b.Check("adamw all", ps[i], gs[i], ms[i], vs[i]) || !b.Keep(model.AdamWCheck(ps[i], gs[i], ms[i], vs[i], h)) {
			return
		}
	}
	b.ParallelFor(total(ps), 16, func(lo, hi int) {
		for _, c := range pieces(ps, lo, hi) {
			n := ps[c.i].Numel()
			row := func(t *model.Tensor) *model.Tensor { return t.View(n).Rows(c.lo, c.hi) }
			b.ReferenceCPU.AdamW(row(ps[c.i]), row(gs[c.i]), row(ms[c.i]), row(vs[c.i]), h)
		}
	})
}

// ZeroAll clears every tensor of ts.
func (b *Backend) ZeroAll(ts []*model.Tensor) {
	if !b.Check("zero all", ts...) {
		return
	}
	b.ParallelFor(total(ts), 1, func(lo, hi int) {
		for _, c := range pieces(ts, lo, hi) {
			clear(b.Data(ts[c.i])[c.lo:c.hi])
		}
	})
}

// SumSquaresAll is Σ_t SumSquares(t) added in list order: each tensor's
// sum is SumSquares's own loop (one worker takes a whole tensor), and the
// sums are added in order afterwards, so the result does not depend on the
// workers.
func (b *Backend) SumSquaresAll(ts []*model.Tensor) float64 {
	if !b.Check("sumsquares all", ts...) {
		return 0
	}
	sums := make([]float64, len(ts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(b.Workers(), len(ts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(ts); i = int(next.Add(1)) - 1 {
				sums[i] = b.SumSquares(ts[i])
			}
		}()
	}
	wg.Wait()
	var s float64
	for _, x := range sums {
		s += x
	}
	return s
}

// TokenLossGrad writes dl[i] = l.Grad(lo+i, logp[i]) for i < hi−lo: the
// host's derivative (the fallback computes it on a downloaded copy; here
// the copy is the tensor itself), rows split over the workers. A row range
// outside the loss records an error.
func (b *Backend) TokenLossGrad(dl, logp *model.Tensor, l *model.TokenLoss, lo, hi int) {
	if !b.Check("token loss gradient", dl, logp) {
		return
	}
	n := hi - lo
	if n < 0 || dl.Numel() != n || logp.Numel() != n || lo < 0 || hi > len(l.Old) {
		b.Keep(fmt.Errorf("token loss gradient: rows %d..%d of a loss over %d target rows, into %v from %v", lo, hi, len(l.Old), dl.Shape, logp.Shape))
		return
	}
	d, x := b.Data(dl), b.Data(logp)
	b.ParallelFor(n, 64, func(a, z int) {
		for i := a; i < z; i++ {
			d[i] = l.Grad(lo+i, x[i])
		}
	})
}
