package cuda

// The fused q/k/v projection's split (model.Backend's SplitQKV and its
// backward; kernels qkv_split_* in kernels/norm.cu).
//
// Why a split kernel and not consumers reading strided rows: the product
// xn1·Wqkvᵀ puts each token's query, key and value heads side by side, and
// the per-head norm, RoPE and attention want them apart. Reading strided
// rows would need a row stride in RMSNorm, RoPE and the three attention
// kernels (and in their CPU twins) for no saving: q_norm and k_norm must
// write their outputs anyway, since the backward needs both the normed
// and the raw heads. One kernel that reads the product once and writes
// qn, kn (normed and rotated) and v moves, per token and layer at
// Qwen3-1.7B (H = 16, G = 8, D = 128) in fp32, 16 KiB read and 16 KiB
// written, the values' copy (4 KiB each way) included; the three
// products' separate outputs went through RMSNorm and then an in-place
// RoPE on q and k, 48 KiB, in four launches instead of one. Under bf16
// products a training pass's product and outputs are bf16
// (ActivationHalf): half those bytes, and half the saved tensors.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// qkvThreads is QKV_THREADS of kernels/norm.cu.
const qkvThreads = 64

// SplitQKV splits the fused projection into qn, kn (per-head RMSNorm, then
// RoPE) and v, reading qkv in fp32 or bf16 and writing qn, kn, v in fp32
// or, from a bf16 product, in bf16 (all three alike).
func (b *Backend) SplitQKV(qn, kn, v, rstdQ, rstdK, qkv, qw, kw *model.Tensor, pos []int32, theta float64, eps float32) {
	const op = "split qkv"
	outs, halfOut, ok := b.uniform(op, qn, kn, v)
	if !ok {
		return
	}
	markStale(qn, kn, v)
	p, ok := b.reads(op, rstdQ, rstdK, qw, kw)
	if !ok {
		return
	}
	src, half, ok := b.activation(op, 5, qkv)
	if !ok {
		return
	}
	if halfOut && !half {
		b.keep(fmt.Errorf("%s: bf16 outputs need a bf16 product (qkv %v is fp32)", op, qkv.Shape))
		return
	}
	d, err := model.SplitQKVDims(op, qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos)
	if !b.keep(err) || d.N == 0 {
		return
	}
	tab, posAddr, ok := b.ropeInputs(op, pos, theta, d.D)
	if !ok {
		return
	}
	// The product read once, the three outputs and the rstds written once,
	// the angle tables read once per token.
	n, nk := d.N*d.Width(), d.N*(d.H+d.G)*d.D
	b.kernelCost(7*nk, (widthOf(half)+widthOf(halfOut))*n+4*(d.N*(d.H+d.G)+d.N*d.D))
	name := "qkv_split_fwd"
	if half {
		name += "_h"
	}
	if halfOut {
		name += "h"
	}
	b.launch(name, [3]int{d.N, d.H + 2*d.G}, qkvThreads, outs[0], outs[1], outs[2], p[0], p[1], src, p[2], p[3],
		posAddr, tab.cos.ptr, tab.sin.ptr, int32(d.H), int32(d.G), int32(d.D), eps)
}

// SplitQKVBackward overwrites dqkv and accumulates dqw, dkw. The weight
// gradients' column sums are taken over fixed chunks of rows and the
// chunks added in order, as RMSNormBackward's (deterministic, no atomics).
// dqkv may be a bf16 activation (ActivationHalf, with a bf16 qkv): the
// fp32 gradient rounded once, since only products read it.
func (b *Backend) SplitQKVBackward(dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *model.Tensor, pos []int32, theta float64) {
	const op = "split qkv backward"
	pd, halfOut, ok := b.activation(op, 0, dqkv)
	if !ok {
		return
	}
	p, ok := b.ptrs(op, dqw, dkw, dqn, dkn, dv, qw, kw, rstdQ, rstdK)
	if !ok {
		return
	}
	markStale(dkw)
	p = append([]uint64{pd}, p...)
	src, half, ok := b.activation(op, 6, qkv)
	if !ok {
		return
	}
	if halfOut && !half {
		b.keep(fmt.Errorf("%s: a bf16 dqkv needs a bf16 qkv", op))
		return
	}
	d, err := model.SplitQKVDims(op, dqn, dkn, dv, rstdQ, rstdK, qkv, qw, kw, pos)
	if !b.keep(err) || !b.keep(model.SizeCheck(op, qkv, dqkv)) || !b.keep(model.SizeCheck(op, qw, dqw, dkw)) || d.N == 0 {
		return
	}
	tab, posAddr, ok := b.ropeInputs(op, pos, theta, d.D)
	if !ok {
		return
	}
	n, nk := d.N*d.Width(), d.N*(d.H+d.G)*d.D
	// dx: the product and the output gradients read, dqkv written; dw:
	// both read again, once per weight.
	b.kernelCost(20*nk, 2*widthOf(half)*nk+widthOf(halfOut)*n+4*(2*nk+d.N*d.G*d.D+2*d.N*(d.H+d.G)+2*d.N*d.D))
	suffix := ""
	if half {
		suffix = "_h"
	}
	name := "qkv_split_bwd_dx" + suffix
	if halfOut {
		name += "h"
	}
	b.launch(name, [3]int{d.N, d.H + 2*d.G}, qkvThreads, p[0], p[3], p[4], p[5], src,
		p[6], p[7], p[8], p[9], posAddr, tab.cos.ptr, tab.sin.ptr, int32(d.H), int32(d.G), int32(d.D))
	b.splitNormGrad(suffix, p[1], p[3], src, p[8], posAddr, tab, d, d.H, 0)
	b.splitNormGrad(suffix, p[2], p[4], src, p[9], posAddr, tab, d, d.G, d.H)
}

// splitNormGrad accumulates dw += Σ unrotate(dy)·x·rstd over the `heads`
// heads from head h0 of every fused row.
func (b *Backend) splitNormGrad(suffix string, dw, dy, qkv, rstd, pos uint64, tab *ropeTable, d model.QKVDims, heads, h0 int) {
	rows := d.N * heads
	perChunk := max(64, (rows+65534)/65535)
	chunks := (rows + perChunk - 1) / perChunk
	part, err := b.alloc(chunks * d.D)
	if !b.keep(err) {
		return
	}
	defer b.free(part)
	cols := (d.D + 255) / 256
	b.launch("qkv_split_bwd_dw_partial"+suffix, [3]int{cols, chunks}, 256, part.ptr, dy, qkv, rstd, pos,
		tab.cos.ptr, tab.sin.ptr, int32(heads), int32(h0), int32(d.Width()), int32(d.D), int32(rows), int32(perChunk))
	b.launch("sum_chunks", [3]int{cols}, 256, dw, part.ptr, int32(chunks), int32(d.D))
}
