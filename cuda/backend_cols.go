package cuda

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// Column-block ops (model.Backend's AddCols and CopyCols): LoRA adds each
// adapted projection's low-rank term into its column block of the fused
// q/k/v product, which is a bf16 activation under bf16 products, and reads
// each block's gradient back out of the fused gradient.

// AddCols accumulates src (fp32) into columns [col0, col0+w) of dst, fp32
// or a writable bf16 activation (rounded once per element).
func (b *Backend) AddCols(dst, src *model.Tensor, col0 int) {
	pd, half, ok := b.operand("add cols", 0, dst)
	if !ok {
		return
	}
	if dst.Store.(*buffer).frozen {
		b.keep(fmt.Errorf("add cols: the destination %v is a frozen weight", dst.Shape))
		return
	}
	markStale(dst)
	ps, ok := b.reads("add cols", src) // refuses bf16
	if !ok {
		return
	}
	R, W, w, err := model.ColsDims("add cols", dst, src, col0)
	if !b.keep(err) || R == 0 || w == 0 {
		return
	}
	n, name, width := R*w, "add_cols_f32", 4
	if half {
		name, width = "add_cols_h", 2
	}
	b.kernelCost(n, (2*width+4)*n)
	b.elementwise(name, n, pd, ps[0], int64(R), int32(W), int32(w), int32(col0))
}

// CopyCols overwrites dst (fp32) with columns [col0, col0+w) of src, fp32
// or a bf16 activation (widened exactly: LoRA reads its blocks of the
// fused q/k/v gradient, bf16 under bf16 products).
func (b *Backend) CopyCols(dst, src *model.Tensor, col0 int) {
	p, ok := b.ptrs("copy cols", dst) // refuses bf16
	if !ok {
		return
	}
	ps, half, ok := b.activation("copy cols", 1, src)
	if !ok {
		return
	}
	R, W, w, err := model.ColsDims("copy cols", src, dst, col0)
	if !b.keep(err) || R == 0 || w == 0 {
		return
	}
	name := "copy_cols"
	if half {
		name += "_h"
	}
	b.kernelCost(0, (4+widthOf(half))*R*w)
	b.elementwise(name, R*w, p[0], ps, int64(R), int32(W), int32(w), int32(col0))
}
