// uses fp8.cuh
// uses exact_fold.cuh
//
// Batch-invariant attention on tensor cores (precision.exact_logprobs under
// bf16 products, docs/algorithm.md §5.10): what every Attention forward runs
// in exact mode when the products are bf16 (head dim ≤ XT_DMAX, sm_80 or
// later), decode of any batch, prefill and the training forward alike, so a
// token's attention output is the same bits whichever call computes it.
// (fp32 and tf32 products keep attention_exact.cu, on CUDA cores.)
//
// What makes it invariant: mma.m16n8k16 computes each element of its
// result from its own A row and B column (and accumulator) alone, so a
// (query row, head) pair's result does not depend on which other pairs
// share its 16-row fragment: a decode row padded with empty rows, the
// query heads of one key/value head, or many rows of a packed training
// segment. A pair's arithmetic is then a fixed sequence over its own
// window:
//   - q rounded to bf16 (nearest even); keys and values as bf16: a bf16
//     cache or activation as it is, fp32 rounded to bf16, an fp8 cache as
//     code·scale (__fmul_rn, the value it holds) rounded to bf16, so decode
//     (the cache) and the training forward (a scratch in the cache's
//     format) stage the same bits;
//   - the window is cut into splits of S keys from key 0 (S fixed for
//     every call), each an online softmax over tiles of XT_TK = 16 keys
//     from its start, keys past the window zero-filled when staged;
//   - a tile's scores: two mma chains (keys 0–7, 8–15) over D in steps
//     of 16 from zero, each times scale (__fmul_rn), −∞ past the window;
//   - the tile's max (a quad shuffle: exact in any order), m′ = max(m, it),
//     p = __expf(s − m′), the row's 16 p summed as (p0+p1)+(p8+p9) in each
//     lane then across the quad by xor 1 then 2 (commutative, so every lane
//     holds the same bits), l = l·c + Σp, the output accumulators ·c with
//     c = e^(m−m′), then + P·V by one mma per 8 columns, P rounded to bf16;
//   - a pair whose window ends before a tile leaves m, l and its
//     accumulators as they are (c = 1, p = 0: the mma adds zero products);
//   - the splits' (m, l, acc) folded in split order (ex_fold), then
//     out = O / L (__fdiv_rn), lse = M + log L: in the block, or by
//     attn_exact_combine when a decode launch gives each split a block.
// Which warp, fragment row or block computes a pair changes none of it.
//
// Parallelism: a block takes up to QT consecutive query rows of one
// segment (a query tile; row i of it sees kFirst + i keys) and HB query
// heads of one key/value head; its NW warps each own 16 (row, head) pairs,
// pair p = row·hb + head, and share each staged tile of KT keys and values
// (bf16 in shared memory). attn_exact_tc: 4 warps, 64 pairs, tiles of 64
// keys (training, prefill); attn_exact_tc_s: one warp, 16 pairs, 32 keys
// (decode steps: one row, its query heads). Grid (query tiles, G, head
// chunks × splits); part as attention_exact.cu's: null, every split folded
// in the block; else the block takes split blockIdx.z / chunks of one-row
// tiles and writes its sums to part, (rows·H·nsplit) × (D + 2) floats.

#define XT_DMAX 128        // largest head dim
#define XT_S (XT_DMAX + 8) // staged row stride in bf16: rows 16 bytes apart mod 128, no bank conflicts
#define XT_TK 16           // keys per softmax tile: part of the arithmetic

// xt_one is element d of head g's key or value row `row` as the bf16 the
// kernel multiplies: the value the storage holds, rounded to nearest even.
__device__ __forceinline__ unsigned short xt_one(const float* p, long long row, int G, int g, int D, int d) {
	return f32_to_bf16_bits(p[(row * G + g) * D + d]);
}
__device__ __forceinline__ unsigned short xt_one(const unsigned short* p, long long row, int G, int g, int D, int d) {
	return p[(row * G + g) * D + d];
}
__device__ __forceinline__ unsigned short xt_one(const unsigned char* p, long long row, int G, int g, int D, int d) {
	return f32_to_bf16_bits(__fmul_rn(e4m3_to_f32(kv8_head(p, row, G, g, D)[d]), kv8_scale(p, row, G, g, D)));
}

// xt_vec is xt_one for the 16/sizeof(KV) elements at d (a 16-byte load;
// the same bits), written to dst.
__device__ __forceinline__ void xt_vec(unsigned short* dst, const float* p, long long row, int G, int g, int D, int d) {
	float4 a = *(const float4*)(p + (row * G + g) * D + d);
	*(uint2*)dst = make_uint2(bf16x2(a.x, a.y), bf16x2(a.z, a.w));
}
__device__ __forceinline__ void xt_vec(unsigned short* dst, const unsigned short* p, long long row, int G, int g, int D, int d) {
	*(uint4*)dst = *(const uint4*)(p + (row * G + g) * D + d);
}
__device__ __forceinline__ void xt_vec(unsigned short* dst, const unsigned char* p, long long row, int G, int g, int D, int d) {
	float x[16];
	kv8_decode16(x, *(const uint4*)(kv8_head(p, row, G, g, D) + d));
	float s = kv8_scale(p, row, G, g, D);
	unsigned w[8];
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = bf16x2(__fmul_rn(x[2 * i], s), __fmul_rn(x[2 * i + 1], s));
	*(uint4*)dst = make_uint4(w[0], w[1], w[2], w[3]);
	*(uint4*)(dst + 8) = make_uint4(w[4], w[5], w[6], w[7]);
}

// xt_stage stages keys (or values) row0 … row0+cnt−1 of head g into sh
// (rows XT_S apart) as bf16, and zeros rows cnt … rows−1 and columns
// D … Dp−1, so nothing past the window or the head dim (memory a decode
// step never wrote) reaches an mma. vec: 16-byte loads (the host checks D
// and the addresses allow them).
template <typename KV, int NT>
__device__ __forceinline__ void xt_stage(unsigned short* sh, const KV* src, long long row0, int cnt, int rows, int G,
                                         int g, int D, int Dp, bool vec) {
	constexpr int E = 16 / sizeof(KV);
	if (vec) {
		int per = D / E;
		for (int i = threadIdx.x; i < cnt * per; i += NT) {
			int j = i / per, d = (i - j * per) * E;
			xt_vec(sh + j * XT_S + d, src, row0 + j, G, g, D, d);
		}
	} else {
		for (int i = threadIdx.x; i < cnt * D; i += NT) {
			int j = i / D, d = i - j * D;
			sh[j * XT_S + d] = xt_one(src, row0 + j, G, g, D, d);
		}
	}
	for (int i = threadIdx.x; i < (rows - cnt) * Dp; i += NT) sh[(cnt + i / Dp) * XT_S + i % Dp] = 0;
	int tail = Dp - D;
	for (int i = threadIdx.x; i < cnt * tail; i += NT) sh[(i / tail) * XT_S + D + i % tail] = 0;
}

// xt_two is elements d and d+1 of a query row as a bf16 pair (the lower
// index in the lower half): rounded from fp32, or one 4-byte load of bf16.
__device__ __forceinline__ unsigned xt_two(const float* p, int d) { return bf16x2(p[d], p[d + 1]); }
__device__ __forceinline__ unsigned xt_two(const unsigned short* p, int d) { return *(const unsigned*)(p + d); }

// xt_qfrag loads the A fragments of this lane's two query rows (at qa and
// qb; dead rows and columns past D are zero) for every step of 16 along D.
template <typename Q>
__device__ __forceinline__ void xt_qfrag(unsigned a[XT_DMAX / 16][4], const Q* qa, bool liveA, const Q* qb, bool liveB,
                                         int D, int tig) {
#pragma unroll
	for (int s = 0; s < XT_DMAX / 16; s++) {
		int d = 16 * s + 2 * tig; // D is even: d < D covers d + 1
		a[s][0] = liveA && d < D ? xt_two(qa, d) : 0u;
		a[s][1] = liveB && d < D ? xt_two(qb, d) : 0u;
		a[s][2] = liveA && d + 8 < D ? xt_two(qa, d + 8) : 0u;
		a[s][3] = liveB && d + 8 < D ? xt_two(qb, d + 8) : 0u;
	}
}

// xt_quad_max / xt_quad_sum reduce over the 4 lanes that hold a row, xor
// 1 then 2: every lane gets the same bits (max is exact, and a + b = b + a).
__device__ __forceinline__ float xt_quad_max(float v) {
	v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 1));
	return fmaxf(v, __shfl_xor_sync(FULL_MASK, v, 2));
}
__device__ __forceinline__ float xt_quad_sum(float v) {
	v = __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, 1));
	return __fadd_rn(v, __shfl_xor_sync(FULL_MASK, v, 2));
}

// xt_row_softmax turns one row's scores of a tile (x0, x1: keys 2t, 2t+1;
// y0, y1: keys 8+2t, 8+2t+1) into probabilities, and updates the row's
// running max m and sum l; it returns the factor c for its accumulators.
// see: the row's window reaches the tile (else c = 1 and nothing changes).
__device__ __forceinline__ float xt_row_softmax(float& x0, float& x1, float& y0, float& y1, float& m, float& l, bool see) {
	float mn = fmaxf(m, xt_quad_max(fmaxf(fmaxf(x0, x1), fmaxf(y0, y1))));
	float base = mn == NEG_INF ? 0.f : mn; // keys all −∞ so far: no NaN from −∞ − −∞
	x0 = __expf(__fsub_rn(x0, base)), x1 = __expf(__fsub_rn(x1, base));
	y0 = __expf(__fsub_rn(y0, base)), y1 = __expf(__fsub_rn(y1, base));
	float sum = xt_quad_sum(__fadd_rn(__fadd_rn(x0, x1), __fadd_rn(y0, y1)));
	if (!see) return 1.f;
	float c = __expf(__fsub_rn(m, base));
	l = __fmaf_rn(l, c, sum);
	m = mn;
	return c;
}

template <typename QO, typename KV, int NW, int KT>
__device__ __forceinline__ void attn_exact_tc_impl(QO* out, float* lse, const QO* q, const KV* k, const KV* v,
                                                   const int* qRow0, const int* qCount, const int* kStart,
                                                   const int* kFirst, int H, int G, int D, float scale, int HB, int vec,
                                                   int S, float* part, int nsplit) {
	__shared__ __align__(16) unsigned short ks[KT * XT_S];
	__shared__ __align__(16) unsigned short vs[KT * XT_S];
	int tile = blockIdx.x, g = blockIdx.y;
	int per = H / G, chunks = (per + HB - 1) / HB, cz = blockIdx.z % chunks, sp = blockIdx.z / chunks;
	int h0 = g * per + cz * HB, hb = min(HB, per - cz * HB);
	int r0 = qRow0[tile], nr = qCount[tile], k0 = kStart[tile], kf = kFirst[tile];
	int pairs = nr * hb, Dp = (D + 15) & ~15;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
	// This lane's rows of its warp's fragment: pairs pA and pB = pA + 8,
	// iA, iB their (query row, head) indices, nkA, nkB their windows (0:
	// no pair); nkW the warp's widest window.
	int pA = 16 * warp + gid, pB = pA + 8;
	bool liveA = pA < pairs, liveB = pB < pairs;
	long long iA = liveA ? (long long)(r0 + pA / hb) * H + h0 + pA % hb : 0;
	long long iB = liveB ? (long long)(r0 + pB / hb) * H + h0 + pB % hb : 0;
	int nkA = liveA ? kf + pA / hb : 0, nkB = liveB ? kf + pB / hb : 0;
	int wLast = min(pairs, 16 * warp + 16) - 1, nkW = wLast >= 16 * warp ? kf + wLast / hb : 0;
	unsigned qa[XT_DMAX / 16][4];
	xt_qfrag(qa, q + iA * D, liveA, q + iB * D, liveB, D, tig);
	float o[XT_DMAX / 8][4], O[XT_DMAX / 8][4];
#pragma unroll
	for (int i = 0; i < XT_DMAX / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = O[i][0] = O[i][1] = O[i][2] = O[i][3] = 0.f;
	float mA = NEG_INF, mB = NEG_INF, lA = 0.f, lB = 0.f, MA = NEG_INF, MB = NEG_INF, LA = 0.f, LB = 0.f;
	int nkMax = kf + nr - 1; // the tile's last row sees the most keys
	int s0 = part ? sp : 0, s1 = part ? sp + 1 : (nkMax + S - 1) / S;
	for (int split = s0; split < s1; split++) {
		int jA = split * S, jB = min(nkMax, jA + S);
		for (int c0 = jA; c0 < jB; c0 += KT) {
			int cnt = min(KT, jB - c0), rows = (cnt + XT_TK - 1) & ~(XT_TK - 1);
			__syncthreads(); // the previous tile's readers are done
			xt_stage<KV, 32 * NW>(ks, k, (long long)k0 + c0, cnt, rows, G, g, D, Dp, vec != 0);
			xt_stage<KV, 32 * NW>(vs, v, (long long)k0 + c0, cnt, rows, G, g, D, Dp, vec != 0);
			__syncthreads();
#pragma unroll 1
			for (int t0 = 0; t0 < rows; t0 += XT_TK) {
				int j0 = c0 + t0;
				if (j0 >= nkW) break; // the same in every lane: no pair of this warp sees these keys or later ones
				// S = Q·Kᵀ: B (k = d, n = key) is a staged key row.
				float s[2][4];
#pragma unroll
				for (int nt = 0; nt < 2; nt++) {
					s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
					for (int st = 0; st < XT_DMAX / 16; st++) {
						if (16 * st >= Dp) continue;
						const unsigned short* kr = ks + (t0 + 8 * nt + gid) * XT_S + 16 * st + 2 * tig;
						unsigned b[2] = {*(const unsigned*)kr, *(const unsigned*)(kr + 8)};
						mma_bf16_16816(s[nt], qa[st], b);
					}
				}
#pragma unroll
				for (int nt = 0; nt < 2; nt++) {
#pragma unroll
					for (int c = 0; c < 2; c++) {
						int j = j0 + 8 * nt + 2 * tig + c;
						s[nt][c] = j < nkA ? __fmul_rn(s[nt][c], scale) : NEG_INF;
						s[nt][2 + c] = j < nkB ? __fmul_rn(s[nt][2 + c], scale) : NEG_INF;
					}
				}
				float cA = xt_row_softmax(s[0][0], s[0][1], s[1][0], s[1][1], mA, lA, j0 < nkA);
				float cB = xt_row_softmax(s[0][2], s[0][3], s[1][2], s[1][3], mB, lB, j0 < nkB);
				// O = O·c + P·V: P's C fragments are the A fragment of
				// keys 0–15; B (k = key, n = d) is a staged value column.
				unsigned pa[4] = {bf16x2(s[0][0], s[0][1]), bf16x2(s[0][2], s[0][3]), bf16x2(s[1][0], s[1][1]),
				                  bf16x2(s[1][2], s[1][3])};
#pragma unroll
				for (int nd = 0; nd < XT_DMAX / 8; nd++) {
					if (8 * nd >= Dp) continue;
					o[nd][0] = __fmul_rn(o[nd][0], cA), o[nd][1] = __fmul_rn(o[nd][1], cA);
					o[nd][2] = __fmul_rn(o[nd][2], cB), o[nd][3] = __fmul_rn(o[nd][3], cB);
					const unsigned short* vc = vs + (t0 + 2 * tig) * XT_S + 8 * nd + gid;
					unsigned b[2] = {(unsigned)vc[0] | ((unsigned)vc[XT_S] << 16),
					                 (unsigned)vc[8 * XT_S] | ((unsigned)vc[9 * XT_S] << 16)};
					mma_bf16_16816(o[nd], pa, b);
				}
			}
		}
		bool inA = liveA && jA < nkA, inB = liveB && jA < nkB; // the rows whose window reaches this split
		if (part) { // this split's sums, for attn_exact_combine
#pragma unroll
			for (int nd = 0; nd < XT_DMAX / 8; nd++) {
				int d = 8 * nd + 2 * tig;
				if (d >= D) continue;
				if (inA) part[(iA * nsplit + split) * (D + 2) + d] = o[nd][0], part[(iA * nsplit + split) * (D + 2) + d + 1] = o[nd][1];
				if (inB) part[(iB * nsplit + split) * (D + 2) + d] = o[nd][2], part[(iB * nsplit + split) * (D + 2) + d + 1] = o[nd][3];
			}
			if (tig == 0 && inA) part[(iA * nsplit + split) * (D + 2) + D] = mA, part[(iA * nsplit + split) * (D + 2) + D + 1] = lA;
			if (tig == 0 && inB) part[(iB * nsplit + split) * (D + 2) + D] = mB, part[(iB * nsplit + split) * (D + 2) + D + 1] = lB;
			return; // one split a block
		}
		float MnA, aA, cA, MnB, aB, cB;
		ex_fold_coef(MA, mA, MnA, aA, cA);
		ex_fold_coef(MB, mB, MnB, aB, cB);
		if (inA) LA = ex_fold(LA, aA, lA, cA), MA = MnA;
		if (inB) LB = ex_fold(LB, aB, lB, cB), MB = MnB;
#pragma unroll
		for (int nd = 0; nd < XT_DMAX / 8; nd++) {
			if (inA) O[nd][0] = ex_fold(O[nd][0], aA, o[nd][0], cA), O[nd][1] = ex_fold(O[nd][1], aA, o[nd][1], cA);
			if (inB) O[nd][2] = ex_fold(O[nd][2], aB, o[nd][2], cB), O[nd][3] = ex_fold(O[nd][3], aB, o[nd][3], cB);
			o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
		}
		mA = mB = NEG_INF, lA = lB = 0.f;
	}
#pragma unroll
	for (int nd = 0; nd < XT_DMAX / 8; nd++) {
		int d = 8 * nd + 2 * tig;
		if (d >= D) continue;
		if (liveA) store_as(out, iA * D + d, __fdiv_rn(O[nd][0], LA)), store_as(out, iA * D + d + 1, __fdiv_rn(O[nd][1], LA));
		if (liveB) store_as(out, iB * D + d, __fdiv_rn(O[nd][2], LB)), store_as(out, iB * D + d + 1, __fdiv_rn(O[nd][3], LB));
	}
	if (lse && tig == 0) {
		if (liveA) lse[iA] = __fadd_rn(MA, logf(LA));
		if (liveB) lse[iB] = __fadd_rn(MB, logf(LB));
	}
}

// The kernels: attn_exact_tc reads fp32 queries and writes fp32 outputs,
// _h bf16 activations (the output rounded once, at the end); the keys and
// values are fp32, _kvh bf16 (a cache or activations), _kv8 an fp8 cache.
// attn_exact_tc: 4 warps (128 threads), tiles of 64 keys; attn_exact_tc_s:
// one warp (32 threads), tiles of 32 keys, for decode steps. A pair's
// arithmetic is the same in both.
extern "C" __global__ void attn_exact_tc(float* out, float* lse, const float* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, float, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_kvh(float* out, float* lse, const float* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, unsigned short, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_kv8(float* out, float* lse, const float* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, unsigned char, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_h(unsigned short* out, float* lse, const unsigned short* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, float, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_h_kvh(unsigned short* out, float* lse, const unsigned short* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, unsigned short, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_h_kv8(unsigned short* out, float* lse, const unsigned short* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, unsigned char, 4, 64>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s(float* out, float* lse, const float* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, float, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s_kvh(float* out, float* lse, const float* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, unsigned short, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s_kv8(float* out, float* lse, const float* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<float, unsigned char, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s_h(unsigned short* out, float* lse, const unsigned short* q, const float* k, const float* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, float, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s_h_kvh(unsigned short* out, float* lse, const unsigned short* q, const unsigned short* k, const unsigned short* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, unsigned short, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}

extern "C" __global__ void attn_exact_tc_s_h_kv8(unsigned short* out, float* lse, const unsigned short* q, const unsigned char* k, const unsigned char* v, const int* qRow0,
                               const int* qCount, const int* kStart, const int* kFirst, int H, int G, int D, float scale,
                               int HB, int vec, int S, float* part, int nsplit) {
	attn_exact_tc_impl<unsigned short, unsigned char, 1, 32>(out, lse, q, k, v, qRow0, qCount, kStart, kFirst, H, G, D, scale, HB, vec, S, part, nsplit);
}
