// Element-wise ops, row copies and reductions over whole tensors.

extern "C" __global__ void add_f32(float* dst, const float* src, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) dst[i] += src[i];
}

extern "C" __global__ void scale_f32(float* x, float s, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) x[i] *= s;
}

// sumsq_partial writes one float64 partial sum of x² per block; the host
// adds the partials (few hundred) in float64.
extern "C" __global__ void sumsq_partial(double* partial, const float* x, long long n) {
	__shared__ double sh[256];
	double s = 0;
	for (long long i = gtid(); i < n; i += gstride()) s += (double)x[i] * (double)x[i];
	s = block_sum_d(s, sh);
	if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Multi-tensor kernels (apex's multi_tensor_apply): one launch over T
// tensors. blk[0..T] is the prefix of the blocks each tensor gets (blk[0] = 0,
// blk[T] = gridDim.x) and tab holds W 64-bit words per tensor (pointers and
// the element count). Block j serves tensor mt_tensor(blk, T, j) as block
// j − blk[i] of a grid of blk[i+1] − blk[i] blocks, so each tensor sees the
// grid-stride loop its per-tensor kernel would run: the same elements per
// thread in the same order, hence bitwise the same results.
__device__ __forceinline__ int mt_tensor(const long long* blk, int T, long long j) {
	int lo = 0, hi = T; // blk[lo] <= j < blk[hi]
	while (hi - lo > 1) {
		int mid = (lo + hi) >> 1;
		if (blk[mid] <= j) lo = mid;
		else hi = mid;
	}
	return lo;
}

// sumsq_multi is sumsq_partial over T tensors: tab[2i] = x, tab[2i+1] = n;
// tensor i's blocks write partial[blk[i] … blk[i+1]).
extern "C" __global__ void sumsq_multi(double* partial, const long long* tab, const long long* blk, int T) {
	__shared__ double sh[256];
	int t = mt_tensor(blk, T, blockIdx.x);
	const float* x = (const float*)tab[2 * t];
	long long n = tab[2 * t + 1], nb = blk[t + 1] - blk[t];
	long long stride = nb * blockDim.x;
	double s = 0;
	for (long long i = ((long long)blockIdx.x - blk[t]) * blockDim.x + threadIdx.x; i < n; i += stride)
		s += (double)x[i] * (double)x[i];
	s = block_sum_d(s, sh);
	if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// zero_multi clears T float32 tensors: tab[2i] = x, tab[2i+1] = n.
extern "C" __global__ void zero_multi(const long long* tab, const long long* blk, int T) {
	int t = mt_tensor(blk, T, blockIdx.x);
	float* x = (float*)tab[2 * t];
	long long n = tab[2 * t + 1], stride = (blk[t + 1] - blk[t]) * blockDim.x;
	for (long long i = ((long long)blockIdx.x - blk[t]) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = 0.f;
}

// copy_rows: dst[dstIdx[k]] = src[srcIdx[k]] for k < n rows of width C; a
// null index means the identity. Grid: (n, ceil(C/blockDim)).
extern "C" __global__ void copy_rows(float* dst, const float* src, const int* dstIdx, const int* srcIdx, int n, int C) {
	int k = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= n || c >= C) return;
	long long d = dstIdx ? dstIdx[k] : k, s = srcIdx ? srcIdx[k] : k;
	dst[d * C + c] = src[s * C + c];
}

// accumulate_rows adds groups of source rows into destination rows in a
// fixed order, so the sum is deterministic (no atomics) and equals the
// sequential CPU loop: for group g, dst[dstRow[g]] += src[srcIdx[k]] for
// k in [offsets[g], offsets[g+1]). Grid: (groups, ceil(C/blockDim)).
extern "C" __global__ void accumulate_rows(float* dst, const float* src, const int* dstRow, const int* offsets,
                                           const int* srcIdx, int groups, int C) {
	int g = blockIdx.x;
	int c = blockIdx.y * blockDim.x + threadIdx.x;
	if (g >= groups || c >= C) return;
	float* out = dst + (long long)dstRow[g] * C + c;
	float acc = *out;
	for (int k = offsets[g]; k < offsets[g + 1]; k++) acc += src[(long long)srcIdx[k] * C + c];
	*out = acc;
}

extern "C" __global__ void swiglu_fwd(float* out, const float* gate, const float* up, long long n) {
	for (long long i = gtid(); i < n; i += gstride()) {
		float g = gate[i];
		out[i] = g / (1.f + expf(-g)) * up[i];
	}
}

// swiglu_fwd_h: the same on bf16 gate, up and out (activations kept in
// bf16 under bf16 products: ActivationHalf).
extern "C" __global__ void swiglu_fwd_h(unsigned short* out, const unsigned short* gate, const unsigned short* up,
                                        long long n) {
	for (long long i = gtid(); i < n; i += gstride()) {
		float g = ld(gate, i);
		out[i] = f32_to_bf16_bits(g / (1.f + expf(-g)) * ld(up, i));
	}
}

// d silu(g)/dg = σ(g)·(1 + g·(1−σ(g))). One body for every storage: T is
// gate and up's (fp32 or bf16), O the gradients' (fp32, or bf16 rounded
// once from the same fp32 value).
template <typename T, typename O>
__device__ __forceinline__ void swiglu_bwd_impl(O* dgate, O* dup, const float* dout, const T* gate, const T* up,
                                                long long n) {
	for (long long i = gtid(); i < n; i += gstride()) {
		float g = ld(gate, i), d = dout[i];
		float sig = 1.f / (1.f + expf(-g));
		store_as(dup, i, d * g * sig);
		store_as(dgate, i, d * ld(up, i) * sig * (1.f + g * (1.f - sig)));
	}
}

extern "C" __global__ void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                                      long long n) {
	swiglu_bwd_impl(dgate, dup, dout, gate, up, n);
}

// swiglu_bwd_h: swiglu_bwd reading bf16 gate and up.
extern "C" __global__ void swiglu_bwd_h(float* dgate, float* dup, const float* dout, const unsigned short* gate,
                                        const unsigned short* up, long long n) {
	swiglu_bwd_impl(dgate, dup, dout, gate, up, n);
}

// swiglu_bwd_hh: swiglu_bwd_h writing bf16 dgate and dup, the MLP
// product's gradient, which only products read (they round it to bf16
// anyway): 4 bytes an element written instead of 8.
extern "C" __global__ void swiglu_bwd_hh(unsigned short* dgate, unsigned short* dup, const float* dout,
                                         const unsigned short* gate, const unsigned short* up, long long n) {
	swiglu_bwd_impl(dgate, dup, dout, gate, up, n);
}

// adamw_elem is one element of AdamW (float64 arithmetic, float32 storage),
// shared by adamw and adamw_multi so the two are bitwise the same.
__device__ __forceinline__ void adamw_elem(float* p, unsigned short* p16, const float* g, float* m, float* v, long long i,
                                           float gscale, double beta1, double beta2, double lr, double wd, double eps,
                                           double bc1, double bc2) {
	double gi = __fmul_rn(g[i], gscale);
	double mi = beta1 * (double)m[i] + (1 - beta1) * gi;
	double vi = beta2 * (double)v[i] + (1 - beta2) * gi * gi;
	m[i] = (float)mi;
	v[i] = (float)vi;
	double pi = (double)p[i] * (1 - lr * wd);
	pi -= lr * (mi / bc1) / (sqrt(vi / bc2) + eps);
	p[i] = (float)pi;
	if (p16) p16[i] = f32_to_bf16_bits((float)pi);
}

// AdamW in torch.optim.AdamW's order (decay, then the bias-corrected step),
// computed in float64 like the CPU reference; bc1, bc2 are 1−β^step.
// adamw also writes p16, the weight's bf16 copy, when not null, and scales
// each gradient element by gscale first (gradient clipping's coefficient,
// rounded to float32 as scale_f32 would store it; 1 leaves it unchanged).
extern "C" __global__ void adamw(float* p, unsigned short* p16, const float* g, float* m, float* v, long long n,
                                 float gscale, double beta1, double beta2, double lr, double wd, double eps, double bc1,
                                 double bc2) {
	for (long long i = gtid(); i < n; i += gstride()) adamw_elem(p, p16, g, m, v, i, gscale, beta1, beta2, lr, wd, eps, bc1, bc2);
}

// adamw_multi is adamw over T tensors (see mt_tensor): tab[6i…6i+5] = p,
// p16 (0: none), g, m, v, n.
extern "C" __global__ void adamw_multi(const long long* tab, const long long* blk, int T, float gscale, double beta1,
                                       double beta2, double lr, double wd, double eps, double bc1, double bc2) {
	int t = mt_tensor(blk, T, blockIdx.x);
	const long long* e = tab + 6 * t;
	float* p = (float*)e[0];
	unsigned short* p16 = (unsigned short*)e[1];
	const float* g = (const float*)e[2];
	float *m = (float*)e[3], *v = (float*)e[4];
	long long n = e[5], stride = (blk[t + 1] - blk[t]) * blockDim.x;
	for (long long i = ((long long)blockIdx.x - blk[t]) * blockDim.x + threadIdx.x; i < n; i += stride)
		adamw_elem(p, p16, g, m, v, i, gscale, beta1, beta2, lr, wd, eps, bc1, bc2);
}

// add_cols: dst[r·W + col0 + j] += src[r·w + j] for r < R, j < w (LoRA's
// low-rank terms added into column blocks of the fused q/k/v product);
// T is float, or unsigned short for a bf16 activation, rounded once.
template <typename T>
__device__ __forceinline__ void add_cols_body(T* dst, const float* src, long long R, int W, int w, int col0) {
	for (long long i = gtid(); i < R * w; i += gstride()) {
		long long r = i / w, d = r * W + col0 + (i - r * w);
		store_as(dst, d, ld(dst, d) + src[i]);
	}
}

extern "C" __global__ void add_cols_f32(float* dst, const float* src, long long R, int W, int w, int col0) {
	add_cols_body(dst, src, R, W, w, col0);
}

extern "C" __global__ void add_cols_h(unsigned short* dst, const float* src, long long R, int W, int w, int col0) {
	add_cols_body(dst, src, R, W, w, col0);
}

// copy_cols: dst[r·w + j] = src[r·W + col0 + j]; copy_cols_h reads a bf16
// src (the fused q/k/v gradient under bf16 products), widening exactly.
template <typename T>
__device__ __forceinline__ void copy_cols_body(float* dst, const T* src, long long R, int W, int w, int col0) {
	for (long long i = gtid(); i < R * w; i += gstride()) {
		long long r = i / w;
		dst[i] = ld(src, r * W + col0 + (i - r * w));
	}
}

extern "C" __global__ void copy_cols(float* dst, const float* src, long long R, int W, int w, int col0) {
	copy_cols_body(dst, src, R, W, w, col0);
}

extern "C" __global__ void copy_cols_h(float* dst, const unsigned short* src, long long R, int W, int w, int col0) {
	copy_cols_body(dst, src, R, W, w, col0);
}
