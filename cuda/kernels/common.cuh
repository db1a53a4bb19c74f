// Shared helpers, prepended to every kernel file before compilation (NVRTC
// finds no toolkit headers, so nothing here includes any).
//
// Reductions are block-wide and every thread of the block must call them:
// they use __syncthreads and warp shuffles, and the CPU emulator used in
// tests runs the same rule. Blocks are 1-D with a multiple of 32 threads.

#define NEG_INF __int_as_float(0xff800000)
#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

// block_sum returns the sum of v over the block to every thread. sh holds
// at least 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads(); // sh may still be read by a previous reduction
	if (lane == 0) sh[w] = v;
	__syncthreads();
	// Every warp reduces the partials, so no thread skips a shuffle.
	return warp_sum(lane < nw ? sh[lane] : 0.f);
}

__device__ __forceinline__ float block_max(float v, float* sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) sh[w] = v;
	__syncthreads();
	return warp_max(lane < nw ? sh[lane] : NEG_INF);
}

// block_sum_d is block_sum in float64 (for sums of squares that would
// overflow float32), a tree in shared memory; sh holds blockDim.x doubles
// and blockDim.x is a power of two.
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
	__syncthreads();
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	return sh[0];
}

// Global thread index and stride of a 1-D grid-stride loop.
__device__ __forceinline__ long long gtid() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long gstride() { return (long long)gridDim.x * blockDim.x; }

// ld reads element i as float from float storage or from bf16 bits (the
// upper half of a float32), so one kernel body serves both storages.
__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const unsigned short* p, long long i) { return __uint_as_float(((unsigned)p[i]) << 16); }

// f32_to_bf16_bits rounds to nearest even; NaN stays NaN.
__device__ __forceinline__ unsigned short f32_to_bf16_bits(float f) {
	unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

// store_as writes v as element i of float storage, or rounded to bf16 bits
// (a writable bf16 activation), so one kernel body serves both outputs.
__device__ __forceinline__ void store_as(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void store_as(unsigned short* p, long long i, float v) { p[i] = f32_to_bf16_bits(v); }

// mma_bf16_16816: one warp's c (16 × 8, fp32) += A (16 × 16, bf16, row
// major) · B (16 × 8, bf16, column major) on the tensor cores, every lane
// calling it with its fragments as the PTX ISA lays them out for
// mma.m16n8k16 (g = lane/4, t = lane%4): a[0] = A[g][2t, 2t+1],
// a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9];
// b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g] (the lower index in the
// lower 16 bits); c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][2t, 2t+1].
// sm_80 and later; the CPU emulator computes the same product.
__device__ __forceinline__ void mma_bf16_16816(float* c, const unsigned* a, const unsigned* b) {
#if defined(GDROTRAIN_CUDA_EMULATOR)
	emu_mma_bf16_16816(c, a, b);
#elif __CUDA_ARCH__ >= 800
	asm volatile(
	    "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
	    "{%0, %1, %2, %3};"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
	__trap(); // the backend never launches tensor-core kernels before sm_80
#endif
}

// bf16x2 packs two floats, rounded to bf16, into one register (lo in the
// lower half), as mma fragments hold them.
__device__ __forceinline__ unsigned bf16x2(float lo, float hi) {
	return (unsigned)f32_to_bf16_bits(lo) | ((unsigned)f32_to_bf16_bits(hi) << 16);
}
