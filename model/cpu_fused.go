package model

// The reference CPU's fused ops (ResidualNormer): the unfused ops'
// arithmetic in the same order, so fused and unfused agree bitwise.

// AddRMSNorm overwrites sum = x + y, then normalizes it as RMSNorm does.
func (b *ReferenceCPU) AddRMSNorm(sum, out, rstd, x, y, w *Tensor, eps float32) {
	if !b.check("add rmsnorm", sum, x, y) || !b.sameSize("add rmsnorm", sum, x) || !b.sameSize("add rmsnorm", sum, y) {
		return
	}
	S, X, Y := b.data(sum), b.data(x), b.data(y)
	for i := range S {
		S[i] = X[i] + Y[i]
	}
	b.RMSNorm(out, rstd, sum, w, eps)
}

// RMSNormBackwardAdd overwrites dx = res + ∂J/∂x and accumulates dw.
func (b *ReferenceCPU) RMSNormBackwardAdd(dx, dw, dout, x, w, rstd, res *Tensor) {
	if !b.check("rmsnorm backward add", dx, dw, dout, x, w, rstd, res) || !b.sameSize("rmsnorm backward add", dx, res) {
		return
	}
	if sameData(dx, res) {
		b.failf("rmsnorm backward add: res must not be dx")
		return
	}
	b.rmsNormBackward(dx, dw, dout, x, w, rstd, b.data(res))
}

// sameData reports whether two CPU tensors start at the same element of
// the same storage.
func sameData(a, c *Tensor) bool {
	sa, sc := a.Store.([]float32), c.Store.([]float32)
	return len(sa) > 0 && len(sc) > 0 && &sa[0] == &sc[0] && a.Off == c.Off
}

var _ ResidualNormer = (*ReferenceCPU)(nil)
