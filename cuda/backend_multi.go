package cuda

// Multi-tensor kernels (apex's multi_tensor_apply): AdamW, the gradient
// norm's sum of squares and gradient clearing over every parameter tensor
// in one launch each, instead of one per tensor (≈ 310 tensors a step for
// Qwen3-1.7B). A table of pointers and sizes goes to the device with the
// launch (one staged asynchronous copy, no host wait); each tensor gets the
// blocks its per-tensor kernel would launch, and each of its blocks runs
// that kernel's grid-stride loop (kernels/elementwise.cu, mt_tensor), so
// the results are bitwise those of the per-tensor kernels.

import (
	"math"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

var _ model.MultiTensorOptimizer = (*Backend)(nil)

// multiTable is a multi-tensor launch's table on the device: blk (the
// prefix of the tensors' block counts, T+1 words) then W words a tensor.
type multiTable struct {
	buf     *buffer
	blk     uint64 // device address of blk
	tab     uint64 // device address of the rows
	tensors int32
	blocks  int
}

// uploadMulti uploads the table of rows (W words each) with blocks[i]
// blocks for row i; the caller frees t.buf after its launch (the pool is
// stream-ordered).
func (b *Backend) uploadMulti(rows [][]uint64, blocks []int) (multiTable, bool) {
	T := len(rows)
	host := make([]uint64, 0, T+1+T*6)
	total := 0
	host = append(host, 0)
	for _, nb := range blocks {
		total += nb
		host = append(host, uint64(total))
	}
	for _, r := range rows {
		host = append(host, r...)
	}
	buf, err := b.alloc(2 * len(host))
	if !b.keep(err) {
		return multiTable{}, false
	}
	if !b.keep(b.d.copyIn(buf.ptr, unsafe.Pointer(&host[0]), int64(8*len(host)))) {
		b.free(buf)
		return multiTable{}, false
	}
	return multiTable{buf: buf, blk: buf.ptr, tab: buf.ptr + uint64(8*(T+1)), tensors: int32(T), blocks: total}, true
}

// capturing says whether ops are being recorded into a graph, where a copy
// from Go memory cannot go: the multi-tensor ops fall back to one launch a
// tensor there.
func (b *Backend) capturing() bool { return b.gr != nil || b.d.rec != nil }

// elementwiseBlocks is elementwise's grid for n elements.
func elementwiseBlocks(n int) int { return min((n+255)/256, 1<<16) }

// AdamWAll is AdamW on each (ps[i], gs[i], ms[i], vs[i]) in one launch.
func (b *Backend) AdamWAll(ps, gs, ms, vs []*model.Tensor, h model.AdamWParams) {
	if len(ps) <= 1 || b.capturing() {
		for i := range ps {
			b.AdamW(ps[i], gs[i], ms[i], vs[i], h)
		}
		return
	}
	var rows [][]uint64
	var blocks []int
	var fresh []*model.Tensor // the weights whose bf16 copies the launch writes
	for i, p := range ps {
		ptr, ok := b.ptrs("adamw", p, gs[i], ms[i], vs[i])
		if !ok || !b.keep(model.AdamWCheck(p, gs[i], ms[i], vs[i], h)) {
			return
		}
		// As in AdamW: a row view writes its part of its buffer's copy.
		var p16 uint64
		if buf := p.Store.(*buffer); buf.shadow != nil {
			p16 = buf.shadow.ptr + 2*uint64(p.Off)
			b.kernelCost(0, 2*p.Numel())
			fresh = append(fresh, p)
		}
		b.kernelCost(12*p.Numel(), 4*7*p.Numel())
		if n := p.Numel(); n > 0 {
			rows = append(rows, []uint64{ptr[0], p16, ptr[1], ptr[2], ptr[3], uint64(n)})
			blocks = append(blocks, elementwiseBlocks(n))
		}
	}
	if len(rows) == 0 {
		return
	}
	t, ok := b.uploadMulti(rows, blocks)
	if !ok {
		return
	}
	defer b.free(t.buf)
	bc1 := 1 - math.Pow(h.Beta1, float64(h.Step))
	bc2 := 1 - math.Pow(h.Beta2, float64(h.Step))
	b.launch("adamw_multi", [3]int{t.blocks}, 256, t.tab, t.blk, t.tensors, h.Scale(),
		h.Beta1, h.Beta2, h.LR, h.WeightDecay, h.Eps, bc1, bc2)
	for _, p := range fresh {
		b.markFresh(p.Store.(*buffer), p.Off, p.Off+p.Numel())
	}
}

// ZeroAll is Zero on each tensor in one launch.
func (b *Backend) ZeroAll(ts []*model.Tensor) {
	if len(ts) <= 1 || b.capturing() {
		for _, t := range ts {
			b.Zero(t)
		}
		return
	}
	var rows [][]uint64
	var blocks []int
	for _, t := range ts {
		p, ok := b.ptrs("zero", t)
		if !ok {
			return
		}
		if n := t.Numel(); n > 0 {
			b.kernelCost(0, 4*n)
			rows = append(rows, []uint64{p[0], uint64(n)})
			blocks = append(blocks, elementwiseBlocks(n))
		}
	}
	if len(rows) == 0 {
		return
	}
	t, ok := b.uploadMulti(rows, blocks)
	if !ok {
		return
	}
	defer b.free(t.buf)
	b.launch("zero_multi", [3]int{t.blocks}, 256, t.tab, t.blk, t.tensors)
}
