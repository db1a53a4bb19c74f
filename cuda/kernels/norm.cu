// RMSNorm and RoPE.

// rmsnorm_fwd: one block per row of width n (≤ 256 threads). rstd may be
// null. The sum of squares is taken in float64: rows of large activations
// would overflow float32 and give rstd = 0.
template <typename O>
__device__ __forceinline__ void rmsnorm_fwd_impl(O* out, float* rstd, const float* x, const float* w, int n, float eps) {
	__shared__ double sh[256];
	long long r = blockIdx.x;
	const float* xr = x + r * n;
	double ss = 0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) ss += (double)xr[j] * xr[j];
	ss = block_sum_d(ss, sh);
	float rs = (float)(1.0 / sqrt(ss / n + (double)eps));
	if (rstd && threadIdx.x == 0) rstd[r] = rs;
	for (int j = threadIdx.x; j < n; j += blockDim.x) store_as(out, r * n + j, (xr[j] * rs) * w[j]);
}

extern "C" __global__ void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int n, float eps) {
	rmsnorm_fwd_impl(out, rstd, x, w, n, eps);
}

// rmsnorm_fwd_h writes a bf16 output (an ActivationHalf that only products
// read), statistics still from the fp32 input in float64.
extern "C" __global__ void rmsnorm_fwd_h(unsigned short* out, float* rstd, const float* x, const float* w, int n,
                                         float eps) {
	rmsnorm_fwd_impl(out, rstd, x, w, n, eps);
}

// rmsnorm_bwd_dx: dx = r·(g − x̂·mean(g ⊙ x̂)) with g = dout ⊙ w, x̂ = x·r;
// with res (rmsnorm_bwd_dx_res), dx = res + that, the float32 value
// rounded first and added without contraction, as a separate add_f32
// would.
//
// rmsnorm_bwd_row is row r of it; with acc (rmsnorm_bwd_dxdw), each thread
// also adds dout·x·rstd into acc[j] for its columns j, the term
// rmsnorm_bwd_dw_partial adds, in the same expression.
template <bool RES>
__device__ __forceinline__ void rmsnorm_bwd_row(long long r, float* dx, const float* dout, const float* x, const float* w,
                                                const float* rstd, const float* res, int n, unsigned short* dx16,
                                                float* acc, float* sh) {
	float rs = rstd[r];
	const float *xr = x + r * n, *dr = dout + r * n;
	float s = 0.f;
	for (int j = threadIdx.x; j < n; j += blockDim.x) s += dr[j] * w[j] * xr[j] * rs;
	float m = block_sum(s, sh) / n;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float v = rs * (dr[j] * w[j] - xr[j] * rs * m);
		v = RES ? __fadd_rn(v, res[r * n + j]) : v;
		dx[r * n + j] = v;
		if (dx16) dx16[r * n + j] = f32_to_bf16_bits(v);
		if (acc) acc[j] += dr[j] * xr[j] * rs;
	}
}

template <bool RES>
__device__ __forceinline__ void rmsnorm_bwd_dx_impl(float* dx, const float* dout, const float* x, const float* w,
                                                    const float* rstd, const float* res, int n,
                                                    unsigned short* dx16 = nullptr) {
	__shared__ float sh[32];
	rmsnorm_bwd_row<RES>(blockIdx.x, dx, dout, x, w, rstd, res, n, dx16, nullptr, sh);
}

// RMSNORM_DW_MAXN is the widest row rmsnorm_bwd_dxdw takes (its column
// partials live in shared memory; wider rows take rmsnorm_bwd_dx and
// rmsnorm_bwd_dw_partial).
#define RMSNORM_DW_MAXN 8192

// rmsnorm_bwd_dxdw: rmsnorm_bwd_dx over the rows of chunk blockIdx.x
// (rowsPerChunk rows, in order), with dw's column partials of the chunk
// summed in the same pass: partial[c, j] is rmsnorm_bwd_dw_partial's value
// bit for bit (the same terms added in the same order, from 0), without its
// second read of dout and x. res and dx16 may be null. Grid: (chunks).
template <bool RES>
__device__ __forceinline__ void rmsnorm_bwd_dxdw_impl(float* dx, unsigned short* dx16, float* partial, const float* dout,
                                                      const float* x, const float* w, const float* rstd,
                                                      const float* res, int rows, int n, int rowsPerChunk) {
	__shared__ float sh[32];
	__shared__ float acc[RMSNORM_DW_MAXN];
	for (int j = threadIdx.x; j < n; j += blockDim.x) acc[j] = 0.f; // each thread owns its columns
	int r0 = blockIdx.x * rowsPerChunk, r1 = min(rows, r0 + rowsPerChunk);
	for (long long r = r0; r < r1; r++) rmsnorm_bwd_row<RES>(r, dx, dout, x, w, rstd, res, n, dx16, acc, sh);
	for (int j = threadIdx.x; j < n; j += blockDim.x) partial[(long long)blockIdx.x * n + j] = acc[j];
}

extern "C" __global__ void rmsnorm_bwd_dxdw(float* dx, float* partial, const float* dout, const float* x, const float* w,
                                            const float* rstd, int rows, int n, int rowsPerChunk) {
	rmsnorm_bwd_dxdw_impl<false>(dx, nullptr, partial, dout, x, w, rstd, nullptr, rows, n, rowsPerChunk);
}

// rmsnorm_bwd_dxdw_res adds res (rmsnorm_bwd_dx_res) and writes dx16 when
// not null (rmsnorm_bwd_dx_res_h).
extern "C" __global__ void rmsnorm_bwd_dxdw_res(float* dx, unsigned short* dx16, float* partial, const float* dout,
                                                const float* x, const float* w, const float* rstd, const float* res,
                                                int rows, int n, int rowsPerChunk) {
	rmsnorm_bwd_dxdw_impl<true>(dx, dx16, partial, dout, x, w, rstd, res, rows, n, rowsPerChunk);
}

extern "C" __global__ void rmsnorm_bwd_dx(float* dx, const float* dout, const float* x, const float* w, const float* rstd,
                                          int n) {
	rmsnorm_bwd_dx_impl<false>(dx, dout, x, w, rstd, nullptr, n);
}

extern "C" __global__ void rmsnorm_bwd_dx_res(float* dx, const float* dout, const float* x, const float* w,
                                              const float* rstd, const float* res, int n) {
	rmsnorm_bwd_dx_impl<true>(dx, dout, x, w, rstd, res, n);
}

// rmsnorm_bwd_dx_res_h also writes dx16, dx rounded to bf16: the copy the
// products that read dx (the weight gradients' and the next input
// gradient's) take under bf16 products, written here for 2 bytes an
// element instead of a conversion pass's 6.
extern "C" __global__ void rmsnorm_bwd_dx_res_h(float* dx, unsigned short* dx16, const float* dout, const float* x,
                                                const float* w, const float* rstd, const float* res, int n) {
	rmsnorm_bwd_dx_impl<true>(dx, dout, x, w, rstd, res, n, dx16);
}

// add_rmsnorm_fwd: sum = x + y, then rmsnorm_fwd of sum, one block per row
// (the residual add fused into the norm after it: model.ResidualNormer).
// sum may alias x or y: each thread reads its elements before writing them,
// and reads back only what it wrote.
template <typename O>
__device__ __forceinline__ void add_rmsnorm_fwd_impl(float* sum, O* out, float* rstd, const float* x, const float* y,
                                                     const float* w, int n, float eps) {
	__shared__ double sh[256];
	long long r = blockIdx.x;
	const float *xr = x + r * n, *yr = y + r * n;
	float* sr = sum + r * n;
	double ss = 0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		float v = __fadd_rn(xr[j], yr[j]);
		sr[j] = v;
		ss += (double)v * v;
	}
	ss = block_sum_d(ss, sh);
	float rs = (float)(1.0 / sqrt(ss / n + (double)eps));
	if (rstd && threadIdx.x == 0) rstd[r] = rs;
	for (int j = threadIdx.x; j < n; j += blockDim.x) store_as(out, r * n + j, (sr[j] * rs) * w[j]);
}

extern "C" __global__ void add_rmsnorm_fwd(float* sum, float* out, float* rstd, const float* x, const float* y,
                                           const float* w, int n, float eps) {
	add_rmsnorm_fwd_impl(sum, out, rstd, x, y, w, n, eps);
}

// add_rmsnorm_fwd_h writes a bf16 normed output (an ActivationHalf).
extern "C" __global__ void add_rmsnorm_fwd_h(float* sum, unsigned short* out, float* rstd, const float* x,
                                             const float* y, const float* w, int n, float eps) {
	add_rmsnorm_fwd_impl(sum, out, rstd, x, y, w, n, eps);
}

// rmsnorm_bwd_dw_partial: partial[c, j] = Σ over the rows of chunk c of
// dout·x·rstd. Grid: (ceil(n/blockDim), chunks). The chunks are then summed
// by sum_chunks in a fixed order (deterministic, no atomics).
extern "C" __global__ void rmsnorm_bwd_dw_partial(float* partial, const float* dout, const float* x, const float* rstd,
                                                  int rows, int n, int rowsPerChunk) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	int r0 = blockIdx.y * rowsPerChunk, r1 = min(rows, r0 + rowsPerChunk);
	float acc = 0.f;
	for (long long r = r0; r < r1; r++) acc += dout[r * n + j] * x[r * n + j] * rstd[r];
	partial[(long long)blockIdx.y * n + j] = acc;
}

// sum_chunks: out[j] += Σ_c partial[c, j].
extern "C" __global__ void sum_chunks(float* out, const float* partial, int chunks, int n) {
	int j = blockIdx.x * blockDim.x + threadIdx.x;
	if (j >= n) return;
	float acc = 0.f;
	for (int c = 0; c < chunks; c++) acc += partial[(long long)c * n + j];
	out[j] += acc;
}

// rope rotates pairs (i, i+D/2) of each head of x (N, H, D) by the angle of
// position pos[t]; cosT/sinT (maxPos, D/2) are tables computed in float64 on
// the host. sign = −1 rotates backwards (the backward pass).
extern "C" __global__ void rope(float* x, const int* pos, const float* cosT, const float* sinT, int N, int H, int D,
                                float sign) {
	int half = D / 2;
	long long total = (long long)N * H * half;
	for (long long e = gtid(); e < total; e += gstride()) {
		int i = e % half;
		long long nh = e / half;
		int t = nh / H;
		long long p = pos[t];
		float c = cosT[p * half + i], s = sign * sinT[p * half + i];
		float* base = x + nh * D;
		float x1 = base[i], x2 = base[i + half];
		base[i] = x1 * c - x2 * s;
		base[i + half] = x2 * c + x1 * s;
	}
}

// The fused q/k/v projection's split (SplitQKV, backend_qkv.go). A row of
// qkv holds, per token, H query heads, G key heads and G value heads of D
// elements. One block of QKV_THREADS per (token, head): query and key heads
// are RMS-normed by their weight and rotated (thread i owns the pairs
// (i, i+D/2) for i ≡ threadIdx.x), value heads copied, so the product is
// read once and qn, kn, v written once. The arithmetic is rmsnorm_fwd's
// then rope's, in the same order.
#define QKV_THREADS 64

template <typename T, typename O>
__device__ __forceinline__ void qkv_split_fwd_impl(O* qn, O* kn, O* v, float* rstdQ, float* rstdK, const T* qkv,
                                                   const float* qw, const float* kw, const int* pos, const float* cosT,
                                                   const float* sinT, int H, int G, int D, float eps) {
	__shared__ double sh[QKV_THREADS];
	long long t = blockIdx.x;
	int j = blockIdx.y, half = D / 2;
	const T* src = qkv + (t * (H + 2 * G) + j) * D;
	if (j >= H + G) { // a value head: the whole block takes this branch
		O* dst = v + (t * G + j - H - G) * D;
		for (int i = threadIdx.x; i < D; i += blockDim.x) store_as(dst, i, ld(src, i));
		return;
	}
	double ss = 0;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		float x = ld(src, i);
		ss += (double)x * x;
	}
	ss = block_sum_d(ss, sh);
	float rs = (float)(1.0 / sqrt(ss / D + (double)eps));
	bool isQ = j < H;
	const float* w = isQ ? qw : kw;
	O* dst = isQ ? qn + (t * H + j) * D : kn + (t * G + j - H) * D;
	if (threadIdx.x == 0) {
		if (isQ) rstdQ[t * H + j] = rs;
		else rstdK[t * G + j - H] = rs;
	}
	long long p = pos[t];
	for (int i = threadIdx.x; i < half; i += blockDim.x) {
		float y1 = (ld(src, i) * rs) * w[i], y2 = (ld(src, i + half) * rs) * w[i + half];
		float c = cosT[p * half + i], s = sinT[p * half + i];
		store_as(dst, i, y1 * c - y2 * s);
		store_as(dst, i + half, y2 * c + y1 * s);
	}
}

extern "C" __global__ void qkv_split_fwd(float* qn, float* kn, float* v, float* rstdQ, float* rstdK, const float* qkv,
                                         const float* qw, const float* kw, const int* pos, const float* cosT,
                                         const float* sinT, int H, int G, int D, float eps) {
	qkv_split_fwd_impl(qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, cosT, sinT, H, G, D, eps);
}

// qkv_split_fwd_hh reads a bf16 product and writes bf16 qn, kn, v (a
// training pass under bf16 products, model.ActivationStore).
extern "C" __global__ void qkv_split_fwd_hh(unsigned short* qn, unsigned short* kn, unsigned short* v, float* rstdQ,
                                            float* rstdK, const unsigned short* qkv, const float* qw, const float* kw,
                                            const int* pos, const float* cosT, const float* sinT, int H, int G, int D,
                                            float eps) {
	qkv_split_fwd_impl(qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, cosT, sinT, H, G, D, eps);
}

// qkv_split_fwd_h reads a bf16 product (ActivationHalf).
extern "C" __global__ void qkv_split_fwd_h(float* qn, float* kn, float* v, float* rstdQ, float* rstdK,
                                           const unsigned short* qkv, const float* qw, const float* kw, const int* pos,
                                           const float* cosT, const float* sinT, int H, int G, int D, float eps) {
	qkv_split_fwd_impl(qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, cosT, sinT, H, G, D, eps);
}

// qkv_unrotate is the gradient before RoPE at element i of a head whose
// gradient after it is dy: the rotation by −angle (rope with sign −1).
__device__ __forceinline__ float qkv_unrotate(const float* dy, int i, int half, float c, float s) {
	return i < half ? dy[i] * c + dy[i + half] * s : dy[i] * c - dy[i - half] * s;
}

// qkv_split_bwd_dx: one block per (token, head), as the forward. Query and
// key heads: g = the inverse rotation of the output gradient, then
// rmsnorm_bwd_dx's dx = r·(g ⊙ w − x̂·mean(g ⊙ w ⊙ x̂)); value heads: dv.
template <typename T, typename O>
__device__ __forceinline__ void qkv_split_bwd_dx_impl(O* dqkv, const float* dqn, const float* dkn, const float* dv,
                                                      const T* qkv, const float* qw, const float* kw, const float* rstdQ,
                                                      const float* rstdK, const int* pos, const float* cosT,
                                                      const float* sinT, int H, int G, int D) {
	__shared__ float sh[32];
	long long t = blockIdx.x;
	int j = blockIdx.y, half = D / 2;
	O* dst = dqkv + (t * (H + 2 * G) + j) * D;
	if (j >= H + G) {
		const float* src = dv + (t * G + j - H - G) * D;
		for (int i = threadIdx.x; i < D; i += blockDim.x) store_as(dst, i, src[i]);
		return;
	}
	const T* x = qkv + (t * (H + 2 * G) + j) * D;
	bool isQ = j < H;
	const float* w = isQ ? qw : kw;
	const float* dy = isQ ? dqn + (t * H + j) * D : dkn + (t * G + j - H) * D;
	float rs = isQ ? rstdQ[t * H + j] : rstdK[t * G + j - H];
	long long p = pos[t];
	float s = 0.f;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		int pi = i < half ? i : i - half;
		float g = qkv_unrotate(dy, i, half, cosT[p * half + pi], sinT[p * half + pi]);
		s += g * w[i] * ld(x, i) * rs;
	}
	float m = block_sum(s, sh) / D;
	for (int i = threadIdx.x; i < D; i += blockDim.x) {
		int pi = i < half ? i : i - half;
		float g = qkv_unrotate(dy, i, half, cosT[p * half + pi], sinT[p * half + pi]);
		store_as(dst, i, rs * (g * w[i] - ld(x, i) * rs * m));
	}
}

extern "C" __global__ void qkv_split_bwd_dx(float* dqkv, const float* dqn, const float* dkn, const float* dv,
                                            const float* qkv, const float* qw, const float* kw, const float* rstdQ,
                                            const float* rstdK, const int* pos, const float* cosT, const float* sinT,
                                            int H, int G, int D) {
	qkv_split_bwd_dx_impl(dqkv, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, cosT, sinT, H, G, D);
}

extern "C" __global__ void qkv_split_bwd_dx_h(float* dqkv, const float* dqn, const float* dkn, const float* dv,
                                              const unsigned short* qkv, const float* qw, const float* kw,
                                              const float* rstdQ, const float* rstdK, const int* pos, const float* cosT,
                                              const float* sinT, int H, int G, int D) {
	qkv_split_bwd_dx_impl(dqkv, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, cosT, sinT, H, G, D);
}

// qkv_split_bwd_dx_hh: qkv_split_bwd_dx_h writing a bf16 dqkv (rounded
// once from the same fp32 value), which only products read.
extern "C" __global__ void qkv_split_bwd_dx_hh(unsigned short* dqkv, const float* dqn, const float* dkn, const float* dv,
                                               const unsigned short* qkv, const float* qw, const float* kw,
                                               const float* rstdQ, const float* rstdK, const int* pos, const float* cosT,
                                               const float* sinT, int H, int G, int D) {
	qkv_split_bwd_dx_impl(dqkv, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, cosT, sinT, H, G, D);
}

// qkv_split_bwd_dw_partial: partial[c, i] = Σ over the (token, head) rows
// of chunk c of g_i·x_i·rstd, for the `heads` heads starting at head h0 of
// each fused row (queries: h0 = 0; keys: h0 = H), g being dy's inverse
// rotation (dy, rstd: (rows = N·heads, D) and (rows)). Grid:
// (ceil(D/blockDim), chunks); sum_chunks adds the chunks in order.
template <typename T>
__device__ __forceinline__ void qkv_split_bwd_dw_impl(float* partial, const float* dy, const T* qkv, const float* rstd,
                                                      const int* pos, const float* cosT, const float* sinT, int heads,
                                                      int h0, int width, int D, int rows, int rowsPerChunk) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= D) return;
	int half = D / 2, pi = i < half ? i : i - half;
	int r0 = blockIdx.y * rowsPerChunk, r1 = min(rows, r0 + rowsPerChunk);
	float acc = 0.f;
	for (long long r = r0; r < r1; r++) {
		long long t = r / heads;
		int h = (int)(r - t * heads);
		long long p = pos[t];
		float g = qkv_unrotate(dy + r * D, i, half, cosT[p * half + pi], sinT[p * half + pi]);
		acc += g * ld(qkv, t * width + (long long)(h0 + h) * D + i) * rstd[r];
	}
	partial[(long long)blockIdx.y * D + i] = acc;
}

extern "C" __global__ void qkv_split_bwd_dw_partial(float* partial, const float* dy, const float* qkv, const float* rstd,
                                                    const int* pos, const float* cosT, const float* sinT, int heads,
                                                    int h0, int width, int D, int rows, int rowsPerChunk) {
	qkv_split_bwd_dw_impl(partial, dy, qkv, rstd, pos, cosT, sinT, heads, h0, width, D, rows, rowsPerChunk);
}

extern "C" __global__ void qkv_split_bwd_dw_partial_h(float* partial, const float* dy, const unsigned short* qkv,
                                                      const float* rstd, const int* pos, const float* cosT,
                                                      const float* sinT, int heads, int h0, int width, int D, int rows,
                                                      int rowsPerChunk) {
	qkv_split_bwd_dw_impl(partial, dy, qkv, rstd, pos, cosT, sinT, heads, h0, width, D, rows, rowsPerChunk);
}
