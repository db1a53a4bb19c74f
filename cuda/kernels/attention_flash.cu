// uses fp8.cuh
// uses wgmma.cuh
//
// Causal GQA attention on tensor cores, FlashAttention-2 style: scores and
// probabilities live in registers, never in DRAM; every product is an
// mma.m16n8k16 with bf16 operands and fp32 accumulation (common.cuh).
// Inputs are the model's fp32 q, k, v (or a bf16 KV cache), rounded to
// bf16 as they are staged, or its bf16 q, k, v (the _h kernels: training
// under bf16 products, model.ActivationStore), staged with 16-byte loads;
// softmax statistics and gradients stay fp32, and the output is fp32 or,
// in the _h forward, bf16. Head dim D: a multiple of 16, at most FA_DMAX (loops run to the
// constant FA_DMAX with a guard, so every register array has compile-time
// indices and none lands in local memory).
//
// A block has 4 warps; a warp owns 16 rows of the block's tile (query rows
// in attn_flash_fwd and attn_flash_bwd_dq, key rows in attn_flash_bwd_dkv)
// and with them the rows g and g+8 (g = lane/4) of every mma C fragment.
// The backward is deterministic: dq and dk/dv come from two kernels that
// each own their output rows (no atomics), the dq kernel recomputing the
// probabilities the dk/dv kernel also computes.
//
// Tile tables come from the host (backend_attention_flash.go): query tile
// t covers rows qRow0[t] … +qCount[t]−1 whose keys start at kStart[t]; its
// row r sees the first kFirst[t]+r keys. Key tile t covers key rows
// kRow0[t] … +kCount[t]−1, local index j0s[t] … in a segment whose query
// rows are segQ0[t] … +segQLen[t]−1; local query i sees key j when
// i ≥ j − segOff[t].

#define FA_THREADS 128
#define FA_DMAX 128
#define FA_S (FA_DMAX + 8) // shared row stride in bf16: rows 16 bytes apart mod 128, no bank conflicts
#define FA_BQ 64           // query rows per forward / dq block
#define FA_BK 64           // keys per forward tile
#define FA_BKQ 32          // keys per dq-kernel tile
#define FA_BKV 64          // keys per dk/dv block
#define FA_BQV 16          // query rows per dk/dv tile

// fa_stage rounds rows [row0, row0+cnt) of head `head` of a (rows, heads, D)
// tensor into sh (rows × FA_S bf16), zero-filling rows cnt … rows−1.
template <typename T>
__device__ __forceinline__ void fa_stage(unsigned short* sh, const T* src, long long row0, int rows, int cnt, int heads,
                                         int head, int D) {
	for (int idx = threadIdx.x; idx < rows * D; idx += FA_THREADS) {
		int j = idx / D, d = idx - j * D;
		sh[j * FA_S + d] = j < cnt ? f32_to_bf16_bits(ld(src, ((row0 + j) * heads + head) * D + d)) : 0;
	}
}

// fa_stage for bf16 sources copies 16 bytes (8 elements) at a time: D is a
// multiple of 16, every row starts 16-byte aligned (the tensors are whole
// allocations or row views of them) and so does every staged row (FA_S·2
// bytes apart).
__device__ __forceinline__ void fa_stage(unsigned short* sh, const unsigned short* src, long long row0, int rows, int cnt,
                                         int heads, int head, int D) {
	int per = D / 8;
	for (int idx = threadIdx.x; idx < rows * per; idx += FA_THREADS) {
		int j = idx / per, c = 8 * (idx - j * per);
		uint4 val = make_uint4(0u, 0u, 0u, 0u);
		if (j < cnt) val = *(const uint4*)(src + ((row0 + j) * heads + head) * D + c);
		*(uint4*)(sh + j * FA_S + c) = val;
	}
}

// fa_stage for an fp8 KV cache (fp8.cuh; the prefill of a sampler whose
// cache is fp8) dequantises 16 codes at a time from one 16-byte load,
// codes·scale rounded to bf16, as the fp32 and bf16 sources are rounded.
__device__ __forceinline__ void fa_stage(unsigned short* sh, const unsigned char* src, long long row0, int rows, int cnt,
                                         int heads, int head, int D) {
	int per = D / 16;
	for (int idx = threadIdx.x; idx < rows * per; idx += FA_THREADS) {
		int j = idx / per, c = 16 * (idx - j * per);
		unsigned w[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
		if (j < cnt) {
			float x[16];
			kv8_decode16(x, *(const uint4*)(kv8_head(src, row0 + j, heads, head, D) + c));
			float s = kv8_scale(src, row0 + j, heads, head, D);
#pragma unroll
			for (int i = 0; i < 8; i++) w[i] = bf16x2(x[2 * i] * s, x[2 * i + 1] * s);
		}
		*(uint4*)(sh + j * FA_S + c) = make_uint4(w[0], w[1], w[2], w[3]);
		*(uint4*)(sh + j * FA_S + c + 8) = make_uint4(w[4], w[5], w[6], w[7]);
	}
}

// Two bf16 of a staged row (d even), as one register.
__device__ __forceinline__ unsigned fa_pair(const unsigned short* sh, int row, int d) {
	return *(const unsigned*)(sh + row * FA_S + d);
}

// Two bf16 of a staged column: rows row and row+1 at column d.
__device__ __forceinline__ unsigned fa_colpair(const unsigned short* sh, int row, int d) {
	return (unsigned)sh[row * FA_S + d] | ((unsigned)sh[(row + 1) * FA_S + d] << 16);
}

// fa_rowfrag loads the A fragments of 16 rows (row0 = this lane's row g,
// row0+8 its row g+8) of a global fp32 (rows, heads, D) tensor for every
// k-step of 16 along D; dead rows are zero.
// fa_two is elements d and d+1 of a row as a bf16 pair: rounded from fp32,
// or one 4-byte load of bf16 (the lower index in the lower half, as
// little-endian memory holds them).
__device__ __forceinline__ unsigned fa_two(const float* p, int d) { return bf16x2(p[d], p[d + 1]); }
__device__ __forceinline__ unsigned fa_two(const unsigned short* p, int d) { return *(const unsigned*)(p + d); }

template <typename T>
__device__ __forceinline__ void fa_rowfrag(unsigned a[FA_DMAX / 16][4], const T* src, long long rowA, bool liveA,
                                           long long rowB, bool liveB, int heads, int head, int D) {
	int tig = threadIdx.x & 3;
	const T* pa = src + (rowA * heads + head) * D;
	const T* pb = src + (rowB * heads + head) * D;
#pragma unroll
	for (int s = 0; s < FA_DMAX / 16; s++) {
		int d = 16 * s + 2 * tig;
		bool on = 16 * s < D;
		a[s][0] = on && liveA ? fa_two(pa, d) : 0u;
		a[s][1] = on && liveB ? fa_two(pb, d) : 0u;
		a[s][2] = on && liveA ? fa_two(pa, d + 8) : 0u;
		a[s][3] = on && liveB ? fa_two(pb, d + 8) : 0u;
	}
}

// fa_quad_max / fa_quad_sum reduce over the 4 lanes that share a row.
__device__ __forceinline__ float fa_quad_max(float v) {
	v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
	return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}
__device__ __forceinline__ float fa_quad_sum(float v) {
	v += __shfl_xor_sync(FULL_MASK, v, 1);
	return v + __shfl_xor_sync(FULL_MASK, v, 2);
}

// fa_ptile packs the C fragments of two adjacent 8-column tiles (16 × 16)
// into the A fragment of the next product: the C layout of columns 0–7 and
// 8–15 is the A layout of k 0–7 and 8–15.
__device__ __forceinline__ void fa_ptile(unsigned a[4], const float* c0, const float* c1) {
	a[0] = bf16x2(c0[0], c0[1]);
	a[1] = bf16x2(c0[2], c0[3]);
	a[2] = bf16x2(c1[0], c1[1]);
	a[3] = bf16x2(c1[2], c1[3]);
}

// fa_store writes this lane's part of a 16 × D fp32 result held as C
// fragments (acc[nd]: columns 8nd … 8nd+7) to rows rowA and rowB of head
// `head` of a (rows, heads, D) tensor, each row scaled and written only
// if live.
// fa_put writes elements i and i+1: two floats, or one bf16 pair.
__device__ __forceinline__ void fa_put(float* p, long long i, float x, float y) {
	p[i] = x;
	p[i + 1] = y;
}
__device__ __forceinline__ void fa_put(unsigned short* p, long long i, float x, float y) { *(unsigned*)(p + i) = bf16x2(x, y); }

template <typename O>
__device__ __forceinline__ void fa_store(O* dst, const float acc[FA_DMAX / 8][4], long long rowA, bool liveA, float sA,
                                         long long rowB, bool liveB, float sB, int heads, int head, int D) {
	int tig = threadIdx.x & 3;
#pragma unroll
	for (int nd = 0; nd < FA_DMAX / 8; nd++) {
		if (8 * nd >= D) continue;
		int d = 8 * nd + 2 * tig;
		if (liveA) fa_put(dst, (rowA * heads + head) * D + d, acc[nd][0] * sA, acc[nd][1] * sA);
		if (liveB) fa_put(dst, (rowB * heads + head) * D + d, acc[nd][2] * sB, acc[nd][3] * sB);
	}
}

// fa_softmax_tile is the forward's online softmax over one key tile of
// scores s (NT tiles of 8 columns, C fragments; keys j0 …): it scales and
// masks them (this lane's rows see keys below nk0 and nk1), raises the
// rows' running maxima m0, m1, rescales their sums l0, l1 and the output
// accumulators o (FA_DMAX/8 C fragments) to the new maxima, and leaves the
// probabilities in s, added to the sums.
template <int NT>
__device__ __forceinline__ void fa_softmax_tile(float s[NT][4], float o[FA_DMAX / 8][4], float& m0, float& m1, float& l0,
                                                float& l1, int j0, int tig, bool live0, bool live1, int nk0, int nk1,
                                                float scale) {
	float mx0 = NEG_INF, mx1 = NEG_INF;
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
#pragma unroll
		for (int c = 0; c < 2; c++) {
			int j = j0 + 8 * nt + 2 * tig + c;
			s[nt][c] = live0 && j < nk0 ? s[nt][c] * scale : NEG_INF;
			s[nt][2 + c] = live1 && j < nk1 ? s[nt][2 + c] * scale : NEG_INF;
			mx0 = fmaxf(mx0, s[nt][c]);
			mx1 = fmaxf(mx1, s[nt][2 + c]);
		}
	}
	float mn0 = fmaxf(m0, fa_quad_max(mx0)), mn1 = fmaxf(m1, fa_quad_max(mx1));
	// A row with nothing visible yet keeps max −inf: subtract 0 so its
	// probabilities are exp(−inf) = 0, not NaN.
	float b0 = mn0 == NEG_INF ? 0.f : mn0, b1 = mn1 == NEG_INF ? 0.f : mn1;
	float c0 = __expf(m0 - b0), c1 = __expf(m1 - b1);
	l0 *= c0;
	l1 *= c1;
#pragma unroll
	for (int i = 0; i < FA_DMAX / 8; i++) {
		o[i][0] *= c0;
		o[i][1] *= c0;
		o[i][2] *= c1;
		o[i][3] *= c1;
	}
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
		s[nt][0] = __expf(s[nt][0] - b0);
		s[nt][1] = __expf(s[nt][1] - b0);
		s[nt][2] = __expf(s[nt][2] - b1);
		s[nt][3] = __expf(s[nt][3] - b1);
		l0 += s[nt][0] + s[nt][1];
		l1 += s[nt][2] + s[nt][3];
	}
	m0 = mn0;
	m1 = mn1;
}

template <typename Q, typename KV, typename O>
__device__ __forceinline__ void attn_flash_fwd_impl(O* out, float* lse, const Q* q, const KV* k, const KV* v,
                                                    const int* qRow0, const int* qCount, const int* kStart,
                                                    const int* kFirst, int H, int G, int D, float scale) {
	__shared__ __align__(16) unsigned short ks[FA_BK * FA_S];
	__shared__ __align__(16) unsigned short vs[FA_BK * FA_S];
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	int n = qCount[t], k0 = kStart[t], kf = kFirst[t];
	int r0 = (threadIdx.x >> 5) * 16 + gid, r1 = r0 + 8; // this lane's two rows of the tile
	bool live0 = r0 < n, live1 = r1 < n;
	long long row0 = (long long)qRow0[t] + r0, row1 = (long long)qRow0[t] + r1;
	unsigned qa[FA_DMAX / 16][4];
	fa_rowfrag(qa, q, row0, live0, row1, live1, H, h, D);
	float o[FA_DMAX / 8][4];
#pragma unroll
	for (int i = 0; i < FA_DMAX / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
	float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
	int nk0 = kf + r0, nk1 = kf + r1, nkTile = kf + n - 1;
	for (int j0 = 0; j0 < nkTile; j0 += FA_BK) {
		__syncthreads(); // the previous tile is no longer read
		fa_stage(ks, k, (long long)k0 + j0, FA_BK, min(FA_BK, nkTile - j0), G, g, D);
		fa_stage(vs, v, (long long)k0 + j0, FA_BK, min(FA_BK, nkTile - j0), G, g, D);
		__syncthreads();
		// S = Q·Kᵀ: B (k = d, n = key) is a staged key row.
		float s[FA_BK / 8][4];
#pragma unroll
		for (int nt = 0; nt < FA_BK / 8; nt++) {
			s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
			for (int st = 0; st < FA_DMAX / 16; st++) {
				if (16 * st >= D) continue;
				unsigned b[2] = {fa_pair(ks, 8 * nt + gid, 16 * st + 2 * tig), fa_pair(ks, 8 * nt + gid, 16 * st + 2 * tig + 8)};
				mma_bf16_16816(s[nt], qa[st], b);
			}
		}
		fa_softmax_tile<FA_BK / 8>(s, o, m0, m1, l0, l1, j0, tig, live0, live1, nk0, nk1, scale);
		// O += P·V: B (k = key, n = d) is a staged value column.
#pragma unroll
		for (int kk = 0; kk < FA_BK / 16; kk++) {
			unsigned pa[4];
			fa_ptile(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
			for (int nd = 0; nd < FA_DMAX / 8; nd++) {
				if (8 * nd >= D) continue;
				unsigned b[2] = {fa_colpair(vs, 16 * kk + 2 * tig, 8 * nd + gid), fa_colpair(vs, 16 * kk + 2 * tig + 8, 8 * nd + gid)};
				mma_bf16_16816(o[nd], pa, b);
			}
		}
	}
	l0 = fa_quad_sum(l0);
	l1 = fa_quad_sum(l1);
	fa_store(out, o, row0, live0, 1.f / l0, row1, live1, 1.f / l1, H, h, D);
	if (lse && tig == 0) {
		if (live0) lse[row0 * H + h] = m0 + logf(l0);
		if (live1) lse[row1 * H + h] = m1 + logf(l1);
	}
}

// attn_flash_fwd: out (and lse when not null) for fp32 keys and values.
// Grid (query tiles, H), FA_THREADS threads.
extern "C" __global__ void attn_flash_fwd(float* out, float* lse, const float* q, const float* k, const float* v,
                                          const int* qRow0, const int* qCount, const int* kStart, const int* kFirst,
                                          int H, int G, int D, float scale) {
	attn_flash_fwd_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_flash_fwd_kvh reads a bf16 KV cache (prefill).
extern "C" __global__ void attn_flash_fwd_kvh(float* out, float* lse, const float* q, const unsigned short* k,
                                              const unsigned short* v, const int* qRow0, const int* qCount,
                                              const int* kStart, const int* kFirst, int H, int G, int D, float scale) {
	attn_flash_fwd_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_flash_fwd_kv8 reads an fp8 KV cache (prefill).
extern "C" __global__ void attn_flash_fwd_kv8(float* out, float* lse, const float* q, const unsigned char* k,
                                              const unsigned char* v, const int* qRow0, const int* qCount,
                                              const int* kStart, const int* kFirst, int H, int G, int D, float scale) {
	attn_flash_fwd_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_flash_fwd_h: bf16 q, k, v and out (training under bf16 products).
extern "C" __global__ void attn_flash_fwd_h(unsigned short* out, float* lse, const unsigned short* q,
                                            const unsigned short* k, const unsigned short* v, const int* qRow0,
                                            const int* qCount, const int* kStart, const int* kFirst, int H, int G,
                                            int D, float scale) {
	attn_flash_fwd_impl(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// fa_dq_dscores turns a key tile's scores s and dP = dO·vᵀ (NT tiles of 8
// keys from j0, C fragments) into dS = P ⊙ (dP − δ)·scale in s, P
// recomputed from the rows' log-sum-exps L0, L1 (this lane's rows see keys
// below nk0 and nk1; δ is dl0, dl1).
template <int NT>
__device__ __forceinline__ void fa_dq_dscores(float s[NT][4], const float dp[NT][4], int j0, int tig, bool live0, bool live1,
                                              int nk0, int nk1, float L0, float L1, float dl0, float dl1, float scale) {
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
#pragma unroll
		for (int c = 0; c < 2; c++) {
			int j = j0 + 8 * nt + 2 * tig + c;
			float p0 = live0 && j < nk0 ? __expf(s[nt][c] * scale - L0) : 0.f;
			float p1 = live1 && j < nk1 ? __expf(s[nt][2 + c] * scale - L1) : 0.f;
			s[nt][c] = p0 * (dp[nt][c] - dl0) * scale;
			s[nt][2 + c] = p1 * (dp[nt][2 + c] - dl1) * scale;
		}
	}
}

// fa_dkv_probs turns a query tile's transposed scores Sᵀ (s) and dPᵀ (dp)
// (NT tiles of 8 queries, local queries i0 …, cnt of them live, of a
// segment whose rows start at q0; this lane's key rows are seen by local
// queries from first0 and first1) into Pᵀ in s and dSᵀ = Pᵀ ⊙ (dPᵀ −
// δ)·scale in dp, with each query's log-sum-exp and δ read for head h.
template <int NT>
__device__ __forceinline__ void fa_dkv_probs(float s[NT][4], float dp[NT][4], const float* lse, const float* delta,
                                             long long q0, int i0, int cnt, int H, int h, int first0, int first1,
                                             bool live0, bool live1, int tig, float scale) {
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
#pragma unroll
		for (int c = 0; c < 2; c++) {
			int qi = 8 * nt + 2 * tig + c, i = i0 + qi;
			bool on = qi < cnt;
			float L = on ? lse[(q0 + i) * H + h] : 0.f, dl = on ? delta[(q0 + i) * H + h] : 0.f;
			float p0 = on && live0 && i >= first0 ? __expf(s[nt][c] * scale - L) : 0.f;
			float p1 = on && live1 && i >= first1 ? __expf(s[nt][2 + c] * scale - L) : 0.f;
			s[nt][c] = p0;
			s[nt][2 + c] = p1;
			dp[nt][c] = p0 * (dp[nt][c] - dl) * scale;
			dp[nt][2 + c] = p1 * (dp[nt][2 + c] - dl) * scale;
		}
	}
}

// attn_flash_bwd_dq overwrites dq = scale·Σ_j P_j (dP_j − δ) k_j for the rows
// of a query tile, P recomputed from the saved log-sum-exp and dP = dO·vᵀ.
// Grid (query tiles, H), FA_THREADS threads.
template <typename T>
__device__ __forceinline__ void attn_flash_bwd_dq_impl(float* dq, const float* dout, const T* q, const T* k, const T* v,
                                                       const float* lse, const float* delta, const int* qRow0,
                                                       const int* qCount, const int* kStart, const int* kFirst, int H,
                                                       int G, int D, float scale) {
	__shared__ __align__(16) unsigned short ks[FA_BKQ * FA_S];
	__shared__ __align__(16) unsigned short vs[FA_BKQ * FA_S];
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	int n = qCount[t], k0 = kStart[t], kf = kFirst[t];
	int r0 = (threadIdx.x >> 5) * 16 + gid, r1 = r0 + 8;
	bool live0 = r0 < n, live1 = r1 < n;
	long long row0 = (long long)qRow0[t] + r0, row1 = (long long)qRow0[t] + r1;
	unsigned qa[FA_DMAX / 16][4], da[FA_DMAX / 16][4];
	fa_rowfrag(qa, q, row0, live0, row1, live1, H, h, D);
	fa_rowfrag(da, dout, row0, live0, row1, live1, H, h, D);
	float L0 = live0 ? lse[row0 * H + h] : 0.f, L1 = live1 ? lse[row1 * H + h] : 0.f;
	float dl0 = live0 ? delta[row0 * H + h] : 0.f, dl1 = live1 ? delta[row1 * H + h] : 0.f;
	float acc[FA_DMAX / 8][4];
#pragma unroll
	for (int i = 0; i < FA_DMAX / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
	int nk0 = kf + r0, nk1 = kf + r1, nkTile = kf + n - 1;
	for (int j0 = 0; j0 < nkTile; j0 += FA_BKQ) {
		__syncthreads();
		fa_stage(ks, k, (long long)k0 + j0, FA_BKQ, min(FA_BKQ, nkTile - j0), G, g, D);
		fa_stage(vs, v, (long long)k0 + j0, FA_BKQ, min(FA_BKQ, nkTile - j0), G, g, D);
		__syncthreads();
		float s[FA_BKQ / 8][4], dp[FA_BKQ / 8][4];
#pragma unroll
		for (int nt = 0; nt < FA_BKQ / 8; nt++) {
			s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
			dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.f;
#pragma unroll
			for (int st = 0; st < FA_DMAX / 16; st++) {
				if (16 * st >= D) continue;
				int key = 8 * nt + gid, d = 16 * st + 2 * tig;
				unsigned bk[2] = {fa_pair(ks, key, d), fa_pair(ks, key, d + 8)};
				unsigned bv[2] = {fa_pair(vs, key, d), fa_pair(vs, key, d + 8)};
				mma_bf16_16816(s[nt], qa[st], bk);
				mma_bf16_16816(dp[nt], da[st], bv);
			}
		}
		// dS = P ⊙ (dP − δ)·scale, overwriting s.
		fa_dq_dscores<FA_BKQ / 8>(s, dp, j0, tig, live0, live1, nk0, nk1, L0, L1, dl0, dl1, scale);
		// dQ += dS·K: B (k = key, n = d) is a staged key column.
#pragma unroll
		for (int kk = 0; kk < FA_BKQ / 16; kk++) {
			unsigned pa[4];
			fa_ptile(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
			for (int nd = 0; nd < FA_DMAX / 8; nd++) {
				if (8 * nd >= D) continue;
				unsigned b[2] = {fa_colpair(ks, 16 * kk + 2 * tig, 8 * nd + gid), fa_colpair(ks, 16 * kk + 2 * tig + 8, 8 * nd + gid)};
				mma_bf16_16816(acc[nd], pa, b);
			}
		}
	}
	fa_store(dq, acc, row0, live0, 1.f, row1, live1, 1.f, H, h, D);
}

extern "C" __global__ void attn_flash_bwd_dq(float* dq, const float* dout, const float* q, const float* k,
                                             const float* v, const float* lse, const float* delta, const int* qRow0,
                                             const int* qCount, const int* kStart, const int* kFirst, int H, int G,
                                             int D, float scale) {
	attn_flash_bwd_dq_impl(dq, dout, q, k, v, lse, delta, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_flash_bwd_dq_h reads bf16 q, k, v (saved by attn_flash_fwd_h).
extern "C" __global__ void attn_flash_bwd_dq_h(float* dq, const float* dout, const unsigned short* q,
                                               const unsigned short* k, const unsigned short* v, const float* lse,
                                               const float* delta, const int* qRow0, const int* qCount,
                                               const int* kStart, const int* kFirst, int H, int G, int D, float scale) {
	attn_flash_bwd_dq_impl(dq, dout, q, k, v, lse, delta, qRow0, qCount, kStart, kFirst, H, G, D, scale);
}

// attn_flash_bwd_dkv overwrites dk and dv for the rows of a key tile and
// key/value head g, over every query head of the group and every query
// tile that sees the keys: with Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (rows = keys),
// dV += Pᵀ·dO and dK += dSᵀ·Q. Grid (key tiles, G), FA_THREADS threads.
template <typename T>
__device__ __forceinline__ void attn_flash_bwd_dkv_impl(float* dk, float* dv, const float* dout, const T* q, const T* k,
                                                        const T* v, const float* lse, const float* delta,
                                                        const int* kRow0, const int* kCount, const int* j0s,
                                                        const int* segQ0, const int* segQLen, const int* segOff, int H,
                                                        int G, int D, float scale) {
	__shared__ __align__(16) unsigned short ks[FA_BKV * FA_S];
	__shared__ __align__(16) unsigned short vs[FA_BKV * FA_S];
	__shared__ __align__(16) unsigned short qs[FA_BQV * FA_S];
	__shared__ __align__(16) unsigned short dos[FA_BQV * FA_S];
	int t = blockIdx.x, g = blockIdx.y, groups = H / G;
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wr = (threadIdx.x >> 5) * 16;
	int n = kCount[t], off = segOff[t], nq = segQLen[t];
	long long kr0 = kRow0[t], q0 = segQ0[t];
	int r0 = wr + gid, r1 = r0 + 8; // this lane's two key rows of the tile
	bool live0 = r0 < n, live1 = r1 < n;
	int j0 = j0s[t] + r0, j1 = j0s[t] + r1; // their local key indices
	fa_stage(ks, k, kr0, FA_BKV, n, G, g, D);
	fa_stage(vs, v, kr0, FA_BKV, n, G, g, D);
	float dka[FA_DMAX / 8][4], dva[FA_DMAX / 8][4];
#pragma unroll
	for (int i = 0; i < FA_DMAX / 8; i++) {
		dka[i][0] = dka[i][1] = dka[i][2] = dka[i][3] = 0.f;
		dva[i][0] = dva[i][1] = dva[i][2] = dva[i][3] = 0.f;
	}
	int iFirst = max(0, j0s[t] - off); // the first local query that sees the tile's first key
	for (int h = g * groups; h < (g + 1) * groups; h++) {
		for (int i0 = iFirst; i0 < nq; i0 += FA_BQV) {
			int cnt = min(FA_BQV, nq - i0);
			__syncthreads(); // qs, dos no longer read (and ks, vs staged, the first time)
			fa_stage(qs, q, q0 + i0, FA_BQV, cnt, H, h, D);
			fa_stage(dos, dout, q0 + i0, FA_BQV, cnt, H, h, D);
			__syncthreads();
			float s[FA_BQV / 8][4], dp[FA_BQV / 8][4];
#pragma unroll
			for (int nt = 0; nt < FA_BQV / 8; nt++) {
				s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
				dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.f;
#pragma unroll
				for (int st = 0; st < FA_DMAX / 16; st++) {
					if (16 * st >= D) continue;
					int d = 16 * st + 2 * tig, qi = 8 * nt + gid;
					unsigned ak[4] = {fa_pair(ks, r0, d), fa_pair(ks, r1, d), fa_pair(ks, r0, d + 8), fa_pair(ks, r1, d + 8)};
					unsigned av[4] = {fa_pair(vs, r0, d), fa_pair(vs, r1, d), fa_pair(vs, r0, d + 8), fa_pair(vs, r1, d + 8)};
					unsigned bq[2] = {fa_pair(qs, qi, d), fa_pair(qs, qi, d + 8)};
					unsigned bo[2] = {fa_pair(dos, qi, d), fa_pair(dos, qi, d + 8)};
					mma_bf16_16816(s[nt], ak, bq);
					mma_bf16_16816(dp[nt], av, bo);
				}
			}
			// Pᵀ and dSᵀ = Pᵀ ⊙ (dPᵀ − δ)·scale; columns are queries.
			fa_dkv_probs<FA_BQV / 8>(s, dp, lse, delta, q0, i0, cnt, H, h, j0 - off, j1 - off, live0, live1, tig, scale);
			// dV += Pᵀ·dO and dK += dSᵀ·Q: B (k = query, n = d) is a staged column.
			unsigned pa[4], sa[4];
			fa_ptile(pa, s[0], s[1]);
			fa_ptile(sa, dp[0], dp[1]);
#pragma unroll
			for (int nd = 0; nd < FA_DMAX / 8; nd++) {
				if (8 * nd >= D) continue;
				int d = 8 * nd + gid;
				unsigned bo[2] = {fa_colpair(dos, 2 * tig, d), fa_colpair(dos, 2 * tig + 8, d)};
				unsigned bq[2] = {fa_colpair(qs, 2 * tig, d), fa_colpair(qs, 2 * tig + 8, d)};
				mma_bf16_16816(dva[nd], pa, bo);
				mma_bf16_16816(dka[nd], sa, bq);
			}
		}
	}
	fa_store(dk, dka, kr0 + r0, live0, 1.f, kr0 + r1, live1, 1.f, G, g, D);
	fa_store(dv, dva, kr0 + r0, live0, 1.f, kr0 + r1, live1, 1.f, G, g, D);
}

extern "C" __global__ void attn_flash_bwd_dkv(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                              const float* v, const float* lse, const float* delta, const int* kRow0,
                                              const int* kCount, const int* j0s, const int* segQ0, const int* segQLen,
                                              const int* segOff, int H, int G, int D, float scale) {
	attn_flash_bwd_dkv_impl(dk, dv, dout, q, k, v, lse, delta, kRow0, kCount, j0s, segQ0, segQLen, segOff, H, G, D, scale);
}

// attn_flash_bwd_dkv_h reads bf16 q, k, v (saved by attn_flash_fwd_h).
extern "C" __global__ void attn_flash_bwd_dkv_h(float* dk, float* dv, const float* dout, const unsigned short* q,
                                                const unsigned short* k, const unsigned short* v, const float* lse,
                                                const float* delta, const int* kRow0, const int* kCount, const int* j0s,
                                                const int* segQ0, const int* segQLen, const int* segOff, int H, int G,
                                                int D, float scale) {
	attn_flash_bwd_dkv_impl(dk, dv, dout, q, k, v, lse, delta, kRow0, kCount, j0s, segQ0, segQLen, segOff, H, G, D, scale);
}

// mma_check: one warp computes c = a·b (16 × 16 by 16 × 8, bf16 values
// given as fp32, rounded) with a single mma, so a test can hold the
// fragment layout against a plain matrix product. One block of 32 threads.
extern "C" __global__ void mma_check(float* c, const float* a, const float* b) {
	int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	unsigned af[4] = {bf16x2(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]), bf16x2(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]),
	                  bf16x2(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]),
	                  bf16x2(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9])};
	unsigned bf[2] = {bf16x2(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]), bf16x2(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g])};
	float acc[4] = {0.f, 0.f, 0.f, 0.f};
	mma_bf16_16816(acc, af, bf);
	c[g * 8 + 2 * t] = acc[0];
	c[g * 8 + 2 * t + 1] = acc[1];
	c[(g + 8) * 8 + 2 * t] = acc[2];
	c[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

// ---- Hopper (sm_90a): the same three kernels on warpgroup MMA ----
//
// attn_wg_fwd_h, attn_wg_bwd_dq_h and attn_wg_bwd_dkv_h compute what
// attn_flash_fwd_h, attn_flash_bwd_dq_h and attn_flash_bwd_dkv_h compute, for
// head dim 128, on the same grids and tile tables: a block is one
// warpgroup (wgmma.cuh) whose warps own the same 16 rows as there, so the
// softmax and masking code is shared. Each product is one wgmma per k-step
// of 16 instead of N/8 mma.sync, with B (and, for dk/dv, A) read by the
// tensor cores from shared memory, and the k-steps accumulate in the same
// order, so on the emulator both routes give the same numbers.
#define WG_D 128  // head dim
#define WG_BK 64  // keys per forward and dq tile
#define WG_BKV 64 // keys per dk/dv block (FA_BKV)
#define WG_BQV 32 // query rows per dk/dv tile (48 KiB of static shared memory in all)

// wg_load8 reads 8 consecutive elements as bf16: one 16-byte load of bf16,
// or two of fp32 rounded (as fa_stage rounds).
__device__ __forceinline__ uint4 wg_load8(const unsigned short* p) { return *(const uint4*)p; }
__device__ __forceinline__ uint4 wg_load8(const float* p) {
	float4 x = ((const float4*)p)[0], y = ((const float4*)p)[1];
	return make_uint4(bf16x2(x.x, x.y), bf16x2(x.z, x.w), bf16x2(y.x, y.y), bf16x2(y.z, y.w));
}

// wg_stage writes rows [row0, row0+cnt) of head `head` of a (rows, heads,
// 128) tensor into a WG tile (wgmma.cuh) of `rows` rows, zero-filling the
// rest. Consecutive threads write consecutive 16 bytes (the 8 rows of one
// core matrix, then the next column block), so the stores are free of
// bank conflicts.
template <typename T>
__device__ __forceinline__ void wg_stage(unsigned short* sh, const T* src, long long row0, int rows, int cnt, int heads,
                                         int head) {
	for (int idx = threadIdx.x; idx < rows * (WG_D / 8); idx += WG_THREADS) {
		int r = (idx >> 7) * 8 + (idx & 7), c = 8 * ((idx >> 3) & 15);
		uint4 val = make_uint4(0u, 0u, 0u, 0u);
		if (r < cnt) val = wg_load8(src + ((row0 + r) * heads + head) * WG_D + c);
		*(uint4*)((char*)sh + wg_tile_off(r, c)) = val;
	}
}

// wg_stage_async is wg_stage for bf16 sources with cp.async: the rows
// land (and rows cnt … rows−1 are zero-filled) by the thread's next
// cp_async_wait that retires the group the caller commits.
__device__ __forceinline__ void wg_stage_async(unsigned short* sh, const unsigned short* src, long long row0, int rows, int cnt,
                                               int heads, int head) {
	for (int idx = threadIdx.x; idx < rows * (WG_D / 8); idx += WG_THREADS) {
		int r = (idx >> 7) * 8 + (idx & 7), c = 8 * ((idx >> 3) & 15);
		bool live = r < cnt;
		cp_async16((char*)sh + wg_tile_off(r, c), src + ((row0 + (live ? r : 0)) * heads + head) * WG_D + c, live ? 16 : 0);
	}
}

// Descriptors of k-step st of a WG tile: K along the columns (16 columns,
// 256 bytes, a step) or along the rows (16 rows, 4096 bytes, a step).
__device__ __forceinline__ unsigned long long wg_kmajor(const unsigned short* tile, int st) {
	return wg_desc(tile + 128 * st, WG_COLBLK, WG_ROWBLK);
}
__device__ __forceinline__ unsigned long long wg_mnmajor(const unsigned short* tile, int st) {
	return wg_desc(tile + 2048 * st, WG_ROWBLK, WG_COLBLK);
}

__device__ __forceinline__ void wg_zero(float* d, int n) {
	for (int i = 0; i < n; i++) d[i] = 0.f;
}

// attn_wg_fwd_h is attn_flash_fwd_h for D = 128. Grid (query tiles, H),
// WG_THREADS threads.
extern "C" __global__ void attn_wg_fwd_h(unsigned short* out, float* lse, const unsigned short* q, const unsigned short* k,
                                         const unsigned short* v, const int* qRow0, const int* qCount, const int* kStart,
                                         const int* kFirst, int H, int G, int D, float scale) {
	__shared__ __align__(128) unsigned short sm[2 * WG_BK * WG_D];
	unsigned short *ks = sm, *vs = sm + WG_BK * WG_D;
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	int n = qCount[t], k0 = kStart[t], kf = kFirst[t];
	int r0 = (threadIdx.x >> 5) * 16 + gid, r1 = r0 + 8;
	bool live0 = r0 < n, live1 = r1 < n;
	long long row0 = (long long)qRow0[t] + r0, row1 = (long long)qRow0[t] + r1;
	unsigned qa[WG_D / 16][4];
	fa_rowfrag(qa, q, row0, live0, row1, live1, H, h, WG_D);
	float o[WG_D / 8][4];
	wg_zero(&o[0][0], WG_D / 2);
	float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
	int nk0 = kf + r0, nk1 = kf + r1, nkTile = kf + n - 1;
	// The loads overlap the products (FlashAttention-2's order): a tile's
	// values load during its S = Q·Kᵀ, the next tile's keys during
	// softmax and O += P·V. One buffer each: the keys are free once S is
	// done, the values once P·V is.
	if (nkTile > 0) wg_stage_async(ks, k, k0, WG_BK, min(WG_BK, nkTile), G, g);
	cp_async_commit();
	for (int j0 = 0; j0 < nkTile; j0 += WG_BK) {
		__syncthreads(); // the previous tile's P·V is complete in every warp: vs is free
		wg_stage_async(vs, v, (long long)k0 + j0, WG_BK, min(WG_BK, nkTile - j0), G, g);
		cp_async_commit();
		cp_async_wait<1>(); // this tile's keys (this thread's part)
		wg_proxy_fence();
		__syncthreads();
		// S = Q·Kᵀ: A = the query rows (registers), B = the key tile (K-major).
		float s[WG_BK / 8][4];
		wg_zero(&s[0][0], WG_BK / 2);
		wg_fence();
#pragma unroll
		for (int st = 0; st < WG_D / 16; st++) wg_mma_rs<WG_BK, 0>(&s[0][0], qa[st], wg_kmajor(ks, st), st > 0);
		wg_commit();
		wg_wait<0>();
		wg_hold<WG_BK>(&s[0][0]);
		__syncthreads(); // every warp's S is done: ks is free
		if (j0 + WG_BK < nkTile)
			wg_stage_async(ks, k, (long long)k0 + j0 + WG_BK, WG_BK, min(WG_BK, nkTile - j0 - WG_BK), G, g);
		cp_async_commit();
		fa_softmax_tile<WG_BK / 8>(s, o, m0, m1, l0, l1, j0, tig, live0, live1, nk0, nk1, scale);
		// O += P·V: A = P (registers), B = the value tile (MN-major).
		unsigned pa[WG_BK / 16][4];
#pragma unroll
		for (int kk = 0; kk < WG_BK / 16; kk++) fa_ptile(pa[kk], s[2 * kk], s[2 * kk + 1]);
		cp_async_wait<1>(); // this tile's values
		wg_proxy_fence();
		__syncthreads();
		wg_fence();
#pragma unroll
		for (int kk = 0; kk < WG_BK / 16; kk++) wg_mma_rs<WG_D, 1>(&o[0][0], pa[kk], wg_mnmajor(vs, kk), 1);
		wg_commit();
		wg_wait<0>();
		wg_hold<WG_D>(&o[0][0]);
	}
	cp_async_wait<0>(); // the last (empty) group
	l0 = fa_quad_sum(l0);
	l1 = fa_quad_sum(l1);
	fa_store(out, o, row0, live0, 1.f / l0, row1, live1, 1.f / l1, H, h, WG_D);
	if (lse && tig == 0) {
		if (live0) lse[row0 * H + h] = m0 + logf(l0);
		if (live1) lse[row1 * H + h] = m1 + logf(l1);
	}
}

// attn_wg_bwd_dq_h is attn_flash_bwd_dq_h for D = 128 over key tiles of
// WG_BK. Grid (query tiles, H), WG_THREADS threads.
extern "C" __global__ void attn_wg_bwd_dq_h(float* dq, const float* dout, const unsigned short* q, const unsigned short* k,
                                            const unsigned short* v, const float* lse, const float* delta,
                                            const int* qRow0, const int* qCount, const int* kStart, const int* kFirst,
                                            int H, int G, int D, float scale) {
	__shared__ __align__(128) unsigned short sm[2 * WG_BK * WG_D];
	unsigned short *ks = sm, *vs = sm + WG_BK * WG_D;
	int t = blockIdx.x, h = blockIdx.y, g = h / (H / G);
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	int n = qCount[t], k0 = kStart[t], kf = kFirst[t];
	int r0 = (threadIdx.x >> 5) * 16 + gid, r1 = r0 + 8;
	bool live0 = r0 < n, live1 = r1 < n;
	long long row0 = (long long)qRow0[t] + r0, row1 = (long long)qRow0[t] + r1;
	unsigned qa[WG_D / 16][4], da[WG_D / 16][4];
	fa_rowfrag(qa, q, row0, live0, row1, live1, H, h, WG_D);
	fa_rowfrag(da, dout, row0, live0, row1, live1, H, h, WG_D);
	float L0 = live0 ? lse[row0 * H + h] : 0.f, L1 = live1 ? lse[row1 * H + h] : 0.f;
	float dl0 = live0 ? delta[row0 * H + h] : 0.f, dl1 = live1 ? delta[row1 * H + h] : 0.f;
	float acc[WG_D / 8][4];
	wg_zero(&acc[0][0], WG_D / 2);
	int nk0 = kf + r0, nk1 = kf + r1, nkTile = kf + n - 1;
	// The next tile's values load during dS and dQ += dS·K (vs is free once
	// dP is done), its keys after (ks is read by both products).
	if (nkTile > 0) {
		wg_stage_async(ks, k, k0, WG_BK, min(WG_BK, nkTile), G, g);
		wg_stage_async(vs, v, k0, WG_BK, min(WG_BK, nkTile), G, g);
	}
	cp_async_commit();
	for (int j0 = 0; j0 < nkTile; j0 += WG_BK) {
		int next = j0 + WG_BK, nextCnt = min(WG_BK, nkTile - next);
		cp_async_wait<0>();
		wg_proxy_fence();
		__syncthreads();
		// S = Q·Kᵀ and dP = dO·Vᵀ: A in registers, B the key / value tile (K-major).
		float s[WG_BK / 8][4], dp[WG_BK / 8][4];
		wg_zero(&s[0][0], WG_BK / 2);
		wg_zero(&dp[0][0], WG_BK / 2);
		wg_fence();
#pragma unroll
		for (int st = 0; st < WG_D / 16; st++) wg_mma_rs<WG_BK, 0>(&s[0][0], qa[st], wg_kmajor(ks, st), st > 0);
#pragma unroll
		for (int st = 0; st < WG_D / 16; st++) wg_mma_rs<WG_BK, 0>(&dp[0][0], da[st], wg_kmajor(vs, st), st > 0);
		wg_commit();
		wg_wait<0>();
		wg_hold<WG_BK>(&s[0][0]);
		wg_hold<WG_BK>(&dp[0][0]);
		__syncthreads(); // every warp's dP is done: vs is free
		if (next < nkTile) wg_stage_async(vs, v, (long long)k0 + next, WG_BK, nextCnt, G, g);
		fa_dq_dscores<WG_BK / 8>(s, dp, j0, tig, live0, live1, nk0, nk1, L0, L1, dl0, dl1, scale);
		// dQ += dS·K: A = dS (registers), B = the key tile (MN-major).
		unsigned pa[WG_BK / 16][4];
#pragma unroll
		for (int kk = 0; kk < WG_BK / 16; kk++) fa_ptile(pa[kk], s[2 * kk], s[2 * kk + 1]);
		wg_fence();
#pragma unroll
		for (int kk = 0; kk < WG_BK / 16; kk++) wg_mma_rs<WG_D, 1>(&acc[0][0], pa[kk], wg_mnmajor(ks, kk), 1);
		wg_commit();
		wg_wait<0>();
		wg_hold<WG_D>(&acc[0][0]);
		__syncthreads(); // every warp's dQ product is done: ks is free
		if (next < nkTile) wg_stage_async(ks, k, (long long)k0 + next, WG_BK, nextCnt, G, g);
		cp_async_commit();
	}
	cp_async_wait<0>();
	fa_store(dq, acc, row0, live0, 1.f, row1, live1, 1.f, H, h, WG_D);
}

// attn_wg_bwd_dkv_h is attn_flash_bwd_dkv_h for D = 128 over query tiles
// of WG_BQV; Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ read both operands from shared
// memory. Grid (key tiles, G), WG_THREADS threads.
extern "C" __global__ void attn_wg_bwd_dkv_h(float* dk, float* dv, const float* dout, const unsigned short* q,
                                             const unsigned short* k, const unsigned short* v, const float* lse,
                                             const float* delta, const int* kRow0, const int* kCount, const int* j0s,
                                             const int* segQ0, const int* segQLen, const int* segOff, int H, int G,
                                             int D, float scale) {
	__shared__ __align__(128) unsigned short sm[2 * WG_BKV * WG_D + 2 * WG_BQV * WG_D];
	unsigned short *ks = sm, *vs = sm + WG_BKV * WG_D, *qs = sm + 2 * WG_BKV * WG_D, *dos = qs + WG_BQV * WG_D;
	int t = blockIdx.x, g = blockIdx.y, groups = H / G;
	int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3, wr = (threadIdx.x >> 5) * 16;
	int n = kCount[t], off = segOff[t], nq = segQLen[t];
	long long kr0 = kRow0[t], q0 = segQ0[t];
	int r0 = wr + gid, r1 = r0 + 8;
	bool live0 = r0 < n, live1 = r1 < n;
	int j0 = j0s[t] + r0, j1 = j0s[t] + r1;
	wg_stage(ks, k, kr0, WG_BKV, n, G, g);
	wg_stage(vs, v, kr0, WG_BKV, n, G, g);
	float dka[WG_D / 8][4], dva[WG_D / 8][4];
	wg_zero(&dka[0][0], WG_D / 2);
	wg_zero(&dva[0][0], WG_D / 2);
	int iFirst = max(0, j0s[t] - off);
	for (int h = g * groups; h < (g + 1) * groups; h++) {
		for (int i0 = iFirst; i0 < nq; i0 += WG_BQV) {
			int cnt = min(WG_BQV, nq - i0);
			__syncthreads(); // qs, dos no longer read (the products were waited for)
			wg_stage(qs, q, q0 + i0, WG_BQV, cnt, H, h);
			wg_stage(dos, dout, q0 + i0, WG_BQV, cnt, H, h);
			wg_proxy_fence(); // also publishes ks, vs the first time
			__syncthreads();
			float s[WG_BQV / 8][4], dp[WG_BQV / 8][4];
			wg_zero(&s[0][0], WG_BQV / 2);
			wg_zero(&dp[0][0], WG_BQV / 2);
			wg_fence();
#pragma unroll
			for (int st = 0; st < WG_D / 16; st++)
				wg_mma_ss<WG_BQV, 0, 0>(&s[0][0], wg_kmajor(ks, st), wg_kmajor(qs, st), st > 0);
#pragma unroll
			for (int st = 0; st < WG_D / 16; st++)
				wg_mma_ss<WG_BQV, 0, 0>(&dp[0][0], wg_kmajor(vs, st), wg_kmajor(dos, st), st > 0);
			wg_commit();
			wg_wait<0>();
			wg_hold<WG_BQV>(&s[0][0]);
			wg_hold<WG_BQV>(&dp[0][0]);
			fa_dkv_probs<WG_BQV / 8>(s, dp, lse, delta, q0, i0, cnt, H, h, j0 - off, j1 - off, live0, live1, tig, scale);
			// dV += Pᵀ·dO and dK += dSᵀ·Q: A in registers, B the query-side tiles (MN-major).
			unsigned pa[WG_BQV / 16][4], sa[WG_BQV / 16][4];
#pragma unroll
			for (int kk = 0; kk < WG_BQV / 16; kk++) {
				fa_ptile(pa[kk], s[2 * kk], s[2 * kk + 1]);
				fa_ptile(sa[kk], dp[2 * kk], dp[2 * kk + 1]);
			}
			wg_fence();
#pragma unroll
			for (int kk = 0; kk < WG_BQV / 16; kk++) wg_mma_rs<WG_D, 1>(&dva[0][0], pa[kk], wg_mnmajor(dos, kk), 1);
#pragma unroll
			for (int kk = 0; kk < WG_BQV / 16; kk++) wg_mma_rs<WG_D, 1>(&dka[0][0], sa[kk], wg_mnmajor(qs, kk), 1);
			wg_commit();
			wg_wait<0>();
			wg_hold<WG_D>(&dva[0][0]);
			wg_hold<WG_D>(&dka[0][0]);
		}
	}
	fa_store(dk, dka, kr0 + r0, live0, 1.f, kr0 + r1, live1, 1.f, G, g, WG_D);
	fa_store(dv, dva, kr0 + r0, live0, 1.f, kr0 + r1, live1, 1.f, G, g, WG_D);
}
