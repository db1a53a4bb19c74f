// A second translation unit: a helper with the same name as one in
// basic.cu must not clash, and its kernels are found too.
#include "helpers.cuh"
__device__ __forceinline__ long long gtid() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

extern "C" __global__ void scale_bf16(const unsigned short* x, unsigned short* y, int n) {
	long long i = gtid();
	if (i < n) {
		float v = scale2(__uint_as_float((unsigned)x[i] << 16));
		unsigned u = __float_as_uint(v);
		u += 0x7fffu + ((u >> 16) & 1u);
		y[i] = (unsigned short)(u >> 16);
	}
}

// sync_count checks __syncthreads_count/_or/_and.
extern "C" __global__ void sync_count(int* out) {
	int c = __syncthreads_count(threadIdx.x % 3 == 0);
	int a = __syncthreads_and(threadIdx.x < 1000);
	int o = __syncthreads_or(threadIdx.x == 5);
	out[threadIdx.x] = c * 100 + a * 10 + o;
}

// deadlock: lane 0 waits at the block barrier while its warp waits for it
// at a shuffle. The watchdog must abort the process.
extern "C" __global__ void deadlock(float* x) {
	float v = x[threadIdx.x];
	if (threadIdx.x == 0 || threadIdx.x >= 32)
		__syncthreads();
	else
		v = __shfl_xor_sync(0xffffffffu, v, 1);
	x[threadIdx.x] = v;
}

// mad_plain: a*b+c as written, contracted only in a GDROTRAIN_EMU_FMA=1
// build. (Its own kernel: g++ fuses a product with one use only, and the
// one in mad_forms would be shared.)
extern "C" __global__ void mad_plain(float* out, float a, float b, float c) { out[0] = a * b + c; }

// mad_forms: a*b+c through the _rn intrinsics (never contracted) and as fmaf.
extern "C" __global__ void mad_forms(float* out, float a, float b, float c) {
	out[1] = __fadd_rn(__fmul_rn(a, b), c);
	out[2] = c + __fmul_rn(a, b);
	out[3] = __fmaf_rn(a, b, c);
	out[4] = fmaf(a, b, c);
}
