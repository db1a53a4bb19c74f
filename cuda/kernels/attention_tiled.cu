// Tiled causal GQA attention for training-sized segments: a block of 128
// threads owns a tile of 32 query rows of one head (4 threads per row, each
// holding a quarter of the head dimension in registers) and streams tiles
// of 32 keys and values through shared memory, so each key is read from
// global memory once per query tile instead of once per query row. Online
// softmax as in attention.cu; head dim D ≤ 128, D % 4 == 0.
//
// Tiles come from the host: query tile t covers q rows qRow0[t] …
// qRow0[t]+qCount[t]−1, whose keys start at kStart[t]; row r of the tile
// sees kFirst[t]+r keys (its causal window). Key tiles for dk/dv: key rows
// kRow0[t] … kRow0[t]+kCount[t]−1 (local index j0[t] … in their segment);
// segment query rows segQ0[t] … segQ0[t]+segQLen[t]−1, key j seen by local
// query i when i ≥ j − segOff[t].

#define TQ 32
#define TK 32
#define TT 128
#define DQ 32 // registers per thread: D/4 ≤ 32

// row_dot4 sums a per-thread partial dot product over the 4 threads of a
// row (consecutive lanes); every thread of the warp must call it.
__device__ __forceinline__ float row_dot4(float v) {
	v += __shfl_xor_sync(FULL_MASK, v, 1);
	v += __shfl_xor_sync(FULL_MASK, v, 2);
	return v;
}

// load_tile copies rows r0 … r0+n−1 (head g of a (rows, G, D) tensor of
// float or bf16 bits) into sh (TK × D), zero-filling rows past n.
template <typename T>
__device__ __forceinline__ void load_tile(float* sh, const T* src, long long r0, int n, int G, int g, int D) {
	for (int idx = threadIdx.x; idx < TK * D; idx += TT) {
		int j = idx / D, d = idx - j * D;
		sh[idx] = j < n ? ld(src, ((r0 + j) * G + g) * D + d) : 0.f;
	}
}

template <typename KV>
__device__ __forceinline__ void attn_fwd_tiled_impl(float* out, float* lse, const float* q, const KV* k, const KV* v,
                                                    const int* qRow0, const int* qCount, const int* kStart,
                                                    const int* kFirst, int H, int G, int D, float scale) {
	__shared__ float ks[TK * 128];
	__shared__ float vs[TK * 128];
	// A row's scores for the current key tile. In registers (float s[TK])
	// they went to local memory: the loop that fills them, with a shuffle
	// per key, is too long for the compiler to unroll.
	__shared__ float ss[TQ * TK];
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int r = threadIdx.x >> 2, part = threadIdx.x & 3, dq = D >> 2, d0 = part * dq;
	int n = qCount[t], k0 = kStart[t];
	bool live = r < n;
	long long qh = ((long long)qRow0[t] + r) * H + h;
	float qv[DQ], ov[DQ];
	for (int i = 0; i < DQ; i++) {
		qv[i] = (live && i < dq) ? q[qh * D + d0 + i] : 0.f;
		ov[i] = 0.f;
	}
	int nk = kFirst[t] + r;                  // keys this row sees
	int nkTile = kFirst[t] + n - 1;          // keys the tile's last row sees
	float m = NEG_INF, l = 0.f;
	for (int j0 = 0; j0 < nkTile; j0 += TK) {
		int cnt = min(TK, nkTile - j0);
		__syncthreads(); // the previous tile is no longer read
		load_tile(ks, k, k0 + j0, cnt, G, g, D);
		load_tile(vs, v, k0 + j0, cnt, G, g, D);
		__syncthreads();
		float* s = ss + r * TK;
		float mx = NEG_INF;
		for (int j = 0; j < TK; j++) {
			float part_dot = 0.f;
			for (int i = 0; i < DQ; i++)
				if (i < dq) part_dot += qv[i] * ks[j * D + d0 + i];
			float sj = row_dot4(part_dot) * scale;
			sj = (live && j < cnt && j0 + j < nk) ? sj : NEG_INF;
			if (part == 0) s[j] = sj; // the row's 4 threads hold the same sj
			mx = fmaxf(mx, sj);
		}
		__syncwarp(); // s[] written by lane 4r is read by lanes 4r … 4r+3
		float mNew = fmaxf(m, mx);
		if (mNew == NEG_INF) continue; // nothing visible yet (dead row)
		float corr = expf(m - mNew), sum = 0.f;
		for (int i = 0; i < DQ; i++) ov[i] *= corr;
		// Constant trip counts keep s[] and ov[] in registers; keys past
		// cnt or the row's window have s = −inf, p = 0 and zeroed values.
		for (int j = 0; j < TK; j++) {
			float p = expf(s[j] - mNew);
			sum += p;
			for (int i = 0; i < DQ; i++)
				if (i < dq) ov[i] += p * vs[j * D + d0 + i];
		}
		l = l * corr + sum;
		m = mNew;
	}
	if (!live) return;
	// A constant trip count again: an index bounded by dq alone would put
	// ov[] in local memory.
	for (int i = 0; i < DQ; i++)
		if (i < dq) out[qh * D + d0 + i] = ov[i] / l;
	if (lse && part == 0) lse[qh] = m + logf(l);
}

extern "C" __global__ void attn_fwd_tiled(float* out, float* lse, const float* q, const float* k, const float* v,
                                          const int* qRow0, const int* qCount, const int* kStart, const int* kFirst,
                                          int H, int G, int D, float scale) {
	attn_fwd_tiled_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_fwd_tiled_kvh reads a bf16 KV cache (chunked prefill).
extern "C" __global__ void attn_fwd_tiled_kvh(float* out, float* lse, const float* q, const unsigned short* k,
                                              const unsigned short* v, const int* qRow0, const int* qCount,
                                              const int* kStart, const int* kFirst, int H, int G, int D, float scale) {
	attn_fwd_tiled_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_bwd_dq_tiled: dq = scale·Σ_j p_j (dout·v_j − delta) k_j per query tile.
extern "C" __global__ void attn_bwd_dq_tiled(float* dq, const float* dout, const float* q, const float* k,
                                             const float* v, const float* lse, const float* delta, const int* qRow0,
                                             const int* qCount, const int* kStart, const int* kFirst, int H, int G,
                                             int D, float scale) {
	__shared__ float ks[TK * 128];
	__shared__ float vs[TK * 128];
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int r = threadIdx.x >> 2, part = threadIdx.x & 3, dq4 = D >> 2, d0 = part * dq4;
	int n = qCount[t], k0 = kStart[t];
	bool live = r < n;
	long long qh = ((long long)qRow0[t] + r) * H + h;
	float qv[DQ], dov[DQ], acc[DQ];
	for (int i = 0; i < DQ; i++) {
		qv[i] = (live && i < dq4) ? q[qh * D + d0 + i] : 0.f;
		dov[i] = (live && i < dq4) ? dout[qh * D + d0 + i] : 0.f;
		acc[i] = 0.f;
	}
	float l = live ? lse[qh] : 0.f, dl = live ? delta[qh] : 0.f;
	int nk = kFirst[t] + r, nkTile = kFirst[t] + n - 1;
	for (int j0 = 0; j0 < nkTile; j0 += TK) {
		int cnt = min(TK, nkTile - j0);
		__syncthreads();
		load_tile(ks, k, k0 + j0, cnt, G, g, D);
		load_tile(vs, v, k0 + j0, cnt, G, g, D);
		__syncthreads();
		for (int j = 0; j < TK; j++) {
			float ps = 0.f, pd = 0.f;
			for (int i = 0; i < DQ; i++)
				if (i < dq4) {
					ps += qv[i] * ks[j * D + d0 + i];
					pd += dov[i] * vs[j * D + d0 + i];
				}
			float sj = row_dot4(ps), dp = row_dot4(pd);
			if (live && j < cnt && j0 + j < nk) {
				float ds = expf(sj * scale - l) * (dp - dl) * scale;
				for (int i = 0; i < DQ; i++)
					if (i < dq4) acc[i] += ds * ks[j * D + d0 + i];
			}
		}
	}
	if (!live) return;
	for (int i = 0; i < dq4; i++) dq[qh * D + d0 + i] = acc[i];
}

// attn_bwd_dkv_tiled: per key tile and key/value head, over the query tiles
// and query heads that see it: dv += p·dout, dk += scale·p·(dout·v − delta)·q.
extern "C" __global__ void attn_bwd_dkv_tiled(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                              const float* v, const float* lse, const float* delta, const int* kRow0,
                                              const int* kCount, const int* j0s, const int* segQ0, const int* segQLen,
                                              const int* segOff, int H, int G, int D, float scale) {
	__shared__ float qs[TQ * 128];
	__shared__ float dos[TQ * 128];
	__shared__ float ls[TQ], dls[TQ];
	int t = blockIdx.x, g = blockIdx.y, groups = H / G;
	int r = threadIdx.x >> 2, part = threadIdx.x & 3, dq4 = D >> 2, d0 = part * dq4;
	int n = kCount[t];
	bool live = r < n;
	long long kv = ((long long)kRow0[t] + r) * G + g;
	float kvk[DQ], kvv[DQ], dka[DQ], dva[DQ];
	for (int i = 0; i < DQ; i++) {
		kvk[i] = (live && i < dq4) ? k[kv * D + d0 + i] : 0.f;
		kvv[i] = (live && i < dq4) ? v[kv * D + d0 + i] : 0.f;
		dka[i] = 0.f;
		dva[i] = 0.f;
	}
	int j = j0s[t] + r, off = segOff[t], nq = segQLen[t];
	int iFirst = max(0, j0s[t] - off); // first local query the tile's first key is seen by
	for (int h = g * groups; h < (g + 1) * groups; h++) {
		for (int i0 = iFirst; i0 < nq; i0 += TQ) {
			int cnt = min(TQ, nq - i0);
			__syncthreads();
			for (int idx = threadIdx.x; idx < TQ * D; idx += TT) {
				int ii = idx / D, d = idx - ii * D;
				long long qh = ((long long)segQ0[t] + i0 + ii) * H + h;
				qs[idx] = ii < cnt ? q[qh * D + d] : 0.f;
				dos[idx] = ii < cnt ? dout[qh * D + d] : 0.f;
			}
			if (threadIdx.x < TQ) {
				long long qh = ((long long)segQ0[t] + i0 + threadIdx.x) * H + h;
				ls[threadIdx.x] = (int)threadIdx.x < cnt ? lse[qh] : 0.f;
				dls[threadIdx.x] = (int)threadIdx.x < cnt ? delta[qh] : 0.f;
			}
			__syncthreads();
			for (int ii = 0; ii < TQ; ii++) {
				float ps = 0.f, pd = 0.f;
				for (int i = 0; i < DQ; i++)
					if (i < dq4) {
						ps += qs[ii * D + d0 + i] * kvk[i];
						pd += dos[ii * D + d0 + i] * kvv[i];
					}
				float s = row_dot4(ps), dp = row_dot4(pd);
				if (live && ii < cnt && i0 + ii >= j - off) {
					float p = expf(s * scale - ls[ii]);
					float ds = p * (dp - dls[ii]) * scale;
					for (int i = 0; i < DQ; i++)
						if (i < dq4) {
							dva[i] += p * dos[ii * D + d0 + i];
							dka[i] += ds * qs[ii * D + d0 + i];
						}
				}
			}
		}
	}
	if (!live) return;
	for (int i = 0; i < dq4; i++) {
		dk[kv * D + d0 + i] = dka[i];
		dv[kv * D + d0 + i] = dva[i];
	}
}
