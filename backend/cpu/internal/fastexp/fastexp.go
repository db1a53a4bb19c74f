// Package fastexp holds the float32 exponential and the exp-based loops of
// the fast CPU backend: softmax rows, the log-softmax sums over the
// vocabulary and SwiGLU. Scalar math.Exp (float64) would be their largest
// cost after the matrix products.
//
// The exponential is Cephes' expf: x = n·ln2 + r with |r| ≤ ln2/2, e^r by a
// degree-6 polynomial, scaled by 2^n through the exponent bits; its error
// is within 2 ulp of float32 (the test measures it against math.Exp).
// Results below e^Lo (≈1.8e−38, the bottom of float32's normal range) are
// flushed to 0, which no softmax or sigmoid here can tell apart.
//
// Every function has two implementations that give the same bits: the *Go
// ones here, and, where cgo is on, C loops that gcc vectorizes for the CPU
// it runs on (AVX-512 or AVX2, chosen at load time), 5–10× faster. Both do
// the same float32 operations in the same order with no fused multiply-add,
// and sum in the same eight lanes, so a build without cgo computes exactly
// what the default build does.
package fastexp

import "math"

const (
	Hi = 88.72283 // ln(MaxFloat32): above it e^x is +Inf
	Lo = -86.9    // below it e^x is flushed to 0 (so that n = round(x·log2 e) ≥ −125)
)

// Expf returns e^x in float32.
func Expf(x float32) float32 {
	if !(x >= Lo) { // also NaN
		if x != x {
			return x
		}
		return 0
	}
	if x > Hi {
		return float32(math.Inf(1))
	}
	return poly(x)
}

// poly is e^x for x in [Lo, Hi]. Every float32 conversion stops the
// compiler from fusing a multiply and an add, so the result is the same
// with and without FMA (and the same as the C loops').
func poly(x float32) float32 {
	// n = round(x·log2 e) by the 1.5·2²³ trick (float32 adds round to nearest).
	const magic = 12582912
	n := float32(float32(x*1.44269504088896341)+magic) - magic
	r := float32(x - float32(n*0.693359375))
	r = float32(r - float32(n*-2.12194440e-4))
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*r)*r) + r + 1
	// 2^n as 2^(n−1)·2 keeps n = 128 (x just below Hi) finite; n ≥ −125
	// here, so 2^(n−1) is normal.
	return p * math.Float32frombits(uint32(int32(n)+126)<<23) * 2
}

// ShiftScaleGo overwrites dst[i] = e^(x[i]−shift)·scale for i < len(x)
// (dst may be x).
func ShiftScaleGo(dst, x []float32, shift, scale float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = Expf(v-shift) * scale
	}
}

// MaxGo returns the largest element of x, NaN if any is NaN (−Inf if x is
// empty).
func MaxGo(x []float32) float32 {
	m := float32(math.Inf(-1))
	nan := false
	for _, v := range x {
		if v > m {
			m = v
		}
		nan = nan || v != v
	}
	if nan {
		return float32(math.NaN())
	}
	return m
}

// MaxExpRowsGo: row r of s (stride ld) has n0+r valid entries (a causal
// block of attention scores); mx[r] is set to their maximum and they are
// replaced by e^(x − mx[r]).
func MaxExpRowsGo(s []float32, rows, ld, n0 int, mx []float32) {
	for r := 0; r < rows; r++ {
		row := s[r*ld : r*ld+n0+r]
		mx[r] = MaxGo(row)
		ShiftScaleGo(row, row, mx[r], 1)
	}
}

// ExpRowsGo: row r of s (stride ld) has n0+r valid entries, replaced by
// e^(x − shift[r]).
func ExpRowsGo(s []float32, rows, ld, n0 int, shift []float32) {
	for r := 0; r < rows; r++ {
		row := s[r*ld : r*ld+n0+r]
		ShiftScaleGo(row, row, shift[r], 1)
	}
}

// SumExpGo returns Σ e^(x−shift) and Σ e^(x−shift)·(x−shift) (a term with
// e^(x−shift) = 0 adds 0, also for x = −Inf), in float64: element i goes to
// lane i mod 8 and the lanes are added pairwise at the end.
func SumExpGo(x []float32, shift float32) (sum, sumX float64) {
	var s, p [8]float64
	for i, v := range x {
		d := v - shift
		e := Expf(d)
		ed := float32(0)
		if e != 0 {
			ed = e * d
		}
		s[i%8] += float64(e)
		p[i%8] += float64(ed)
	}
	return lanes(&s), lanes(&p)
}

func lanes(a *[8]float64) float64 {
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

// SiLUMulGo overwrites out[i] = silu(g[i])·u[i] = g/(1+e^(−g))·u.
func SiLUMulGo(out, g, u []float32) {
	out, u = out[:len(g)], u[:len(g)]
	for i, gv := range g {
		out[i] = gv / (1 + Expf(-gv)) * u[i]
	}
}

// SiLUMulBackwardGo overwrites, with σ = 1/(1+e^(−g)),
// du = d·g·σ and dg = d·u·σ·(1 + g·(1−σ)).
func SiLUMulBackwardGo(dg, du, d, g, u []float32) {
	dg, du, d, u = dg[:len(g)], du[:len(g)], d[:len(g)], u[:len(g)]
	for i, gv := range g {
		sig := 1 / (1 + Expf(-gv))
		du[i] = d[i] * gv * sig
		dg[i] = d[i] * u[i] * sig * (1 + float32(gv*(1-sig)))
	}
}
