// Kernels for the emulator's own tests. Written in the CUDA C++ subset our
// real kernels use: no headers, extern "C" __global__ entry points.

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ long long gtid() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }

extern "C" __global__ void vec_add(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int n) {
	long long i = gtid();
	if (i < n) c[i] = a[i] + b[i];
}

// axpy_grid_stride uses a grid-stride loop and every scalar parameter type.
extern "C" __global__ void __launch_bounds__(256) axpy_grid_stride(float* y, const float* x, float alpha,
		long long n, unsigned long long tag, double scale, size_t unused, unsigned flags) {
	for (long long i = gtid(); i < n; i += (long long)gridDim.x * blockDim.x)
		y[i] = (float)((alpha * x[i] + y[i]) * scale) + (float)(tag & flags) + (float)unused;
}

// ids records, for every thread of a 3-D grid of 3-D blocks, its linear
// global id, and counts visits per thread.
extern "C" __launch_bounds__(1024) __global__ void ids(unsigned* out, int* visits) {
	unsigned bid = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
	unsigned nt = blockDim.x * blockDim.y * blockDim.z;
	unsigned g = bid * nt + tid;
	out[3 * g + 0] = blockIdx.x | (blockIdx.y << 10) | (blockIdx.z << 20);
	out[3 * g + 1] = threadIdx.x | (threadIdx.y << 10) | (threadIdx.z << 20);
	out[3 * g + 2] = gridDim.x | (gridDim.y << 10) | (gridDim.z << 20);
	atomicAdd(&visits[g], 1);
}

// block_reduce: tree reduction in shared memory; one partial sum per block.
extern "C" __global__ void block_reduce(const float* x, float* partial, int n) {
	__shared__ float sh[1024];
	long long i = gtid();
	sh[threadIdx.x] = i < n ? x[i] : 0.0f;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
	return v;
}

// block_sum as in our kernels' common helpers: every thread gets the sum.
__device__ __forceinline__ float block_sum(float v, float* sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_sum(v);
	__syncthreads();
	if (lane == 0) sh[w] = v;
	__syncthreads();
	return warp_sum(lane < nw ? sh[lane] : 0.f);
}

__device__ __forceinline__ float block_max(float v, float* sh) {
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	v = warp_max(v);
	__syncthreads();
	if (lane == 0) sh[w] = v;
	__syncthreads();
	return warp_max(lane < nw ? sh[lane] : __int_as_float(0xff800000));
}

// row_softmax: one block per row, the pattern of our real kernels.
extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
	__shared__ float sh[32];
	const float* xr = x + (long long)blockIdx.x * cols;
	float* yr = y + (long long)blockIdx.x * cols;
	float m = __int_as_float(0xff800000);
	for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
	m = block_max(m, sh);
	float s = 0.f;
	for (int j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(xr[j] - m);
	s = block_sum(s, sh);
	float inv = __frcp_rn(s);
	for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = __expf(xr[j] - m) * inv;
}

// shuffles: per thread, the results of several shuffle forms (with blocks
// of 48 threads, lanes of a partial warp read lanes that do not exist).
extern "C" __global__ void shuffles(int* out) {
	unsigned t = threadIdx.x + blockIdx.x * blockDim.x;
	int lane = threadIdx.x & 31;
	int v = (int)t * 10;
	int* o = out + 9 * t;
	o[0] = __shfl_xor_sync(FULL_MASK, v, 1);
	o[1] = __shfl_xor_sync(FULL_MASK, v, 16, 8);  // partner in a later segment: own value
	o[2] = __shfl_down_sync(FULL_MASK, v, 5);
	o[3] = __shfl_down_sync(FULL_MASK, v, 5, 16);
	o[4] = __shfl_up_sync(FULL_MASK, v, 3, 8);
	o[5] = __shfl_sync(FULL_MASK, v, 7, 16);
	o[6] = (int)__ballot_sync(FULL_MASK, lane % 3 == 0);
	unsigned u = __shfl_down_sync(FULL_MASK, (unsigned)lane, 1);
	float f = __shfl_xor_sync(FULL_MASK, (float)lane + 0.5f, 31);
	o[7] = (int)u;
	o[8] = __float_as_int(f);
}

// warp_reduce: a warp-level sum with xor and with down shuffles.
extern "C" __global__ void warp_reduce(const float* x, float* xor_out, float* down_out) {
	unsigned t = threadIdx.x + blockIdx.x * blockDim.x;
	float v = x[t];
	float a = warp_sum(v);
	float b = v;
	for (int o = 16; o > 0; o >>= 1) b += __shfl_down_sync(FULL_MASK, b, o);
	xor_out[t] = a;
	if ((threadIdx.x & 31) == 0) down_out[t >> 5] = b;
}

extern "C" __global__ void atomics(float* fsum, int* isum, unsigned* usum, int* imax, int n) {
	long long i = gtid();
	if (i >= n) return;
	atomicAdd(fsum, 1.0f);
	atomicAdd(isum, (int)i);
	atomicAdd(usum, 2u);
	atomicMax(imax, (int)((i * 7919) % 100003));
}

// early_exit: threads past n return before the barrier the others use.
extern "C" __global__ void early_exit(float* y, int n) {
	__shared__ float sh[256];
	int i = threadIdx.x;
	if (i >= n) return;
	sh[i] = (float)i;
	__syncthreads();
	y[i] = sh[(i + 1) % n];
}

// no_params checks a kernel without parameters (writes nothing).
extern "C" __global__ void no_params() {}

namespace gd {
extern "C" {
__global__ void in_namespace(int* out) { out[threadIdx.x] = (int)threadIdx.x + 1; }
}
}  // namespace gd

// A kernel made by a macro.
#define UNARY(name, expr) \
	extern "C" __global__ void name(const float* x, float* y, int n) { \
		long long i = gtid(); \
		if (i < n) { float v = x[i]; y[i] = (expr); } \
	}
UNARY(unary_tanh, tanhf(v))
UNARY(unary_misc, rsqrtf(fabsf(v) + 1.f) + __fdividef(v, 3.f) + max(min(v, 2.f), -2.f) + (float)max(3, min(7, (int)v)))

// Not launchable: not extern "C", a declaration, a template.
__global__ void mangled(int* out) { out[0] = 1; }
extern "C" __global__ void declared_only(int* out);
template <int N> __global__ void templated(int* out) { out[0] = N; }

// missing_sync forgets the __syncthreads between writing shared memory and
// reading another thread's element: the emulator must show wrong values.
extern "C" __global__ void missing_sync(int* out) {
	__shared__ int sh[64];
	unsigned t = threadIdx.x, n = blockDim.x;
	sh[t] = (int)(blockIdx.x * 1000 + t);
	out[blockIdx.x * n + t] = sh[(t + 1) % n];
}
