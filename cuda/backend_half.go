package cuda

// Plumbing for bf16 activations (model.HalfPrecision): writable bf16
// tensors that ops read and write beside fp32 ones, and the conversions
// between the two storages that an op needs when a kernel reads only one.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// activation returns the address of an fp32 or writable bf16 tensor and
// whether it is bf16 (an ActivationHalf), refusing frozen weights. As with
// ptrs, argument 0 is the one the op writes.
func (b *Backend) activation(op string, i int, t *model.Tensor) (uint64, bool, bool) {
	if !b.ok() {
		return 0, false, false
	}
	if t == nil {
		b.keep(fmt.Errorf("%s: tensor argument %d is nil", op, i))
		return 0, false, false
	}
	p, half, ok := b.operand(op, i, t)
	if !ok {
		return 0, false, false
	}
	buf := t.Store.(*buffer)
	if buf.frozen {
		b.keep(fmt.Errorf("%s: tensor argument %d %v is a frozen weight", op, i, t.Shape))
		return 0, false, false
	}
	if i == 0 {
		markStale(t)
	}
	return p, half, true
}

// widthOf is the bytes per element of fp32 or bf16 storage.
func widthOf(half bool) int {
	if half {
		return 2
	}
	return 4
}

// widen serves a product with an fp32 result whose operand x is a bf16
// activation and whose other operand y is fp32 with no bf16 copy (yHalf
// false): cuBLAS wants equal input types, so one of them is converted.
// Rounding y costs 4 bytes read and 2 written per element and the product
// then reads 2 of each; widening x costs 2 read and 4 written and the
// product reads 4 of each: 8·|y| + 2·|x| against 10·|x| + 4·|y| bytes, so
// x is widened when y has more than twice its elements (the backward's
// dWgu += dguᵀ·xn2: dgu is 6× xn2 at Qwen3-1.7B). The product is the same
// either way: under bf16 products the tensor cores round fp32 inputs to
// bf16, and a widened bf16 value rounds to itself. It returns x's address
// (a widened copy, appended to keep, or x itself) and whether x is still
// bf16.
func (b *Backend) widen(x *model.Tensor, px uint64, xHalf bool, y *model.Tensor, yHalf bool, keep *[]*buffer) (uint64, bool, bool) {
	if !xHalf || yHalf || x.Store.(*buffer).frozen || y.Numel() <= 2*x.Numel() {
		return px, xHalf, true
	}
	n := x.Numel()
	buf, err := b.alloc(n)
	if !b.keep(err) {
		return 0, false, false
	}
	*keep = append(*keep, buf)
	b.kernelCost(n, 6*n)
	b.elementwise("bf16_to_f32", n, buf.ptr, px, int64(n))
	return buf.ptr, false, true
}
