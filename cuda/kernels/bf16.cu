// bf16 storage: frozen tensors (the reference model) and the bf16 KV cache.
// bf16 is the upper half of a float32, converted with round-to-nearest-even
// by bit operations (common.cuh; no toolkit header needed).


extern "C" __global__ void f32_to_bf16(unsigned short* dst, const float* src, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) dst[i] = f32_to_bf16_bits(src[i]);
}

extern "C" __global__ void bf16_to_f32(float* dst, const unsigned short* src, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) dst[i] = ld(src, i);
}

// copy_rows_bf16: dst[k] = float(src[srcIdx[k]]) for rows of width C (the
// embedding lookup of a frozen table). Grid: (n, ceil(C/blockDim)).
extern "C" __global__ void copy_rows_bf16(float* dst, const unsigned short* src, const int* srcIdx, int n, int C) {
	int k = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= n || c >= C) return;
	dst[(long long)k * C + c] = ld(src, (long long)srcIdx[k] * C + c);
}

// scatter_rows_bf16: dst[idx[k]] = bf16(src[k]) for rows of width C (new
// keys and values written into a bf16 KV cache). Grid: (n, ceil(C/blockDim)).
extern "C" __global__ void scatter_rows_bf16(unsigned short* dst, const float* src, const int* idx, int n, int C) {
	int k = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= n || c >= C) return;
	dst[(long long)idx[k] * C + c] = f32_to_bf16_bits(src[(long long)k * C + c]);
}
