// bf16 storage for frozen tensors (the reference model): bf16 is the upper
// half of a float32, converted with round-to-nearest-even by bit operations
// (no toolkit header needed).

__device__ __forceinline__ unsigned short f32_to_bf16_bits(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40); // NaN stays NaN
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

__device__ __forceinline__ float bf16_bits_to_f32(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }

extern "C" __global__ void f32_to_bf16(unsigned short* dst, const float* src, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) dst[i] = f32_to_bf16_bits(src[i]);
}

extern "C" __global__ void bf16_to_f32(float* dst, const unsigned short* src, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) dst[i] = bf16_bits_to_f32(src[i]);
}

// copy_rows_bf16: dst[k] = float(src[srcIdx[k]]) for rows of width C (the
// embedding lookup of a frozen table). Grid: (n, ceil(C/blockDim)).
extern "C" __global__ void copy_rows_bf16(float* dst, const unsigned short* src, const int* srcIdx, int n, int C) {
	int k = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= n || c >= C) return;
	dst[(long long)k * C + c] = bf16_bits_to_f32(src[(long long)srcIdx[k] * C + c]);
}
