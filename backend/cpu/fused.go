package cpu

// The fused residual ops (model.ResidualNormer) on the fast CPU backend:
// the unfused ops' float32 arithmetic in the same order (bitwise equal to
// them), a row at a time so the sum is still in cache when it is normed.

import (
	"fmt"
	"math"

	"github.com/gdrotrain/gdrotrain/model"
)

// AddRMSNorm overwrites sum = x + y, then normalizes it as RMSNorm does.
func (b *Backend) AddRMSNorm(sum, out, rstd, x, y, w *model.Tensor, eps float32) {
	if !b.Check("add rmsnorm", sum, x, y) || !b.Keep(model.SizeCheck("add rmsnorm", sum, x, y)) {
		return
	}
	R, n, _, O, W, RS, ok := b.RMSNormArgs(out, rstd, sum, w)
	if !ok || n == 0 {
		return
	}
	S, X, Y := b.Data(sum), b.Data(x), b.Data(y)
	b.ParallelFor(R, 2*n, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			row := S[r*n : (r+1)*n]
			for j := range row {
				row[j] = X[r*n+j] + Y[r*n+j]
			}
			normRow(O[r*n:(r+1)*n], RS, r, row, W, eps)
		}
	})
}

// normRow is one row of RMSNorm (its arithmetic, shared by both ops).
func normRow(o, RS []float32, r int, row, W []float32, eps float32) {
	n := len(row)
	rs64 := 1 / math.Sqrt(sumSq64(row)/float64(n)+float64(eps))
	if RS != nil {
		RS[r] = float32(rs64)
	}
	if rs64 > math.MaxFloat32 && !math.IsInf(rs64, 1) { // denormal rows: float32(rs) would overflow
		for j, v := range row {
			o[j] = float32(float64(v)*rs64) * W[j]
		}
		return
	}
	rs := float32(rs64)
	for j, v := range row {
		o[j] = v * rs * W[j]
	}
}

// RMSNormBackwardAdd overwrites dx = res + ∂J/∂x and accumulates dw.
func (b *Backend) RMSNormBackwardAdd(dx, dw, dout, x, w, rstd, res *model.Tensor) {
	if !b.Check("rmsnorm backward add", dx, dw, dout, x, w, rstd, res) || !b.Keep(model.SizeCheck("rmsnorm backward add", dx, res)) {
		return
	}
	if d, r := b.Data(dx), b.Data(res); len(d) > 0 && &d[0] == &r[0] {
		b.Keep(fmt.Errorf("rmsnorm backward add: res must not be dx"))
		return
	}
	b.rmsNormBackward(dx, dw, dout, x, w, rstd, b.Data(res))
}

var _ model.ResidualNormer = (*Backend)(nil)
