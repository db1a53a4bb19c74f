// RMSNorm and RoPE.

// rmsnorm_fwd: one block per row of width n (≤ 256 threads). rstd may be
// null. The sum of squares is taken in float64: rows of large activations
// would overflow float32 and give rstd = 0.
extern "C" __global__ void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int n, float eps) {
	__shared__ double sh[256];
	long long r = blockIdx.x;
	const float* xr = x + r * n;
	double ss = 0;
	for (int j = threadIdx.x; j < n; j += blockDim.x) ss += (double)xr[j] * xr[j];
	ss = block_sum_d(ss, sh);
	float rs = (float)(1.0 / sqrt(ss / n + (double)eps));
	if (rstd && threadIdx.x == 0) rstd[r] = rs;
	for (int j = threadIdx.x; j < n; j += blockDim.x) out[r * n + j] = (xr[j] * rs) * w[j];
}

// rmsnorm_bwd_dx: dx = r·(g − x̂·mean(g ⊙ x̂)) with g = dout ⊙ w, x̂ = x·r.
extern "C" __global__ void rmsnorm_bwd_dx(float* dx, const float* dout, const float* x, const float* w, const float* rstd,
                                          int n) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	float rs = rstd[r];
	const float *xr = x + r * n, *dr = dout + r * n;
	float s = 0.f;
	for (int j = threadIdx.x; j < n; j += blockDim.x) s += dr[j] * w[j] * xr[j] * rs;
	float m = block_sum(s, sh) / n;
	for (int j = threadIdx.x; j < n; j += blockDim.x) dx[r * n + j] = rs * (dr[j] * w[j] - xr[j] * rs * m);
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
