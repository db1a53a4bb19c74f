package model

// The fp8 (e4m3) KV cache: the number format, the per-(token, KV head)
// scales, and the interface a backend implements to hold such a cache
// (precision.kv_cache fp8; docs/gpu.md, "FP8 KV cache").
//
// e4m3 here is the OCP 8-bit format NVIDIA calls E4M3 (__nv_fp8_e4m3) and
// vLLM stores for kv_cache_dtype=fp8: a sign, 4 exponent bits (bias 7) and
// 3 mantissa bits, no infinities, S.1111.111 the only NaN, 448 the largest
// finite value, 2^-9 the smallest subnormal. Conversion rounds to nearest
// even and saturates (finite values beyond ±448 become ±448, as the
// hardware's cvt.rn.satfinite does); NaN stays NaN.
//
// Scales: each token's key (and value) row of each KV head is stored as
// e4m3 codes q with one float32 scale s = amax/448, amax the row's largest
// finite |x|, and read back as q·s. A scale per (token, head) is computed
// from the values being written, so no calibration pass is needed, a
// token's codes never change once written (appending, copying a prefix and
// re-prefilling after pre-emption give the same bytes), and one outlier
// token or head costs precision only in its own row. vLLM's default is one
// scale per layer (calibrated, or 1.0); per-token scales cost 4 bytes per
// D-byte row (3 % at D = 128) and keep the error relative to each row.
//
// This file is the float64-checked reference of the format (the CUDA
// kernels in cuda/kernels/fp8.cuh compute the same bits) and the row
// layout backend and memory plan share.

import (
	"fmt"
	"math"
)

// E4M3Max is the largest finite e4m3 value.
const E4M3Max = 448

// F32ToE4M3 rounds f to the nearest e4m3 code (ties to even), saturating
// at ±448; NaN gives a NaN code (0x7f or 0xff).
func F32ToE4M3(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	a := u & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return sign | 0x7f
	case a >= 0x43e00000: // ≥ 448, Inf included: saturate
		return sign | 0x7e
	case a < 0x3c800000: // below 2^-6, the smallest normal: a multiple of 2^-9
		// |f|·2^9 is exact; its nearest even integer is the code (8 carries
		// into the smallest normal, 0x08, as it should).
		return sign | uint8(math.RoundToEven(float64(math.Float32frombits(a))*512))
	}
	// Normal: rebias the exponent (127 → 7) and round the 20 dropped
	// mantissa bits to nearest even; a carry moves into the exponent.
	h := a - 120<<23
	h += 0x7ffff + (h>>20)&1
	return sign | uint8(h>>20)
}

// E4M3ToF32 widens an e4m3 code exactly (NaN as the quiet NaN of its
// sign, 0x7fc00000 or 0xffc00000, as the kernels write it).
func E4M3ToF32(c uint8) float32 {
	neg := c&0x80 != 0
	e, m := int(c>>3)&0xf, int(c&7)
	var v float64
	switch {
	case e == 0xf && m == 7:
		return math.Float32frombits(0x7fc00000 | uint32(c>>7)<<31)
	case e == 0:
		v = float64(m) / 512
	default:
		v = math.Ldexp(1+float64(m)/8, e-7)
	}
	if neg {
		v = -v
	}
	return float32(v)
}

// E4M3Scale is the scale of a row whose largest finite |x| is amax:
// amax/448 (0 for an all-zero row, whose codes are then all 0).
func E4M3Scale(amax float32) float32 { return amax / E4M3Max }

// QuantizeE4M3 writes x's codes to q and returns the scale, exactly as the
// CUDA backend does when it writes a cache row: amax over the finite
// values (NaN ignored, so a NaN element stays NaN and its neighbours keep
// their precision), codes of x·(448/amax). An Inf makes amax Inf and every
// code of the row NaN on dequantisation (0·Inf), as attention over an Inf
// key would give anyway.
func QuantizeE4M3(q []uint8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax { // NaN compares false
			amax = a
		}
	}
	inv := float32(0)
	if amax > 0 {
		inv = E4M3Max / amax
	}
	for i, v := range x {
		q[i] = F32ToE4M3(v * inv)
	}
	return E4M3Scale(amax)
}

// DequantizeE4M3 writes code·scale (float32 products) to x.
func DequantizeE4M3(x []float32, q []uint8, scale float32) {
	for i, c := range q {
		x[i] = E4M3ToF32(c) * scale
	}
}

// RoundTripE4M3 returns x as an fp8 cache row holds it: quantised with its
// own scale and read back. Tests build the reference a GPU fp8 cache must
// match from it.
func RoundTripE4M3(x []float32) []float32 {
	q := make([]uint8, len(x))
	s := QuantizeE4M3(q, x)
	out := make([]float32, len(x))
	DequantizeE4M3(out, q, s)
	return out
}

// FP8KVRowBytes is the bytes one token of one layer's K (or V) takes in an
// fp8 cache of g KV heads of d dims: the g·d codes, then the g float32
// scales, each part padded to 16 bytes so every row and every head's codes
// (d a multiple of 16) start 16-byte aligned for vector loads. At
// Qwen3-1.7B (g = 8, d = 128): 1,024 + 32 = 1,056 bytes against 2,048 in
// bf16.
func FP8KVRowBytes(g, d int) int64 {
	pad := func(n int) int64 { return (int64(n) + 15) &^ 15 }
	return pad(g*d) + pad(4*g)
}

// CheckKVCache says why m's KV cache cannot be held as asked on its
// backend (nil when it can): a bf16 or fp8 cache (KVCacheBF16,
// KVCacheFP8) needs a backend with KVFormats, an fp8 one that it accepts
// the model. The trainer calls it at setup so a
// run never samples from another cache than the one configured.
func (m *Model) CheckKVCache() error {
	if !m.KVCacheFP8 && !m.KVCacheBF16 {
		return nil
	}
	f := SamplerCapsOf(m.B).KV
	if f == nil {
		format := map[bool]string{false: "bf16", true: "fp8"}[m.KVCacheFP8]
		return fmt.Errorf("precision.kv_cache %s: the %s backend has no %s KV cache (model.KVFormats): set precision.kv_cache to fp32, or run on the fast CPU backend or a GPU", format, m.B.Name(), format)
	}
	if !m.KVCacheFP8 {
		return nil
	}
	return f.FP8KV(m.Cfg)
}

// fp8Cache reports whether m's cache is fp8 on its backend.
func (m *Model) fp8Cache() (KVFormats, bool) {
	f := SamplerCapsOf(m.B).KV
	return f, f != nil && m.KVCacheFP8 && f.FP8KV(m.Cfg) == nil
}
