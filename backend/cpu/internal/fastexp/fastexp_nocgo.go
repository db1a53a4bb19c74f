//go:build !cgo

package fastexp

const cgoMin = 32 // as with cgo, so the tests cover the same lengths

// Shift overwrites dst[i] = e^(x[i]−shift) for i < len(x) (dst may be x).
func Shift(dst, x []float32, shift float32) { ShiftScaleGo(dst, x, shift, 1) }

// ShiftScale overwrites dst[i] = e^(x[i]−shift)·scale (dst may be x).
func ShiftScale(dst, x []float32, shift, scale float32) { ShiftScaleGo(dst, x, shift, scale) }

// Max returns the largest element of x, NaN if any is NaN (−Inf if empty).
func Max(x []float32) float32 { return MaxGo(x) }

// MaxExpRows: see MaxExpRowsGo.
func MaxExpRows(s []float32, rows, ld, n0 int, mx []float32) { MaxExpRowsGo(s, rows, ld, n0, mx) }

// ExpRows: see ExpRowsGo.
func ExpRows(s []float32, rows, ld, n0 int, shift []float32) { ExpRowsGo(s, rows, ld, n0, shift) }

// SumExp: see SumExpGo.
func SumExp(x []float32, shift float32) (sum, sumX float64) { return SumExpGo(x, shift) }

// SiLUMul: see SiLUMulGo.
func SiLUMul(out, g, u []float32) { SiLUMulGo(out, g, u) }

// SiLUMulBackward: see SiLUMulBackwardGo.
func SiLUMulBackward(dg, du, d, g, u []float32) { SiLUMulBackwardGo(dg, du, d, g, u) }
