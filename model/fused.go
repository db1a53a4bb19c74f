package model

// Fused ops: a residual add folded into the RMSNorm that follows it, and
// into that norm's backward. They are an optional interface
// (ResidualNormer): the model calls them where the backend has them and the
// unfused ops otherwise, with the same result (bitwise on the CPU backends,
// which implement both; the CUDA kernels add in the same float32 order).
//
// What the fusion saves, per residual and token row of C elements (fp32):
//
//   - backward: RMSNormBackward then Add(dx, res) reads dout, x, then dx
//     and res again and writes dx twice; the fused op reads dout, x, res
//     and writes dx once: 8 bytes an element fewer, two residuals a layer
//     (about 15 GB of the 1.7B step's 8×2k profile);
//   - forward: Copy(xMid, x) and an accumulating product, then RMSNorm,
//     move as many bytes as a product that overwrites y and one pass
//     reading x, y and writing xMid and the normed output, so the
//     estimate gains a launch a layer; on a GPU the product's epilogue no
//     longer reads C.

// AddRMSNorm runs b's fused AddRMSNorm, or Copy, Add and RMSNorm where b
// has none.
func AddRMSNorm(b Backend, sum, out, rstd, x, y, w *Tensor, eps float32) {
	if rn, ok := b.(ResidualNormer); ok {
		rn.AddRMSNorm(sum, out, rstd, x, y, w, eps)
		return
	}
	switch sum {
	case x:
		b.Add(sum, y)
	case y:
		b.Add(sum, x)
	default:
		b.Copy(sum, x)
		b.Add(sum, y)
	}
	b.RMSNorm(out, rstd, sum, w, eps)
}

// RMSNormBackwardAdd runs b's fused RMSNormBackwardAdd, or RMSNormBackward
// then Add where b has none.
func RMSNormBackwardAdd(b Backend, dx, dw, dout, x, w, rstd, res *Tensor) {
	if rn, ok := b.(ResidualNormer); ok {
		rn.RMSNormBackwardAdd(dx, dw, dout, x, w, rstd, res)
		return
	}
	b.RMSNormBackward(dx, dw, dout, x, w, rstd)
	b.Add(dx, res)
}

// residualBranch returns where the attention branch's output product goes
// and whether it accumulates: with a fused AddRMSNorm a scratch y the
// product overwrites (residualNorm adds x to it); without, xMid holding a
// copy of x, which the product accumulates into. Products added to the
// branch (adapters) accumulate into the same tensor either way.
func (m *Model) residualBranch(xMid, x *Tensor) (branch *Tensor, accumulate bool) {
	if _, ok := m.B.(ResidualNormer); ok {
		return Scratch(m.B, xMid.Shape...), false
	}
	m.B.Copy(xMid, x)
	return xMid, true
}

// residualNorm completes xMid = x + branch and writes out, rstd =
// RMSNorm(xMid) (post_attention_layernorm), releasing a scratch branch.
func (m *Model) residualNorm(xMid, out, rstd, x, branch, w *Tensor, eps float32) {
	if branch == xMid {
		m.B.RMSNorm(out, rstd, xMid, w, eps)
		return
	}
	AddRMSNorm(m.B, xMid, out, rstd, x, branch, w, eps)
	Release(m.B, branch)
}
