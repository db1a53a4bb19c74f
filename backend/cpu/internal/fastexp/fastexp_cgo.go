//go:build cgo

package fastexp

/*
#include <stdint.h>
#include <string.h>
#include <math.h>

// No fused multiply-add anywhere, so every loop rounds as fastexp.go does.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize ("fp-contract=off")
#endif

// One clone per instruction set, picked by the dynamic loader (glibc's
// ifunc); elsewhere the plain loop.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
#define GD_VECTOR __attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3", "fp-contract=off")))
#else
#define GD_VECTOR
#endif

// gd_exp is fastexp.Expf without branches, so that loops calling it
// vectorize: the exponent is computed on v clamped to [Lo, Hi] and the
// out-of-range and NaN results are selected afterwards.
static inline __attribute__((always_inline)) float gd_exp(float v) {
	float c = v > -86.9f ? v : -86.9f; // NaN → Lo: n stays an integer
	c = c < 88.72283f ? c : 88.72283f;
	float nf = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float r = c - nf * 0.693359375f;
	r = r - nf * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	uint32_t bits = (uint32_t)((int32_t)nf + 126) << 23;
	float s;
	memcpy(&s, &bits, sizeof s);
	float e = p * s * 2.0f;
	e = v < -86.9f ? 0.0f : e;
	e = v > 88.72283f ? INFINITY : e;
	return v != v ? v : e;
}

GD_VECTOR
static void gd_exp_shift(float* dst, const float* x, long n, float shift, float scale) {
	for (long i = 0; i < n; i++) dst[i] = gd_exp(x[i] - shift) * scale;
}

GD_VECTOR
static float gd_max(const float* x, long n) {
	float m = -INFINITY;
	int nan = 0;
	for (long i = 0; i < n; i++) {
		m = x[i] > m ? x[i] : m;
		nan |= x[i] != x[i];
	}
	return nan ? NAN : m;
}

// Row r of s has n0+r valid entries: their maximum (or shift_in[r]) is
// subtracted before the exponential.
static void gd_max_exp_rows(float* s, long rows, long ld, long n0, float* mx, const float* shift_in) {
	for (long r = 0; r < rows; r++) {
		float* row = s + r * ld;
		long n = n0 + r;
		float m = shift_in ? shift_in[r] : gd_max(row, n);
		if (!shift_in) mx[r] = m;
		gd_exp_shift(row, row, n, m, 1.0f);
	}
}

// gd_exp_terms writes e[i] = e^(x[i]−shift) and ed[i] = e[i]·(x[i]−shift)
// (0 where e[i] is 0).
static inline __attribute__((always_inline)) void gd_exp_terms(const float* x, long n, float shift, float* e, float* ed) {
	for (long i = 0; i < n; i++) {
		float d = x[i] - shift;
		float v = gd_exp(d);
		e[i] = v;
		ed[i] = v != 0.0f ? v * d : 0.0f;
	}
}

// gd_sum_exp is fastexp.SumExpGo: the terms of each 256-element chunk are
// computed into scratch by a vectorized loop, then added into eight float64
// lanes (element i into lane i mod 8) with explicit vectors, so the sums are
// SumExpGo's to the bit.
typedef float gd_v8f __attribute__((vector_size(32)));
typedef double gd_v8d __attribute__((vector_size(64)));
GD_VECTOR
static void gd_sum_exp(const float* x, long n, float shift, double* out) {
	gd_v8d s = {0}, p = {0};
	float e[256], ed[256];
	long i = 0;
	while (n - i >= 8) {
		long m = (n - i) / 8 * 8;
		if (m > 256) m = 256;
		gd_exp_terms(x + i, m, shift, e, ed);
		for (long k = 0; k < m; k += 8) {
			gd_v8f a, b;
			memcpy(&a, e + k, sizeof a);
			memcpy(&b, ed + k, sizeof b);
			s += __builtin_convertvector(a, gd_v8d);
			p += __builtin_convertvector(b, gd_v8d);
		}
		i += m;
	}
	gd_exp_terms(x + i, n - i, shift, e, ed);
	for (long j = 0; j < n - i; j++) {
		s[j] += (double)e[j];
		p[j] += (double)ed[j];
	}
	out[0] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	out[1] = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

GD_VECTOR
static void gd_silu_mul(float* out, const float* g, const float* u, long n) {
	for (long i = 0; i < n; i++) out[i] = g[i] / (1.0f + gd_exp(-g[i])) * u[i];
}

GD_VECTOR
static void gd_silu_mul_backward(float* dg, float* du, const float* d, const float* g, const float* u, long n) {
	for (long i = 0; i < n; i++) {
		float sig = 1.0f / (1.0f + gd_exp(-g[i]));
		du[i] = d[i] * g[i] * sig;
		dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
	}
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// cgoMin is the length below which the cgo call (≈ 50 ns) costs more than
// it saves.
const cgoMin = 32

func ptr(x []float32) *C.float { return (*C.float)(unsafe.Pointer(&x[0])) }

// Shift overwrites dst[i] = e^(x[i]−shift) for i < len(x) (dst may be x).
func Shift(dst, x []float32, shift float32) { ShiftScale(dst, x, shift, 1) }

// ShiftScale overwrites dst[i] = e^(x[i]−shift)·scale for i < len(x) (dst
// may be x).
func ShiftScale(dst, x []float32, shift, scale float32) {
	if len(x) < cgoMin {
		ShiftScaleGo(dst, x, shift, scale)
		return
	}
	dst = dst[:len(x)]
	C.gd_exp_shift(ptr(dst), ptr(x), C.long(len(x)), C.float(shift), C.float(scale))
}

// Max returns the largest element of x, NaN if any is NaN (−Inf if x is
// empty).
func Max(x []float32) float32 {
	if len(x) < cgoMin {
		return MaxGo(x)
	}
	return float32(C.gd_max(ptr(x), C.long(len(x))))
}

// MaxExpRows: row r of s (stride ld) has n0+r valid entries; mx[r] is set
// to their maximum and they are replaced by e^(x − mx[r]). One cgo call for
// a block of rows.
func MaxExpRows(s []float32, rows, ld, n0 int, mx []float32) {
	if rows == 0 {
		return
	}
	checkRows(s, rows, ld, n0)
	_ = mx[rows-1]
	C.gd_max_exp_rows(ptr(s), C.long(rows), C.long(ld), C.long(n0), ptr(mx), nil)
}

// ExpRows: row r of s (stride ld) has n0+r valid entries, replaced by
// e^(x − shift[r]).
func ExpRows(s []float32, rows, ld, n0 int, shift []float32) {
	if rows == 0 {
		return
	}
	checkRows(s, rows, ld, n0)
	_ = shift[rows-1]
	C.gd_max_exp_rows(ptr(s), C.long(rows), C.long(ld), C.long(n0), nil, ptr(shift))
}

// checkRows panics (as a Go slice expression would) unless s holds every
// valid entry of the rows.
func checkRows(s []float32, rows, ld, n0 int) {
	if end := (rows-1)*ld + n0 + rows - 1; end > len(s) || n0 < 0 || ld < n0+rows-1 {
		panic(fmt.Sprintf("fastexp: %d rows of stride %d with %d+r entries in %d floats", rows, ld, n0, len(s)))
	}
}

// SumExp returns Σ e^(x−shift) and Σ e^(x−shift)·(x−shift) in float64 (see
// SumExpGo).
func SumExp(x []float32, shift float32) (sum, sumX float64) {
	if len(x) < cgoMin {
		return SumExpGo(x, shift)
	}
	var out [2]C.double
	C.gd_sum_exp(ptr(x), C.long(len(x)), C.float(shift), &out[0])
	return float64(out[0]), float64(out[1])
}

// SiLUMul overwrites out[i] = g/(1+e^(−g))·u.
func SiLUMul(out, g, u []float32) {
	if len(g) < cgoMin {
		SiLUMulGo(out, g, u)
		return
	}
	out, u = out[:len(g)], u[:len(g)]
	C.gd_silu_mul(ptr(out), ptr(g), ptr(u), C.long(len(g)))
}

// SiLUMulBackward overwrites du = d·g·σ and dg = d·u·σ·(1 + g·(1−σ)),
// σ = 1/(1+e^(−g)).
func SiLUMulBackward(dg, du, d, g, u []float32) {
	if len(g) < cgoMin {
		SiLUMulBackwardGo(dg, du, d, g, u)
		return
	}
	dg, du, d, u = dg[:len(g)], du[:len(g)], d[:len(g)], u[:len(g)]
	C.gd_silu_mul_backward(ptr(dg), ptr(du), ptr(d), ptr(g), ptr(u), C.long(len(g)))
}
