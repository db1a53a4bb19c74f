package cuda

// bf16-only policy weights (model.HalfPrecision): ZeRO-1 with sharded fp32
// masters. Under bf16 products the policy's matrices are read by products
// only, through their bf16 copy (Shadow) or rounded in the tile loads, so
// once each rank's optimizer holds the fp32 master of its 1/W of a
// parameter, the whole fp32 weight is needed by nobody: the weight becomes
// bf16 storage alone (like a frozen weight, Freeze), which AdamWHalf writes
// in the owned range and the ranks all-gather (Comm.GatherShards).
//
// Such a tensor is read by MatMul (as a frozen operand: the other operand
// is rounded to bf16, so the product is the one a bf16 copy gave) and by
// ReadHalf; it is written by AdamWHalf, WriteHalf and the NCCL all-gather
// only. Download refuses it: its bf16 values are not the fp32 weights a
// checkpoint or a comparison means, and handing them back widened would
// be a silent loss of precision.

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// HalfOnly replaces t's fp32 storage, and its bf16 copy if any, by bf16
// storage holding t's values rounded to nearest even (the f32_to_bf16
// kernel the copy is refreshed with, so products see the same operand),
// with pad spare elements past the storage's end (zeroed) for an in-place
// padded all-gather (Comm.GatherShards). The fp32 storage goes back to the
// pool. Views follow their storage as with Freeze: the first tensor
// converted converts the whole buffer; every other tensor on it is pointed
// at the same bf16 storage, at its offset, when it is converted in turn
// (pad then does nothing).
func (b *Backend) HalfOnly(t *model.Tensor, pad int) error {
	if old, ok := t.Store.(*buffer); ok && old.frozenAs != nil {
		t.Store = old.frozenAs
		return b.Err()
	}
	if b.prec != BF16 {
		return fmt.Errorf("bf16-only weight %v: the backend's products are %s, not bf16, and would read the rounded weight", t.Shape, b.prec)
	}
	if pad < 0 {
		return fmt.Errorf("bf16-only weight %v: negative padding %d", t.Shape, pad)
	}
	if _, ok := b.ptrs("bf16-only weight", t); !ok {
		return b.Err()
	}
	old := t.Store.(*buffer)
	n := old.elems
	buf, err := b.allocBytes(n+pad, 2)
	if err != nil {
		return fmt.Errorf("bf16-only weight %v (%d + %d elements): %w", t.Shape, n, pad, err)
	}
	// Whole 4-byte words (allocations are rounded up to 512 bytes): the
	// padding is never read as a weight, but a gather sends it.
	b.kernelCost(0, 2*(n+pad))
	b.keep(b.d.memset32(buf.ptr, 0, int64((2*(n+pad)+3)/4)))
	b.kernelCost(n, 6*n)
	b.elementwise("f32_to_bf16", n, buf.ptr, old.ptr, int64(n))
	buf.frozen, buf.halfOnly, buf.padding = true, true, pad
	b.free(old) // and its bf16 copy
	old.frozenAs, t.Store = buf, buf
	return b.Err()
}

// IsHalfOnly reports whether t is a bf16-only weight (HalfOnly).
func (b *Backend) IsHalfOnly(t *model.Tensor) bool {
	buf, ok := t.Store.(*buffer)
	return ok && buf.halfOnly
}

// halfOnlyOperand returns the address of a bf16-only weight (or a view of
// one) that op writes.
func (b *Backend) halfOnlyOperand(op string, i int, t *model.Tensor) (uint64, bool) {
	if t == nil {
		b.keep(fmt.Errorf("%s: tensor argument %d is nil", op, i))
		return 0, false
	}
	p, _, ok := b.operand(op, i, t)
	if !ok {
		return 0, false
	}
	if !t.Store.(*buffer).halfOnly {
		b.keep(fmt.Errorf("%s: tensor argument %d %v is not a bf16-only weight (HalfOnly)", op, i, t.Shape))
		return 0, false
	}
	return p, true
}

// AdamWHalf is AdamW on the fp32 master (a rank's part of a parameter)
// that also writes the bf16 rounding of the updated master into half (the
// same part of the bf16-only weight): the adamw kernel with half as its
// bf16 output, which a weight's bf16 copy gets in the replicated update.
func (b *Backend) AdamWHalf(master, half, g, m, v *model.Tensor, h model.AdamWParams) {
	ps, ok := b.ptrs("adamw (sharded master)", master, g, m, v)
	if !ok || !b.keep(model.AdamWCheck(master, g, m, v, h)) {
		return
	}
	p16, ok := b.halfOnlyOperand("adamw (sharded master)", 1, half)
	if !ok {
		return
	}
	if half.Numel() != master.Numel() {
		b.keep(fmt.Errorf("adamw (sharded master): master of %d elements, bf16 weight part of %d", master.Numel(), half.Numel()))
		return
	}
	bc1 := 1 - math.Pow(h.Beta1, float64(h.Step))
	bc2 := 1 - math.Pow(h.Beta2, float64(h.Step))
	b.kernelCost(12*master.Numel(), 4*7*master.Numel()+2*master.Numel())
	b.elementwise("adamw", master.Numel(), ps[0], p16, ps[1], ps[2], ps[3], int64(master.Numel()), h.Scale(),
		h.Beta1, h.Beta2, h.LR, h.WeightDecay, h.Eps, bc1, bc2)
}

// ReadHalf downloads a bf16-only weight widened to float32 (exactly: every
// bf16 value is a float32): the values products read, not the fp32 master.
func (b *Backend) ReadHalf(t *model.Tensor, dst []float32) {
	if !b.ok() {
		return
	}
	if _, ok := b.halfOnlyOperand("read bf16 weight", 0, t); !ok {
		return
	}
	b.download(t, dst)
}

// WriteHalf uploads src, rounded to bf16 to nearest even, into a bf16-only
// weight (a resumed run's weights: every rank rounds the whole fp32
// checkpoint, as HalfOnly rounded the loaded weights).
func (b *Backend) WriteHalf(t *model.Tensor, src []float32) {
	if !b.ok() {
		return
	}
	p, ok := b.halfOnlyOperand("write bf16 weight", 0, t)
	if !ok {
		return
	}
	if len(src) != t.Numel() {
		b.keep(fmt.Errorf("write bf16 weight: %d values into tensor %v", len(src), t.Shape))
		return
	}
	if len(src) == 0 {
		return
	}
	wide, err := b.alloc(len(src))
	if !b.keep(err) {
		return
	}
	defer b.free(wide)
	b.keep(b.d.copyIn(wide.ptr, unsafe.Pointer(&src[0]), int64(len(src))*4))
	b.kernelCost(len(src), 6*len(src))
	b.elementwise("f32_to_bf16", len(src), p, wide.ptr, int64(len(src)))
}

var _ model.HalfPrecision = (*Backend)(nil)
