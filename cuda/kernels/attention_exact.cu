// uses fp8.cuh
// uses exact_fold.cuh
//
// Batch-invariant attention (precision.exact_logprobs, docs/algorithm.md
// §5.10): the one forward kernel every Attention call takes in exact mode,
// decode of any batch, prefill and the training forward alike, so a token's
// attention output is the same bits whichever call computes it.
//
// What makes it invariant: a (query row, head)'s result is a fixed
// sequence of rounded operations on its own query and the keys and values
// of its causal window, whatever else the block or the launch holds.
//   - the window is cut into splits of S keys from key 0 (S fixed for
//     every call, never chosen by length or batch), each split an online
//     softmax over tiles of EX_TK keys from its start;
//   - a score is four partial sums (d ≡ c mod 4, d ascending, __fmaf_rn
//     from 0) added as (s0 + s1) + (s2 + s3), times scale;
//   - per tile: the tile's max, m' = max(m, it), p = __expf(s − m'), the p
//     summed in key order by one thread, l = l·e^(m−m') + Σp;
//   - an output element: acc·e^(m−m') then + p·v key by key (__fmaf_rn);
//   - the splits' (m, l, acc) folded in split order (ex_fold), then
//     out = O / L (__fdiv_rn), lse = M + log L.
// Which thread computes what, and whether a split's sums are folded in
// the block or written for attn_exact_combine, changes nothing of this.
// Every key/value format is first widened to the fp32 value the cache
// holds (bf16 exactly; fp8 as code·scale, __fmul_rn, as kv8_gather_f32 and
// model.DequantizeE4M3 compute it), so the arithmetic sees values, not
// storage: the training forward, reading a scratch written by the cache's
// own ScatterRows, and the decode step, reading the cache, compute alike.
//
// Parallelism changes where, never how: a block takes up to QT consecutive
// query rows of one segment (a query tile, as queryTiles builds them: row
// i of it sees kFirst + i keys) and HB query heads of one key/value head,
// so a tile of keys and values is loaded once for QT·HB (row, head) pairs;
// a row whose window ends before a key tile skips it. The host sizes the
// tiles (exactTiles): decode steps get tiles of one row, packed segments
// the most rows that fit.
//
// Grid (query tiles, G, head chunks × splits), EX_THREADS threads;
// qCount·HB·D ≤ ACC·EX_THREADS and qCount·HB ≤ EX_PAIRS for every tile;
// D ≤ DMAX. part null: every split folded in the block; else the block
// takes split blockIdx.z / chunks of one-row tiles and writes its sums to
// part, (rows·H·nsplit) × (D + 2) floats: D sums, then m and l.

#define EX_THREADS 128
#define EX_TK 16     // keys per tile
#define EX_DMAX 256  // largest head dim
#define EX_ACC 16    // output elements per thread
#define EX_PAIRS 64  // (row, head) pairs per block

// ex_kv widens element d of head g's row `row` to the value the cache holds.
__device__ __forceinline__ float ex_kv(const float* p, long long row, int G, int g, int D, int d) {
	return p[(row * G + g) * D + d];
}
__device__ __forceinline__ float ex_kv(const unsigned short* p, long long row, int G, int g, int D, int d) {
	return ld(p, (row * G + g) * D + d);
}
__device__ __forceinline__ float ex_kv(const unsigned char* p, long long row, int G, int g, int D, int d) {
	return __fmul_rn(e4m3_to_f32(kv8_head(p, row, G, g, D)[d]), kv8_scale(p, row, G, g, D));
}

// ex_vec widens the E = 16/sizeof(KV) elements at element d of head g's
// row (16-byte aligned) to the values the cache holds, as ex_kv does one
// by one: the same bits, in a quarter to a sixteenth of the loads.
__device__ __forceinline__ void ex_vec(float* x, const float* p, long long row, int G, int g, int D, int d) {
	float4 a = *(const float4*)(p + (row * G + g) * D + d);
	x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
}
__device__ __forceinline__ void ex_vec(float* x, const unsigned short* p, long long row, int G, int g, int D, int d) {
	uint4 a = *(const uint4*)(p + (row * G + g) * D + d);
	unsigned w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		x[2 * i] = __uint_as_float(w[i] << 16);
		x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
	}
}
__device__ __forceinline__ void ex_vec(float* x, const unsigned char* p, long long row, int G, int g, int D, int d) {
	kv8_decode16(x, *(const uint4*)(kv8_head(p, row, G, g, D) + d));
	float s = kv8_scale(p, row, G, g, D);
#pragma unroll
	for (int i = 0; i < 16; i++) x[i] = __fmul_rn(x[i], s);
}

// ex_tile stages keys j0 … j0+cnt−1 of the window at row k0 into ks (rows
// kpad apart) and vs (rows D apart) as fp32 values; vec: 16-byte loads
// (the host checks D and the addresses allow them).
template <typename KV>
__device__ __forceinline__ void ex_tile(float* ks, float* vs, const KV* k, const KV* v, long long k0, int j0, int cnt,
                                        int G, int g, int D, int kpad, bool vec) {
	constexpr int E = 16 / sizeof(KV);
	if (!vec) {
		for (int i = threadIdx.x; i < cnt * D; i += EX_THREADS) {
			int jj = i / D, d = i % D;
			ks[jj * kpad + d] = ex_kv(k, k0 + j0 + jj, G, g, D, d);
			vs[jj * D + d] = ex_kv(v, k0 + j0 + jj, G, g, D, d);
		}
		return;
	}
	int per = D / E;
	for (int i = threadIdx.x; i < cnt * per; i += EX_THREADS) {
		int jj = i / per, d = (i % per) * E;
		float x[E];
		ex_vec(x, k, k0 + j0 + jj, G, g, D, d);
#pragma unroll
		for (int e = 0; e < E; e += 4) *(float4*)(ks + jj * kpad + d + e) = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
		ex_vec(x, v, k0 + j0 + jj, G, g, D, d);
#pragma unroll
		for (int e = 0; e < E; e += 4) *(float4*)(vs + jj * D + d + e) = make_float4(x[e], x[e + 1], x[e + 2], x[e + 3]);
	}
}

// ex_fold_coef and ex_fold (exact_fold.cuh) fold a split's sums into the
// running ones, here and in attn_exact_combine alike.

template <typename QO, typename KV, int DMAX, int ACC>
__device__ __forceinline__ void attn_exact_impl(QO* out, float* lse, const QO* q, const KV* k, const KV* v,
                                                const int* qRow0, const int* qCount, const int* kStart,
                                                const int* kFirst, int H, int G, int D, float scale, int HB, int vec,
                                                int S, float* part, int nsplit) {
	// Key rows padded to a multiple of 4 plus 4 floats: the 32 lanes of a
	// score pass (8 keys × 4 partial sums) read 32 distinct banks.
	__shared__ __align__(16) float ks[EX_TK * (DMAX + 4)];
	__shared__ __align__(16) float vs[EX_TK * DMAX];
	__shared__ float qs[ACC * EX_THREADS];
	__shared__ float ps[EX_PAIRS * EX_TK];
	__shared__ float ms[EX_PAIRS], ls[EX_PAIRS], cs[EX_PAIRS], bs[EX_PAIRS];
	__shared__ float Ms[EX_PAIRS], Ls[EX_PAIRS], fa[EX_PAIRS], fc[EX_PAIRS];
	int tile = blockIdx.x, g = blockIdx.y, t = threadIdx.x;
	int per = H / G, chunks = (per + HB - 1) / HB, cz = blockIdx.z % chunks, sp = blockIdx.z / chunks;
	int h0 = g * per + cz * HB, hb = min(HB, per - cz * HB);
	int r0 = qRow0[tile], nr = qCount[tile], k0 = kStart[tile], kf = kFirst[tile];
	int kpad = ((D + 3) & ~3) + 4, pairs = nr * hb, nel = pairs * D;
	for (int i = t; i < nel; i += EX_THREADS) {
		int r = i / (hb * D), h = (i / D) % hb;
		qs[i] = ld(q, ((long long)(r0 + r) * H + h0 + h) * D + i % D);
	}
	if (t < pairs) ms[t] = NEG_INF, ls[t] = 0.f, Ms[t] = NEG_INF, Ls[t] = 0.f;
	float acc[ACC], O[ACC];
#pragma unroll
	for (int i = 0; i < ACC; i++) acc[i] = 0.f, O[i] = 0.f;
	int nkMax = kf + nr - 1; // the tile's last row sees the most keys
	// Splits of S keys from key 0: each its own online softmax, folded in
	// order. part: this block's split only, its (m, l, acc) written for
	// attn_exact_combine; else every split, folded here.
	int s0 = part ? sp : 0, s1 = part ? sp + 1 : (nkMax + S - 1) / S;
	for (int split = s0; split < s1; split++) {
	int jA = split * S, jB = min(nkMax, jA + S);
	for (int j0 = jA; j0 < jB; j0 += EX_TK) {
		int cnt = min(EX_TK, jB - j0);
		__syncthreads(); // the previous tile's readers are done (and qs, ms, ls are set)
		ex_tile(ks, vs, k, v, k0, j0, cnt, G, g, D, kpad, vec != 0);
		__syncthreads();
		// Scores: item (pair, key group, c) → partial sum c of kg keys (kg
		// = 4 where there are pairs enough to keep the threads busy, so a
		// query element read from shared memory serves four keys; else 1).
		// Every lane runs every pass so the shuffles see a full warp.
		int kg = pairs >= 8 ? 4 : 1, items = pairs * (EX_TK / kg) * 4;
		for (int w0 = 0; w0 < items; w0 += EX_THREADS) {
			int w = w0 + t, c = w & 3, grp = (w >> 2) % (EX_TK / kg), pr = (w >> 2) / (EX_TK / kg);
			int r = pr / hb, h = pr % hb, jb = grp * kg;
			bool on = w < items;
			float sv[4] = {0.f, 0.f, 0.f, 0.f};
			if (on) {
				const float* qp = qs + (r * hb + h) * D;
				const float* kp = ks + jb * kpad;
				if (kg == 4) {
					for (int d = c; d < D; d += 4) {
						float x = qp[d];
#pragma unroll
						for (int u = 0; u < 4; u++) sv[u] = __fmaf_rn(x, kp[u * kpad + d], sv[u]);
					}
				} else {
					for (int d = c; d < D; d += 4) sv[0] = __fmaf_rn(qp[d], kp[d], sv[0]);
				}
			}
#pragma unroll
			for (int u = 0; u < 4; u++) {
				if (u >= kg) break; // kg is the same in every lane
				float s0 = sv[u], s1 = __shfl_xor_sync(FULL_MASK, s0, 1);
				float a = (c & 1) ? __fadd_rn(s1, s0) : __fadd_rn(s0, s1); // s0 + s1 or s2 + s3 in every lane of the pair
				float a2 = __shfl_xor_sync(FULL_MASK, a, 2);
				float dot = (c & 2) ? __fadd_rn(a2, a) : __fadd_rn(a, a2);
				int jj = jb + u;
				if (on && c == 0) ps[pr * EX_TK + jj] = j0 + jj < kf + r ? __fmul_rn(dot, scale) : NEG_INF;
			}
		}
		__syncthreads();
		// Online softmax: one thread per (row, head) pair takes the tile's
		// max (exact in any order) and the rescaling, all threads the
		// exponentials (each its own), and the pair's thread sums them in
		// key order below.
		if (t < pairs) {
			int nk = kf + t / hb;
			float corr = 1.f;
			if (j0 < nk) {
				int n = min(EX_TK, nk - j0);
				const float* p = ps + t * EX_TK;
				float mt = NEG_INF;
				for (int jj = 0; jj < n; jj++) mt = fmaxf(mt, p[jj]);
				float m = ms[t], mn = fmaxf(m, mt);
				float base = mn == NEG_INF ? 0.f : mn; // keys all −∞ so far: no NaN from −∞ − −∞
				corr = __expf(__fsub_rn(m, base));
				bs[t] = base;
				ms[t] = mn;
			}
			cs[t] = corr;
		}
		__syncthreads();
		for (int i = t; i < pairs * EX_TK; i += EX_THREADS) {
			int pr = i / EX_TK, jj = i % EX_TK;
			if (j0 + jj < kf + pr / hb) ps[i] = __expf(__fsub_rn(ps[i], bs[pr]));
		}
		__syncthreads();
		if (t < pairs && j0 < kf + t / hb) {
			int n = min(EX_TK, kf + t / hb - j0);
			float sum = 0.f;
			for (int jj = 0; jj < n; jj++) sum = __fadd_rn(sum, ps[t * EX_TK + jj]);
			ls[t] = __fmaf_rn(ls[t], cs[t], sum);
		}
		// Outputs: element i = (row, head, d) is this thread's for i ≡ t;
		// each its own chain, acc·e^(m−m′) then + p·v in key order. Where D
		// divides EX_THREADS every element of a thread has d = t mod D, and
		// one value read serves them all.
		int nmax = 0;
#pragma unroll
		for (int a = 0; a < ACC; a++) {
			int i = t + a * EX_THREADS, pr = i / D, nk = kf + pr / hb;
			if (i < nel && j0 < nk) {
				acc[a] = __fmul_rn(acc[a], cs[pr]);
				nmax = max(nmax, min(EX_TK, nk - j0));
			}
		}
		bool shared_d = EX_THREADS % D == 0;
		for (int jj = 0; jj < nmax; jj++) {
			float vd = shared_d ? vs[jj * D + t % D] : 0.f;
#pragma unroll
			for (int a = 0; a < ACC; a++) {
				int i = t + a * EX_THREADS, pr = i / D;
				if (i < nel && j0 + jj < kf + pr / hb) {
					float x = shared_d ? vd : vs[jj * D + i % D];
					acc[a] = __fmaf_rn(ps[pr * EX_TK + jj], x, acc[a]);
				}
			}
		}
	}
	__syncthreads();
	if (part) { // this split's sums, for rows whose window reaches it
#pragma unroll
		for (int a = 0; a < ACC; a++) {
			int i = t + a * EX_THREADS, pr = i / D;
			if (i < nel && jA < kf + pr / hb) {
				int r = pr / hb, h = pr % hb;
				part[(((long long)(r0 + r) * H + h0 + h) * nsplit + split) * (D + 2) + i % D] = acc[a];
			}
		}
		if (t < pairs && jA < kf + t / hb) {
			float* o = part + (((long long)(r0 + t / hb) * H + h0 + t % hb) * nsplit + split) * (D + 2);
			o[D] = ms[t], o[D + 1] = ls[t];
		}
		return;
	}
	if (t < pairs && jA < kf + t / hb) {
		float Mn, a, c;
		ex_fold_coef(Ms[t], ms[t], Mn, a, c);
		Ls[t] = ex_fold(Ls[t], a, ls[t], c);
		Ms[t] = Mn, fa[t] = a, fc[t] = c;
		ms[t] = NEG_INF, ls[t] = 0.f;
	}
	__syncthreads();
#pragma unroll
	for (int a = 0; a < ACC; a++) {
		int i = t + a * EX_THREADS, pr = i / D;
		if (i < nel && jA < kf + pr / hb) O[a] = ex_fold(O[a], fa[pr], acc[a], fc[pr]);
		acc[a] = 0.f;
	}
	} // splits
	__syncthreads();
#pragma unroll
	for (int a = 0; a < ACC; a++) {
		int i = t + a * EX_THREADS;
		if (i >= nel) continue;
		int pr = i / D, d = i % D, r = pr / hb, h = pr % hb;
		store_as(out, ((long long)(r0 + r) * H + h0 + h) * D + d, __fdiv_rn(O[a], Ls[pr]));
	}
	if (lse && t < pairs) {
		int r = t / hb, h = t % hb;
		lse[(long long)(r0 + r) * H + h0 + h] = __fadd_rn(Ms[t], logf(Ls[t]));
	}
}

// attn_exact_combine folds the splits attn_exact_s* wrote (part) for each
// one-row tile and query head, in split order, with ex_fold as the block
// that folds its own does; out = O / L, lse = M + log L. Grid (tiles, H),
// EX_THREADS threads.
template <typename QO>
__device__ __forceinline__ void attn_exact_combine_impl(QO* out, float* lse, const float* part, const int* qRow0,
                                                        const int* kFirst, int H, int D, int S, int nsplit) {
	int tile = blockIdx.x, h = blockIdx.y;
	long long qr = qRow0[tile];
	int ns = (kFirst[tile] + S - 1) / S;
	const float* p = part + (qr * H + h) * nsplit * (D + 2);
	for (int d = threadIdx.x; d < D; d += EX_THREADS) {
		float M = NEG_INF, L = 0.f, O = 0.f;
		for (int s = 0; s < ns; s++) {
			const float* ps = p + s * (D + 2);
			float Mn, a, c;
			ex_fold_coef(M, ps[D], Mn, a, c);
			L = ex_fold(L, a, ps[D + 1], c);
			O = ex_fold(O, a, ps[d], c);
			M = Mn;
		}
		store_as(out, (qr * H + h) * D + d, __fdiv_rn(O, L));
		if (lse && d == 0) lse[qr * H + h] = __fadd_rn(M, logf(L));
	}
}

extern "C" __global__ void attn_exact_combine(float* out, float* lse, const float* part, const int* qRow0,
                                              const int* kFirst, int H, int D, int S, int nsplit) {
	attn_exact_combine_impl(out, lse, part, qRow0, kFirst, H, D, S, nsplit);
}

extern "C" __global__ void attn_exact_combine_h(unsigned short* out, float* lse, const float* part, const int* qRow0,
                                                const int* kFirst, int H, int D, int S, int nsplit) {
	attn_exact_combine_impl(out, lse, part, qRow0, kFirst, H, D, S, nsplit);
}

// The kernels: attn_exact reads fp32 queries and writes fp32 outputs, _h
// bf16 activations (the output rounded once, at the end); the keys and
// values are fp32, _kvh bf16 (a cache or activations), _kv8 an fp8 cache.
// attn_exact_s* are the same code sized for a decode step's tiles (D ≤
// 128, HB·D ≤ 512: a quarter of the accumulators, half the shared memory,
// so twice the blocks an SM keeps loads in flight for); each (row, head)'s
// arithmetic is the same in both sizes.
extern "C" __global__ void attn_exact(float* out, float* lse, const float* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, float, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_kvh(float* out, float* lse, const float* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, unsigned short, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_kv8(float* out, float* lse, const float* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, unsigned char, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_h(unsigned short* out, float* lse, const unsigned short* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, float, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_h_kvh(unsigned short* out, float* lse, const unsigned short* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, unsigned short, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_h_kv8(unsigned short* out, float* lse, const unsigned short* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, unsigned char, EX_DMAX, EX_ACC>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s(float* out, float* lse, const float* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, float, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s_kvh(float* out, float* lse, const float* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, unsigned short, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s_kv8(float* out, float* lse, const float* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<float, unsigned char, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s_h(unsigned short* out, float* lse, const unsigned short* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, float, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s_h_kvh(unsigned short* out, float* lse, const unsigned short* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, unsigned short, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_s_h_kv8(unsigned short* out, float* lse, const unsigned short* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_impl<unsigned short, unsigned char, 128, 4>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}
