// The fp8 (e4m3) KV cache's number format and row layout, prepended after
// common.cuh to the kernel files that say they use it (kernels.go). Written
// by hand with integer and float32 operations, no toolkit header (NVRTC
// finds none on users' nodes) and no cvt.e4m3 instruction, so the bits are
// those of model/fp8.go's reference on every architecture and on the
// emulator.
//
// A cache tensor (rows, G, D) of fp8 is rows of kv8_row_bytes(G, D) bytes:
// the G·D codes (head g at byte g·D), padded to 16 bytes, then G float32
// scales, padded to 16. A head's value is code·scale, scale = amax/448 of
// the row's head as it was written. D is a multiple of 16, so every head's
// codes start 16-byte aligned and load as uint4.

#define KV8_MAX 448.f

__device__ __forceinline__ long long kv8_pad16(long long n) { return (n + 15) & ~15ll; }
__device__ __forceinline__ long long kv8_row_bytes(int G, int D) { return kv8_pad16((long long)G * D) + kv8_pad16(4ll * G); }

// kv8_head is the address of head g's codes in cache row `row`.
__device__ __forceinline__ const unsigned char* kv8_head(const unsigned char* base, long long row, int G, int g, int D) {
	return base + row * kv8_row_bytes(G, D) + (long long)g * D;
}

// kv8_scale is head g's scale in cache row `row`.
__device__ __forceinline__ float kv8_scale(const unsigned char* base, long long row, int G, int g, int D) {
	return *(const float*)(base + row * kv8_row_bytes(G, D) + kv8_pad16((long long)G * D) + 4ll * g);
}

// f32_to_e4m3 rounds to nearest even, saturating at ±448; NaN stays NaN
// (model.F32ToE4M3).
__device__ __forceinline__ unsigned char f32_to_e4m3(float f) {
	unsigned u = __float_as_uint(f);
	unsigned sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
	if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);
	if (a >= 0x43e00000u) return (unsigned char)(sign | 0x7eu); // ≥ 448, Inf included
	if (a < 0x3c800000u) // under 2^-6: |f|·2^9 (exact) to the nearest even integer
		return (unsigned char)(sign | (unsigned)rintf(__uint_as_float(a) * 512.f));
	unsigned h = a - (120u << 23); // rebias 127 → 7, then round the 20 dropped bits
	h += 0x7ffffu + ((h >> 20) & 1u);
	return (unsigned char)(sign | (h >> 20));
}

// e4m3_to_f32 widens a code exactly: a normal code's exponent and
// mantissa move into place under float32's bias (+120); a subnormal one is
// m·2^-9; S.1111.111 is NaN.
__device__ __forceinline__ float e4m3_to_f32(unsigned c) {
	unsigned s = (c & 0x80u) << 24, em = c & 0x7fu;
	float v = em < 8u ? (float)em * 0.001953125f : __uint_as_float((em << 20) + (120u << 23));
	v = __uint_as_float(__float_as_uint(v) | s);
	return em == 0x7fu ? __uint_as_float(0x7fc00000u | s) : v;
}

// kv8_decode16 widens the 16 codes of a uint4 (byte i of the load is
// element i) into x.
__device__ __forceinline__ void kv8_decode16(float* x, uint4 raw) {
	unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
#pragma unroll
		for (int b = 0; b < 4; b++) x[4 * i + b] = e4m3_to_f32((w[i] >> (8 * b)) & 0xffu);
	}
}
