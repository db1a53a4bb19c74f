package cuda

// Fused ops (model.ResidualNormer): the residual add folded into the
// RMSNorm after it and into that norm's backward (kernels in norm.cu,
// sharing the unfused kernels' arithmetic). DRAM traffic per element:
// AddRMSNorm reads x, y and writes sum and the normed output (14 bytes with
// a bf16 output), what Copy (8) and RMSNorm (6) moved; RMSNormBackwardAdd
// reads dout, x, res and writes dx (16; dw's column partials are summed in
// the same pass, rmsnorm_bwd_dxdw_res, for rows of at most rmsNormDWMaxN),
// where RMSNormBackward then Add moved 24 plus a dw pass reading dout and x.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// AddRMSNorm overwrites sum = x + y and out, rstd = RMSNorm(sum) in one
// pass; out may be a bf16 activation (ActivationHalf).
func (b *Backend) AddRMSNorm(sum, out, rstd, x, y, w *model.Tensor, eps float32) {
	ps, ok := b.ptrs("add rmsnorm", sum, x, y, w)
	if !ok {
		return
	}
	po, half, ok := b.activation("add rmsnorm", 1, out)
	if !ok {
		return
	}
	markStale(out)
	rs, ok := b.opt("add rmsnorm", rstd)
	if !ok {
		return
	}
	if !b.keep(model.SizeCheck("add rmsnorm", sum, x, y)) {
		return
	}
	R, n, err := model.RMSNormDims(out, rstd, sum, w)
	if !b.keep(err) || R == 0 || n == 0 {
		return
	}
	b.kernelCost(5*R*n, 4*(3*R*n+n+R)+widthOf(half)*R*n)
	name := "add_rmsnorm_fwd"
	if half {
		name += "_h"
	}
	b.launch(name, [3]int{R}, rowBlock, ps[0], po, rs, ps[1], ps[2], ps[3], int32(n), eps)
}

// RMSNormBackwardAdd is RMSNormBackward whose dx kernel also adds res.
func (b *Backend) RMSNormBackwardAdd(dx, dw, dout, x, w, rstd, res *model.Tensor) {
	p, ok := b.ptrs("rmsnorm backward add", dx, dw, dout, x, w, rstd, res)
	if !ok || !b.keep(model.SizeCheck("rmsnorm backward add", dx, res)) {
		return
	}
	markStale(dw)
	if p[0] == p[6] {
		b.keep(fmt.Errorf("rmsnorm backward add: res must not be dx"))
		return
	}
	R, n, err := model.RMSNormBackwardDims(dx, dw, dout, x, w, rstd)
	if !b.keep(err) || R == 0 || n == 0 {
		return
	}
	// RMSNormBackward's traffic and res read once more; where dx has a bf16
	// copy (model.HalfPrecision: the products that read dx take it) that dx
	// covers whole, the copy is written in the same pass and is then fresh.
	buf := dx.Store.(*buffer)
	if b.normDWInPass(n) {
		// One pass writes dx (and its bf16 copy) and dw's column partials:
		// dout and x are read once (8 bytes an element fewer).
		var dx16 uint64
		if buf.shadow != nil && dx.Off == 0 && dx.Numel() == buf.elems {
			dx16 = buf.shadow.ptr
			b.kernelCost(0, 2*R*n)
		}
		b.kernelCost(9*R*n, 4*(4*R*n+2*n+R))
		b.rmsNormBackwardDxDW(R, n, p[1], func(part uint64, perChunk int) {
			b.launch("rmsnorm_bwd_dxdw_res", [3]int{(R + perChunk - 1) / perChunk}, rowBlock, p[0], dx16, part, p[2], p[3],
				p[4], p[5], p[6], int32(R), int32(n), int32(perChunk))
		})
		if dx16 != 0 {
			b.markFresh(buf, 0, buf.elems)
		}
		return
	}
	if buf.shadow != nil && dx.Off == 0 && dx.Numel() == buf.elems {
		b.kernelCost(9*R*n, 4*(5*R*n+2*n+R)+2*R*n)
		b.launch("rmsnorm_bwd_dx_res_h", [3]int{R}, rowBlock, p[0], buf.shadow.ptr, p[2], p[3], p[4], p[5], p[6], int32(n))
		b.markFresh(buf, 0, buf.elems)
	} else {
		b.kernelCost(9*R*n, 4*(5*R*n+2*n+R))
		b.launch("rmsnorm_bwd_dx_res", [3]int{R}, rowBlock, p[0], p[2], p[3], p[4], p[5], p[6], int32(n))
	}
	b.rmsNormBackwardDW(p[1], p[2], p[3], p[5], R, n)
}

var _ model.ResidualNormer = (*Backend)(nil)
