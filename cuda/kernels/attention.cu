// Causal grouped-query attention, forward and backward, one block of
// ATT_THREADS threads per (query row, head) or (key row, key/value head).
// Keys are streamed in tiles of ATT_THREADS with an online softmax, so
// memory is linear in the sequence length (nothing N×N is stored); the
// backward recomputes probabilities from the saved log-sum-exp.
//
// Rows come from the host as flat tables built from the segments:
// query row r of the launch is q row qRow[r], sees keys kStart[r] …
// kStart[r]+kCount[r]−1 (its causal window). Head dim D ≤ 2·ATT_THREADS.

#define ATT_THREADS 128

// attn_fwd_impl: grid (rows, H); KV is float or bf16 bits (a bf16 KV cache).
template <typename KV>
__device__ __forceinline__ void attn_fwd_impl(float* out, float* lse, const float* q, const KV* k, const KV* v,
                                              const int* qRow, const int* kStart, const int* kCount, int H, int G,
                                              int D, float scale) {
	__shared__ float qs[2 * ATT_THREADS];
	__shared__ float ps[ATT_THREADS];
	__shared__ float sh[32];
	int r = blockIdx.x, h = blockIdx.y, g = h / (H / G), t = threadIdx.x;
	long long qr = qRow[r];
	int k0 = kStart[r], nk = kCount[r];
	for (int d = t; d < D; d += ATT_THREADS) qs[d] = q[(qr * H + h) * D + d];
	__syncthreads();
	float m = NEG_INF, l = 0.f, acc0 = 0.f, acc1 = 0.f;
	for (int j0 = 0; j0 < nk; j0 += ATT_THREADS) {
		int j = j0 + t;
		float s = NEG_INF;
		if (j < nk) {
			const KV* kr = k + ((long long)(k0 + j) * G + g) * D;
			float dot = 0.f;
			for (int d = 0; d < D; d++) dot += qs[d] * ld(kr, d);
			s = dot * scale;
		}
		float mNew = fmaxf(m, block_max(s, sh));
		float p = j < nk ? expf(s - mNew) : 0.f;
		ps[t] = p;
		float tile = block_sum(p, sh); // its barriers also publish ps
		float corr = expf(m - mNew);
		l = l * corr + tile;
		acc0 *= corr;
		acc1 *= corr;
		int cnt = min(ATT_THREADS, nk - j0);
		for (int jj = 0; jj < cnt; jj++) {
			const KV* vr = v + ((long long)(k0 + j0 + jj) * G + g) * D;
			if (t < D) acc0 += ps[jj] * ld(vr, t);
			if (t + ATT_THREADS < D) acc1 += ps[jj] * ld(vr, t + ATT_THREADS);
		}
		m = mNew;
		__syncthreads(); // ps is rewritten by the next tile
	}
	float* o = out + (qr * H + h) * D;
	if (t < D) o[t] = acc0 / l;
	if (t + ATT_THREADS < D) o[t + ATT_THREADS] = acc1 / l;
	if (lse && t == 0) lse[qr * H + h] = m + logf(l);
}

extern "C" __global__ void attn_fwd(float* out, float* lse, const float* q, const float* k, const float* v,
                                    const int* qRow, const int* kStart, const int* kCount, int H, int G, int D,
                                    float scale) {
	attn_fwd_impl(out, lse, q, k, v, qRow, kStart, kCount, H, G, D, scale);
}

// attn_fwd_kvh reads a bf16 KV cache.
extern "C" __global__ void attn_fwd_kvh(float* out, float* lse, const float* q, const unsigned short* k,
                                        const unsigned short* v, const int* qRow, const int* kStart,
                                        const int* kCount, int H, int G, int D, float scale) {
	attn_fwd_impl(out, lse, q, k, v, qRow, kStart, kCount, H, G, D, scale);
}

// attn_delta: delta[row, h] = Σ_d dout·out, for every (row, head) pair of
// the tensors (rowsH of them). Grid: rowsH blocks.
template <typename O>
__device__ __forceinline__ void attn_delta_impl(float* delta, const float* dout, const O* out, int D) {
	__shared__ float sh[32];
	long long rh = blockIdx.x;
	float s = 0.f;
	for (int d = threadIdx.x; d < D; d += blockDim.x) s += dout[rh * D + d] * ld(out, rh * D + d);
	s = block_sum(s, sh);
	if (threadIdx.x == 0) delta[rh] = s;
}

extern "C" __global__ void attn_delta(float* delta, const float* dout, const float* out, int D) {
	attn_delta_impl(delta, dout, out, D);
}

// attn_delta_h reads a bf16 output (an ActivationHalf saved by the forward).
extern "C" __global__ void attn_delta_h(float* delta, const float* dout, const unsigned short* out, int D) {
	attn_delta_impl(delta, dout, out, D);
}

// attn_bwd_dq: dq = scale·Σ_j p_j (dout·v_j − delta) k_j. Grid (rows, H).
extern "C" __global__ void attn_bwd_dq(float* dq, const float* dout, const float* q, const float* k, const float* v,
                                       const float* lse, const float* delta, const int* qRow, const int* kStart,
                                       const int* kCount, int H, int G, int D, float scale) {
	__shared__ float qs[2 * ATT_THREADS];
	__shared__ float dos[2 * ATT_THREADS];
	__shared__ float ds[ATT_THREADS];
	int r = blockIdx.x, h = blockIdx.y, g = h / (H / G), t = threadIdx.x;
	long long qr = qRow[r], qh = qr * H + h;
	int k0 = kStart[r], nk = kCount[r];
	for (int d = t; d < D; d += ATT_THREADS) {
		qs[d] = q[qh * D + d];
		dos[d] = dout[qh * D + d];
	}
	__syncthreads();
	float l = lse[qh], dl = delta[qh], acc0 = 0.f, acc1 = 0.f;
	for (int j0 = 0; j0 < nk; j0 += ATT_THREADS) {
		int j = j0 + t;
		float dsj = 0.f;
		if (j < nk) {
			long long kv = ((long long)(k0 + j) * G + g) * D;
			float s = 0.f, dp = 0.f;
			for (int d = 0; d < D; d++) {
				s += qs[d] * k[kv + d];
				dp += dos[d] * v[kv + d];
			}
			float p = expf(s * scale - l);
			dsj = p * (dp - dl) * scale;
		}
		ds[t] = dsj;
		__syncthreads();
		int cnt = min(ATT_THREADS, nk - j0);
		for (int jj = 0; jj < cnt; jj++) {
			const float* kr = k + ((long long)(k0 + j0 + jj) * G + g) * D;
			if (t < D) acc0 += ds[jj] * kr[t];
			if (t + ATT_THREADS < D) acc1 += ds[jj] * kr[t + ATT_THREADS];
		}
		__syncthreads();
	}
	if (t < D) dq[qh * D + t] = acc0;
	if (t + ATT_THREADS < D) dq[qh * D + t + ATT_THREADS] = acc1;
}

// attn_bwd_dkv: for key row kRow[r] and key/value head g, sum over the query
// rows qStart[r] … qStart[r]+qCount[r]−1 that see it and over the group's
// query heads: dv += p·dout, dk += scale·p·(dout·v − delta)·q. Grid (rows, G).
extern "C" __global__ void attn_bwd_dkv(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                        const float* v, const float* lse, const float* delta, const int* kRow,
                                        const int* qStart, const int* qCount, int H, int G, int D, float scale) {
	__shared__ float ks[2 * ATT_THREADS];
	__shared__ float vs[2 * ATT_THREADS];
	__shared__ float ps[ATT_THREADS];
	__shared__ float ds[ATT_THREADS];
	int r = blockIdx.x, g = blockIdx.y, t = threadIdx.x, groups = H / G;
	long long kv = ((long long)kRow[r] * G + g) * D;
	int q0 = qStart[r], nq = qCount[r];
	for (int d = t; d < D; d += ATT_THREADS) {
		ks[d] = k[kv + d];
		vs[d] = v[kv + d];
	}
	__syncthreads();
	float dk0 = 0.f, dk1 = 0.f, dv0 = 0.f, dv1 = 0.f;
	for (int h = g * groups; h < (g + 1) * groups; h++) {
		for (int i0 = 0; i0 < nq; i0 += ATT_THREADS) {
			int i = i0 + t;
			float p = 0.f, dsi = 0.f;
			if (i < nq) {
				long long qh = (long long)(q0 + i) * H + h;
				float s = 0.f, dp = 0.f;
				for (int d = 0; d < D; d++) {
					s += q[qh * D + d] * ks[d];
					dp += dout[qh * D + d] * vs[d];
				}
				p = expf(s * scale - lse[qh]);
				dsi = p * (dp - delta[qh]) * scale;
			}
			ps[t] = p;
			ds[t] = dsi;
			__syncthreads();
			int cnt = min(ATT_THREADS, nq - i0);
			for (int ii = 0; ii < cnt; ii++) {
				long long qh = (long long)(q0 + i0 + ii) * H + h;
				if (t < D) {
					dv0 += ps[ii] * dout[qh * D + t];
					dk0 += ds[ii] * q[qh * D + t];
				}
				if (t + ATT_THREADS < D) {
					dv1 += ps[ii] * dout[qh * D + t + ATT_THREADS];
					dk1 += ds[ii] * q[qh * D + t + ATT_THREADS];
				}
			}
			__syncthreads();
		}
	}
	if (t < D) {
		dk[kv + t] = dk0;
		dv[kv + t] = dv0;
	}
	if (t + ATT_THREADS < D) {
		dk[kv + t + ATT_THREADS] = dk1;
		dv[kv + t + ATT_THREADS] = dv1;
	}
}
