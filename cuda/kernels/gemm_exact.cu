// Batch-invariant matrix products for exact mode (precision.exact_logprobs,
// docs/algorithm.md §5.10, cuda/backend_exact.go): c = op(a)·op(b), or
// c += it, where every element of c is computed by one thread from its two
// K-vectors alone, in one fixed order, whatever M, N, the row's position or
// the rows that share the product. cuBLAS picks its algorithm (tiles,
// split-K, reduction order) by shape, so a row's bits there depend on how
// many rows share the product; here nothing an element's bits depend on is
// chosen by shape:
//
//   - the K loop always walks chunks of GX_BK in order from k = 0, each in
//     steps of 16 (mma) or 1 (FFMA) in order; no split-K, so an element is
//     one running sum in registers from +0. The M × N tiles only group
//     independent sums (the mma kernels come in two block heights, picked
//     by the grid's size, with the same bits);
//   - the tail of K (and of M and N) is loaded as zeros. A zero product
//     added to a running sum that started at +0 leaves it unchanged (x + ±0
//     = x for x ≠ 0, and +0 + ±0 = +0, so the sum is never −0): the padding
//     changes no bit, and it is the same for every M and N anyway;
//   - accumulate adds the finished dot to c with one rounding, c + dot
//     (__fadd_rn), after the K loop; the dot itself never sees c;
//   - explicit intrinsics (__fmaf_rn, __fadd_rn) so the compiler has no
//     contraction to choose.
//
// Operands are addressed by strides, so one kernel serves every transpose:
// element (i, k) of op(a) is a[i·sai + k·sak] and element (j, k) of op(b)
// is b[j·sbj + k·sbk]. Each operand is fp32 or bf16 storage (the _<a><b><c>
// suffix: f fp32, h bf16; the last letter is c's); fp32 operands are
// rounded at the load (bf16 for the mma kernels, per rnd for FFMA), so an
// operand and its bf16 copy give the same bits.

#define GX_THREADS 256

// gx_round rounds v as the product's precision wants: 0 none, 1 bf16, 2
// tf32, nearest even (NaN and Inf unchanged but NaN quieted by the bf16 path).
__device__ __forceinline__ float gx_round(float v, int rnd) {
	if (rnd == 1) return __uint_as_float(((unsigned)f32_to_bf16_bits(v)) << 16);
	if (rnd == 2) {
		unsigned u = __float_as_uint(v);
		if ((u & 0x7f800000u) == 0x7f800000u) return v;
		u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
		return __uint_as_float(u);
	}
	return v;
}

// ---- tensor cores: mma.m16n8k16, bf16 in, fp32 accumulate (sm_80+) ----
//
// A block computes a BM × GX_BN tile of c with 8 warps, 2 along M by 4
// along N: BM = 128 (gemm_exact_mma_*), each warp 64 × 32, 4 × 4 mma C
// fragments, so a k-step's 24 fragment loads feed 16 mma; or BM = 64
// (gemm_exact_mma64_*, twice the blocks for products too small to give
// every SM a 128-row block), each warp 32 × 32, 16 loads for 8 mma. K
// goes in chunks of GX_BK = 32 (two k-steps of 16) through GX_STAGES = 3
// shared buffers: while the tensor cores work on chunk ch, chunks ch+1 and
// ch+2 are on their way. A bf16 operand whose K is contiguous (GX_KV
// below) is copied global → shared by cp.async, 16 bytes a copy, without
// passing through registers; any other operand (fp32, rounded to bf16 as
// it is read, or strided) is read into registers at the start of a chunk
// and stored into its buffer after the chunk's mma.
//
// Shared chunks keep K contiguous in 64-byte rows without padding, the four
// 16-byte groups of a row XOR-swizzled by bits 1–2 of the row (gx_off), so
// that a warp's 16-byte stores (8 lanes: 2 rows × 4 groups) and its
// fragment loads (8 rows × 4 lanes within one group) each hit 32 distinct
// banks. 3 stages × (BM + 128) rows × 64 bytes = 48 KiB (the static limit)
// or 36 KiB.
//
// None of this changes a bit: in either kernel every element of c is the
// same sequence of mma k-steps of 16 in order from k = 0 (2·⌈K/32⌉ of them,
// zeros past K) from +0, with the same fragments, then the same epilogue
// (gemm_exact_mma_ref, which the tests hold both kernels to bit for bit).
//
// uses wgmma.cuh (cp_async16, cp_async_commit, cp_async_wait: sm_80's
// cp.async, modelled by the emulator)

#define GX_BN 128
#define GX_BK 32
#define GX_STAGES 3
#define GX_EL(ROWS) ((ROWS) * GX_BK / GX_THREADS)         // elements of a ROWS-row chunk per thread: 16 or 8
#define GX_GROUPS(ROWS) ((ROWS) * GX_BK / 8 / GX_THREADS) // groups of 8 k per thread (GX_KV): 2 or 1

// How an operand's chunk is read (gx_mode): GX_ROWS, threads along r (k
// strided); GX_KS, threads along k one element each; GX_KV, 8 consecutive
// k with 16-byte loads or copies, where k is contiguous, K a multiple of 8
// and the operand 16-byte aligned. The three read the same values, so the
// choice (by layout and alignment) changes no bit of the product.
#define GX_ROWS 0
#define GX_KS 1
#define GX_KV 2

template <typename T>
__device__ __forceinline__ int gx_mode(const T* p, int K, long long sk) {
	if (sk != 1) return GX_ROWS;
	return K % 8 == 0 && ((unsigned long long)p & 15) == 0 ? GX_KV : GX_KS;
}

// gx_async reports whether an operand's chunks go by cp.async: bf16
// storage read in groups of 8 (fp32 must be rounded on the way, which a
// copy cannot do).
__device__ __forceinline__ bool gx_async(const float*, int) { return false; }
__device__ __forceinline__ bool gx_async(const unsigned short*, int m) { return m == GX_KV; }

// gx_off is the element offset of row r, k in a shared chunk: 64-byte
// rows, group k/8 stored at group (k/8) ^ (r/2 mod 4).
__device__ __forceinline__ int gx_off(int r, int k) { return r * GX_BK + ((((k >> 3) ^ (r >> 1)) & 3) << 3) + (k & 7); }

// gx_slot is the row and k of this thread's group e of 8 (GX_KV): 4 groups
// a row, consecutive threads along k then r.
__device__ __forceinline__ void gx_slot(int e, int& r, int& k) {
	const int slot = threadIdx.x + e * GX_THREADS;
	r = slot >> 2, k = (slot & 3) * 8;
}

// gx_rk is the row and k (within a ROWS-row chunk) of this thread's
// element e in mode GX_KS or GX_ROWS: threads walk whichever of r and k is
// contiguous in memory, so a warp reads consecutive addresses either way.
template <int ROWS>
__device__ __forceinline__ void gx_rk(int e, int m, int& r, int& k) {
	const int idx = threadIdx.x + e * GX_THREADS;
	if (m == GX_KS) r = idx / GX_BK, k = idx % GX_BK;
	else r = idx % ROWS, k = idx / ROWS;
}

// gx_vec8 reads 8 consecutive elements at p[i] (16-byte aligned) as 4
// pairs of bf16 bits (the lower k in the lower half), or zeros when !ok.
__device__ __forceinline__ void gx_vec8(unsigned* v, const float* p, bool ok, long long i) {
	float4 x = make_float4(0.f, 0.f, 0.f, 0.f), y = x;
	if (ok) x = *(const float4*)(p + i), y = *(const float4*)(p + i + 4);
	v[0] = (unsigned)f32_to_bf16_bits(x.x) | (unsigned)f32_to_bf16_bits(x.y) << 16;
	v[1] = (unsigned)f32_to_bf16_bits(x.z) | (unsigned)f32_to_bf16_bits(x.w) << 16;
	v[2] = (unsigned)f32_to_bf16_bits(y.x) | (unsigned)f32_to_bf16_bits(y.y) << 16;
	v[3] = (unsigned)f32_to_bf16_bits(y.z) | (unsigned)f32_to_bf16_bits(y.w) << 16;
}
__device__ __forceinline__ void gx_vec8(unsigned* v, const unsigned short* p, bool ok, long long i) {
	uint4 q = make_uint4(0u, 0u, 0u, 0u);
	if (ok) q = *(const uint4*)(p + i);
	v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}

// gx_bits is element i as bf16 bits: rounded from fp32, or as stored.
__device__ __forceinline__ unsigned gx_bits(const float* p, long long i) { return f32_to_bf16_bits(p[i]); }
__device__ __forceinline__ unsigned gx_bits(const unsigned short* p, long long i) { return p[i]; }

// A shared chunk's layout L: L::slot(e, r, k) is the row and k of this
// thread's group e of 8 (GX_KV), L::off(r, k) the element offset of row
// r, k. GxChunk is the mma kernels' (gx_off, gx_slot), WxChunk the
// warpgroup-MMA kernels' core matrices (wx_off, wx_slot, below); the
// functions that fill a chunk take it as a parameter.
struct GxChunk {
	static __device__ __forceinline__ int off(int r, int k) { return gx_off(r, k); }
	static __device__ __forceinline__ void slot(int e, int& r, int& k) { gx_slot(e, r, k); }
};

// gx_fetch reads this thread's GX_EL(ROWS) elements of a ROWS × GX_BK
// chunk of an operand (rows r0 …, k k0 …) into registers as bf16 pairs
// (element e in v[e/2], odd e in the upper half), zero outside R × K; in
// mode GX_KV by L's groups.
template <int ROWS, class L, typename T>
__device__ __forceinline__ void gx_fetch(unsigned* v, const T* p, int r0, int k0, int R, int K, long long sr,
                                         long long sk, int m) {
	if (m == GX_KV) { // K % 8 == 0: a group of 8 is all in or all out
#pragma unroll
		for (int e = 0; e < GX_GROUPS(ROWS); e++) {
			int r, k;
			L::slot(e, r, k);
			r += r0, k += k0;
			gx_vec8(v + 4 * e, p, r < R && k < K, (long long)r * sr + k);
		}
		return;
	}
#pragma unroll
	for (int e = 0; e < GX_EL(ROWS); e++) {
		int r, k;
		gx_rk<ROWS>(e, m, r, k);
		r += r0, k += k0;
		const unsigned h = r < R && k < K ? gx_bits(p, (long long)r * sr + (long long)k * sk) : 0u;
		v[e >> 1] = e & 1 ? v[e >> 1] | h << 16 : h;
	}
}

// gx_put stores what gx_fetch read into a shared chunk of layout L.
template <int ROWS, class L>
__device__ __forceinline__ void gx_put(unsigned short* sh, const unsigned* v, int m) {
	if (m == GX_KV) {
#pragma unroll
		for (int e = 0; e < GX_GROUPS(ROWS); e++) {
			int r, k;
			L::slot(e, r, k);
			*(uint4*)(sh + L::off(r, k)) = make_uint4(v[4 * e], v[4 * e + 1], v[4 * e + 2], v[4 * e + 3]);
		}
		return;
	}
#pragma unroll
	for (int e = 0; e < GX_EL(ROWS); e++) {
		int r, k;
		gx_rk<ROWS>(e, m, r, k);
		sh[L::off(r, k)] = (unsigned short)(e & 1 ? v[e >> 1] >> 16 : v[e >> 1] & 0xffffu);
	}
}

// gx_copy issues this thread's cp.async copies of a bf16 GX_KV chunk into
// sh (layout L); a group outside R × K is zero-filled (0 source bytes,
// from p). fp32 operands never go by cp.async (gx_async): a no-op.
template <int ROWS, class L>
__device__ __forceinline__ void gx_copy(unsigned short* sh, const unsigned short* p, int r0, int k0, int R, int K,
                                        long long sr) {
#pragma unroll
	for (int e = 0; e < GX_GROUPS(ROWS); e++) {
		int r, k;
		L::slot(e, r, k);
		const bool ok = r0 + r < R && k0 + k < K;
		cp_async16(sh + L::off(r, k), ok ? p + (long long)(r0 + r) * sr + k0 + k : p, ok ? 16 : 0);
	}
}
template <int ROWS, class L>
__device__ __forceinline__ void gx_copy(unsigned short*, const float*, int, int, int, int, long long) {}

// gx_begin starts reading chunk (r0, k0) of an operand: copies into sh
// where async, else loads into v for gx_put after the chunk's products.
template <int ROWS, class L, typename T>
__device__ __forceinline__ void gx_begin(unsigned short* sh, unsigned* v, const T* p, int r0, int k0, int R, int K,
                                         long long sr, long long sk, int m, bool async) {
	if (async) gx_copy<ROWS, L>(sh, p, r0, k0, R, K, sr);
	else gx_fetch<ROWS, L>(v, p, r0, k0, R, K, sr, sk, m);
}

// gx_pair is two bf16 of a shared row (k even) as one register.
__device__ __forceinline__ unsigned gx_pair(const unsigned short* sh, int row, int k) {
	return *(const unsigned*)(sh + gx_off(row, k));
}

template <int BM, typename TA, typename TB, typename TC>
__device__ __forceinline__ void gemm_exact_mma(TC* c, const TA* a, const TB* b, int M, int N, int K, long long sai,
                                               long long sak, long long sbj, long long sbk, int accumulate) {
	constexpr int WX = BM / 32; // the warp's 16-row fragments (BM/2 rows)
	__shared__ __align__(16) unsigned short As[GX_STAGES][BM * GX_BK];
	__shared__ __align__(16) unsigned short Bs[GX_STAGES][GX_BN * GX_BK];
	const int i0 = blockIdx.y * BM, j0 = blockIdx.x * GX_BN;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int wm = (warp >> 2) * (BM / 2), wn = (warp & 3) * 32; // the warp's tile in the block's
	float acc[WX][4][4];
#pragma unroll
	for (int x = 0; x < WX; x++)
#pragma unroll
		for (int y = 0; y < 4; y++)
#pragma unroll
			for (int z = 0; z < 4; z++) acc[x][y][z] = 0.f;
	unsigned va[GX_EL(BM) / 2], vb[GX_EL(GX_BN) / 2];
	const int chunks = (K + GX_BK - 1) / GX_BK;
	const int ma = gx_mode(a, K, sak), mb = gx_mode(b, K, sbk);
	const bool ca = gx_async(a, ma), cb = gx_async(b, mb);
	// The first GX_STAGES − 1 chunks, one cp.async group each (empty where
	// there are fewer chunks or no copies).
#pragma unroll
	for (int s = 0; s < GX_STAGES - 1; s++) {
		if (s < chunks) {
			gx_begin<BM, GxChunk>(As[s], va, a, i0, s * GX_BK, M, K, sai, sak, ma, ca);
			gx_begin<GX_BN, GxChunk>(Bs[s], vb, b, j0, s * GX_BK, N, K, sbj, sbk, mb, cb);
			if (!ca) gx_put<BM, GxChunk>(As[s], va, ma);
			if (!cb) gx_put<GX_BN, GxChunk>(Bs[s], vb, mb);
		}
		cp_async_commit();
	}
	int cur = 0, nxt = GX_STAGES - 1; // the stages of chunks ch and ch + GX_STAGES − 1
	for (int ch = 0; ch < chunks; ch++) {
		// This thread's copies of chunk ch have landed; after the barrier
		// everyone's have, and every warp is done with chunk ch − 1, whose
		// stage (nxt) is refilled next.
		cp_async_wait<GX_STAGES - 2>();
		__syncthreads();
		const int k1 = (ch + GX_STAGES - 1) * GX_BK;
		const bool more = k1 < K;
		if (more) {
			gx_begin<BM, GxChunk>(As[nxt], va, a, i0, k1, M, K, sai, sak, ma, ca);
			gx_begin<GX_BN, GxChunk>(Bs[nxt], vb, b, j0, k1, N, K, sbj, sbk, mb, cb);
		}
		cp_async_commit();
		const unsigned short* sa = As[cur];
		const unsigned short* sb = Bs[cur];
#pragma unroll
		for (int ks = 0; ks < GX_BK; ks += 16) {
			unsigned fa[WX][4], fb[4][2];
#pragma unroll
			for (int x = 0; x < WX; x++) {
				int r = wm + 16 * x + g;
				fa[x][0] = gx_pair(sa, r, ks + 2 * t);
				fa[x][1] = gx_pair(sa, r + 8, ks + 2 * t);
				fa[x][2] = gx_pair(sa, r, ks + 2 * t + 8);
				fa[x][3] = gx_pair(sa, r + 8, ks + 2 * t + 8);
			}
#pragma unroll
			for (int y = 0; y < 4; y++) {
				int col = wn + 8 * y + g;
				fb[y][0] = gx_pair(sb, col, ks + 2 * t);
				fb[y][1] = gx_pair(sb, col, ks + 2 * t + 8);
			}
#pragma unroll
			for (int x = 0; x < WX; x++)
#pragma unroll
				for (int y = 0; y < 4; y++) mma_bf16_16816(acc[x][y], fa[x], fb[y]);
		}
		if (more) { // stage nxt is read from chunk ch + 1's barrier on
			if (!ca) gx_put<BM, GxChunk>(As[nxt], va, ma);
			if (!cb) gx_put<GX_BN, GxChunk>(Bs[nxt], vb, mb);
		}
		cur = cur == GX_STAGES - 1 ? 0 : cur + 1;
		nxt = nxt == GX_STAGES - 1 ? 0 : nxt + 1;
	}
	cp_async_wait<0>(); // only empty groups are left; none outlives the block
#pragma unroll
	for (int x = 0; x < WX; x++)
#pragma unroll
		for (int y = 0; y < 4; y++)
#pragma unroll
			for (int z = 0; z < 4; z++) {
				int i = i0 + wm + 16 * x + g + 8 * (z >> 1), j = j0 + wn + 8 * y + 2 * t + (z & 1);
				if (i < M && j < N) {
					long long ci = (long long)i * N + j;
					float v = acc[x][y][z];
					if (accumulate) v = __fadd_rn(ld(c, ci), v);
					store_as(c, ci, v);
				}
			}
}

// ---- warpgroup MMA: wgmma.mma_async m64nNk16, bf16 in, fp32 accumulate (sm_90a) ----
//
// gemm_exact_wg_* (and gemm_exact_wg64_*) compute what gemm_exact_mma_*
// does with Hopper's warpgroup MMA (wgmma.cuh), on a device with the sm_90a
// kernels only, where they take every exact bf16 product of the run
// (backend_gemm_exact.go): nothing promises that HGMMA adds a k-step's 16
// products as HMMA does, so the two must never share a run. Each element of
// c is the same running sum as in the mma kernels: 2·⌈K/32⌉ k-steps of 16
// in order from k = 0 (zeros past K) into fp32 accumulators zeroed by
// ordinary code (every wgmma adds, scale-d 1, as mma.sync adds into +0),
// the operands rounded to bf16 exactly as there (gx_vec8, gx_bits), then
// the same epilogue; on the emulator, whose wgmma adds each k-step as its
// mma.sync does, the tests hold both to gemm_exact_mma_ref bit for bit.
//
// A block is 2 warpgroups (GX_THREADS) over a BM × GX_BN tile: BM = 128
// (gemm_exact_wg_), each warpgroup 64 rows × 128 columns, one m64n128k16
// per k-step; or BM = 64 (gemm_exact_wg64_, for grids too small to give
// every SM a 128-row block: decode's products, M padded to 64 rows whose
// rows past M are zeros and never stored), each warpgroup 64 × 64, one
// m64n64k16. Both operands are read by the tensor cores from shared memory
// through descriptors (no-swizzle, K-major): a chunk of ROWS × GX_BK is
// stored as core matrices of 8 rows × 8 k (128 contiguous bytes), core
// matrix (r/8, k/8) at byte (r/8)·512 + (k/8)·128, so LBO (along K) is
// 128 and SBO (along M or N) 512. K goes through GX_STAGES buffers of
// GX_BK as in the mma kernels (48 KiB), bf16 operands with K contiguous by
// cp.async, the others through registers (fp32 rounded as read); a
// warp's 16-byte copies or stores cover 8 rows × 4 groups, each 8 lanes
// one core matrix (128 bytes, no bank conflict). Per chunk a warpgroup
// issues its 2 wgmma (k-steps 0 and 16) as one commit group, chained onto
// the previous chunk's accumulators while that group may still run, and
// waits for all but the newest (wgmma.wait_group 1): a second barrier then
// frees the previous chunk's buffer for the copies and stores of chunk
// ch + 2, which go on under chunk ch's wgmma, so the tensor cores do not
// drain between chunks. Register-staged operands are loaded from global
// memory before the wgmma issue and stored after that barrier.

#define WX_SBO 512 // bytes between 8-row blocks of a chunk (GX_BK / 8 core matrices of 128 bytes)
#define WX_LBO 128 // bytes between the 8-k core matrices of a row block

// wx_off is the element offset of row r, k in a chunk (k in a group of 8
// starting at a multiple of 8 for 16-byte accesses).
__device__ __forceinline__ int wx_off(int r, int k) { return (r >> 3) * (WX_SBO / 2) + (k >> 3) * (WX_LBO / 2) + (r & 7) * 8 + (k & 7); }

// wx_slot is the row and k of this thread's group e of 8 (GX_KV): a warp
// covers 8 rows × 4 groups, lanes along the rows first.
__device__ __forceinline__ void wx_slot(int e, int& r, int& k) {
	const int slot = threadIdx.x + e * GX_THREADS;
	r = (slot & 7) + 8 * (slot >> 5), k = ((slot >> 3) & 3) * 8;
}

struct WxChunk {
	static __device__ __forceinline__ int off(int r, int k) { return wx_off(r, k); }
	static __device__ __forceinline__ void slot(int e, int& r, int& k) { wx_slot(e, r, k); }
};

template <int BM, typename TA, typename TB, typename TC>
__device__ __forceinline__ void gemm_exact_wg(TC* c, const TA* a, const TB* b, int M, int N, int K, long long sai,
                                              long long sak, long long sbj, long long sbk, int accumulate) {
	constexpr int WN = BM == 128 ? GX_BN : GX_BN / 2; // a warpgroup's columns: its wgmma's n
	__shared__ __align__(128) unsigned short As[GX_STAGES][BM * GX_BK];
	__shared__ __align__(128) unsigned short Bs[GX_STAGES][GX_BN * GX_BK];
	const int i0 = blockIdx.y * BM, j0 = blockIdx.x * GX_BN;
	const int wg = threadIdx.x / WG_THREADS, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
	const int g = lane >> 2, t = lane & 3;
	const int wm = BM == 128 ? 64 * wg : 0, wn = BM == 128 ? 0 : 64 * wg; // the warpgroup's tile in the block's
	float acc[WN / 2];
#pragma unroll
	for (int z = 0; z < WN / 2; z++) acc[z] = 0.f;
	unsigned va[GX_EL(BM) / 2], vb[GX_EL(GX_BN) / 2];
	const int chunks = (K + GX_BK - 1) / GX_BK;
	const int ma = gx_mode(a, K, sak), mb = gx_mode(b, K, sbk);
	const bool ca = gx_async(a, ma), cb = gx_async(b, mb);
#pragma unroll
	for (int s = 0; s < GX_STAGES - 1; s++) {
		if (s < chunks) {
			gx_begin<BM, WxChunk>(As[s], va, a, i0, s * GX_BK, M, K, sai, sak, ma, ca);
			gx_begin<GX_BN, WxChunk>(Bs[s], vb, b, j0, s * GX_BK, N, K, sbj, sbk, mb, cb);
			if (!ca) gx_put<BM, WxChunk>(As[s], va, ma);
			if (!cb) gx_put<GX_BN, WxChunk>(Bs[s], vb, mb);
		}
		cp_async_commit();
	}
	int cur = 0, nxt = GX_STAGES - 1;
	for (int ch = 0; ch < chunks; ch++) {
		// This thread's copies of chunk ch have landed and, with its
		// stores, are published to the tensor cores' (async) proxy; after
		// the barrier everyone's are.
		cp_async_wait<GX_STAGES - 2>();
		wg_proxy_fence();
		__syncthreads();
		const int k1 = (ch + GX_STAGES - 1) * GX_BK;
		const bool more = k1 < K;
		if (more) { // registers only: the loads' latency runs under the wgmma
			if (!ca) gx_fetch<BM, WxChunk>(va, a, i0, k1, M, K, sai, sak, ma);
			if (!cb) gx_fetch<GX_BN, WxChunk>(vb, b, j0, k1, N, K, sbj, sbk, mb);
		}
		const unsigned short* sa = As[cur] + wx_off(wm, 0);
		const unsigned short* sb = Bs[cur] + wx_off(wn, 0);
		// Chunk ch's 2 wgmma chain onto chunk ch − 1's, which may still be
		// in flight (same accumulators, same shape: the k-steps stay in
		// order); waiting for all but the newest group retires ch − 1's.
		wg_fence();
#pragma unroll
		for (int ks = 0; ks < GX_BK; ks += 16)
			wg_mma_ss<WN, 0, 0>(acc, wg_desc(sa + wx_off(0, ks), WX_LBO, WX_SBO), wg_desc(sb + wx_off(0, ks), WX_LBO, WX_SBO), 1);
		wg_commit();
		wg_wait<1>();
		// Every warpgroup has retired chunk ch − 1's wgmma: its stage (nxt)
		// is refilled, for chunk ch + GX_STAGES − 1, while chunk ch's run.
		__syncthreads();
		if (more) {
			if (ca) gx_copy<BM, WxChunk>(As[nxt], a, i0, k1, M, K, sai);
			else gx_put<BM, WxChunk>(As[nxt], va, ma);
			if (cb) gx_copy<GX_BN, WxChunk>(Bs[nxt], b, j0, k1, N, K, sbj);
			else gx_put<GX_BN, WxChunk>(Bs[nxt], vb, mb);
		}
		cp_async_commit();
		cur = cur == GX_STAGES - 1 ? 0 : cur + 1;
		nxt = nxt == GX_STAGES - 1 ? 0 : nxt + 1;
	}
	wg_wait<0>();
	wg_hold<WN>(acc);
	cp_async_wait<0>(); // only empty groups are left; none outlives the block
	// acc[4y + z]: 8-column block y, rows g (z < 2) and g + 8 of the warp's 16.
#pragma unroll
	for (int y = 0; y < WN / 8; y++)
#pragma unroll
		for (int z = 0; z < 4; z++) {
			int i = i0 + wm + 16 * warp + g + 8 * (z >> 1), j = j0 + wn + 8 * y + 2 * t + (z & 1);
			if (i < M && j < N) {
				long long ci = (long long)i * N + j;
				float v = acc[4 * y + z];
				if (accumulate) v = __fadd_rn(ld(c, ci), v);
				store_as(c, ci, v);
			}
		}
}

// ---- CUDA cores: FFMA in fp32 (fp32 and tf32 products, and bf16 ones
// below sm_80) ----
//
// A block computes a GX_FM × GX_FN tile with 256 threads as 16 × 16, each
// thread 4 × 4 elements (rows ty + 16r, columns tx + 16c); K in chunks of
// GX_FK staged in shared memory as k-major rows, double buffered through
// registers (the next chunk read while this one multiplies). Element
// (i, j) is acc = __fmaf_rn(a[i,k], b[k,j], acc) for k = 0, 1, …, K−1
// from +0.

#define GX_FM 64
#define GX_FN 64
#define GX_FK 16
#define GX_FL (GX_FM * GX_FK / GX_THREADS) // elements of each operand per thread per chunk: 4

// gx_fload reads this thread's elements of a GX_FM (or GX_FN) × GX_FK
// chunk as rounded floats, zero outside R × K.
template <typename T>
__device__ __forceinline__ void gx_fload(float* v, const T* p, int r0, int k0, int R, int K, long long sr, long long sk,
                                         int rnd) {
#pragma unroll
	for (int e = 0; e < GX_FL; e++) {
		int idx = threadIdx.x + e * GX_THREADS, r, k;
		if (sk == 1) r = idx / GX_FK, k = idx % GX_FK;
		else r = idx % GX_FM, k = idx / GX_FM;
		r += r0, k += k0;
		v[e] = r < R && k < K ? gx_round(ld(p, (long long)r * sr + (long long)k * sk), rnd) : 0.f;
	}
}

// gx_fstore writes them into a shared chunk stored k-major (GX_FK rows of
// GX_FM + 1 floats).
__device__ __forceinline__ void gx_fstore(float* sh, const float* v, long long sk) {
#pragma unroll
	for (int e = 0; e < GX_FL; e++) {
		int idx = threadIdx.x + e * GX_THREADS, r, k;
		if (sk == 1) r = idx / GX_FK, k = idx % GX_FK;
		else r = idx % GX_FM, k = idx / GX_FM;
		sh[k * (GX_FM + 1) + r] = v[e];
	}
}

template <typename TA, typename TB, typename TC>
__device__ __forceinline__ void gemm_exact_ffma(TC* c, const TA* a, const TB* b, int M, int N, int K, long long sai,
                                                long long sak, long long sbj, long long sbk, int accumulate, int rnd) {
	__shared__ float As[2][GX_FK * (GX_FM + 1)];
	__shared__ float Bs[2][GX_FK * (GX_FN + 1)];
	const int i0 = blockIdx.y * GX_FM, j0 = blockIdx.x * GX_FN;
	const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
	float acc[4][4];
#pragma unroll
	for (int r = 0; r < 4; r++)
#pragma unroll
		for (int q = 0; q < 4; q++) acc[r][q] = 0.f;
	float va[GX_FL], vb[GX_FL];
	const int chunks = (K + GX_FK - 1) / GX_FK;
	gx_fload(va, a, i0, 0, M, K, sai, sak, rnd);
	gx_fload(vb, b, j0, 0, N, K, sbj, sbk, rnd);
	gx_fstore(As[0], va, sak);
	gx_fstore(Bs[0], vb, sbk);
	__syncthreads();
	for (int ch = 0; ch < chunks; ch++) {
		const int cur = ch & 1;
		if (ch + 1 < chunks) {
			gx_fload(va, a, i0, (ch + 1) * GX_FK, M, K, sai, sak, rnd);
			gx_fload(vb, b, j0, (ch + 1) * GX_FK, N, K, sbj, sbk, rnd);
		}
		const float* sa = As[cur];
		const float* sb = Bs[cur];
#pragma unroll
		for (int k = 0; k < GX_FK; k++) {
			float ar[4], br[4];
#pragma unroll
			for (int r = 0; r < 4; r++) ar[r] = sa[k * (GX_FM + 1) + ty + 16 * r];
#pragma unroll
			for (int q = 0; q < 4; q++) br[q] = sb[k * (GX_FN + 1) + tx + 16 * q];
#pragma unroll
			for (int r = 0; r < 4; r++)
#pragma unroll
				for (int q = 0; q < 4; q++) acc[r][q] = __fmaf_rn(ar[r], br[q], acc[r][q]);
		}
		if (ch + 1 < chunks) {
			gx_fstore(As[cur ^ 1], va, sak);
			gx_fstore(Bs[cur ^ 1], vb, sbk);
		}
		__syncthreads();
	}
#pragma unroll
	for (int r = 0; r < 4; r++)
#pragma unroll
		for (int q = 0; q < 4; q++) {
			int i = i0 + ty + 16 * r, j = j0 + tx + 16 * q;
			if (i < M && j < N) {
				long long ci = (long long)i * N + j;
				float v = acc[r][q];
				if (accumulate) v = __fadd_rn(ld(c, ci), v);
				store_as(c, ci, v);
			}
		}
}

// The kernels, one per storage of a, b and c (f fp32, h bf16), each
// declared on one literal line so the backend and the kernel report find
// its name.
#define GX_ARGS(TA, TB, TC) \
	TC *c, const TA *a, const TB *b, int M, int N, int K, long long sai, long long sak, long long sbj, long long sbk, int accumulate
#define GX_MMA(TA, TB, TC) \
	{ gemm_exact_mma<128, TA, TB, TC>(c, a, b, M, N, K, sai, sak, sbj, sbk, accumulate); }
#define GX_MMA64(TA, TB, TC) \
	{ gemm_exact_mma<64, TA, TB, TC>(c, a, b, M, N, K, sai, sak, sbj, sbk, accumulate); }
#define GX_WG(TA, TB, TC) \
	{ gemm_exact_wg<128, TA, TB, TC>(c, a, b, M, N, K, sai, sak, sbj, sbk, accumulate); }
#define GX_WG64(TA, TB, TC) \
	{ gemm_exact_wg<64, TA, TB, TC>(c, a, b, M, N, K, sai, sak, sbj, sbk, accumulate); }
#define GX_FFMA(TA, TB, TC) \
	{ gemm_exact_ffma<TA, TB, TC>(c, a, b, M, N, K, sai, sak, sbj, sbk, accumulate, rnd); }
typedef unsigned short bf16_t;

extern "C" __global__ void gemm_exact_mma_fff(GX_ARGS(float, float, float)) GX_MMA(float, float, float)
extern "C" __global__ void gemm_exact_mma_hff(GX_ARGS(bf16_t, float, float)) GX_MMA(bf16_t, float, float)
extern "C" __global__ void gemm_exact_mma_fhf(GX_ARGS(float, bf16_t, float)) GX_MMA(float, bf16_t, float)
extern "C" __global__ void gemm_exact_mma_hhf(GX_ARGS(bf16_t, bf16_t, float)) GX_MMA(bf16_t, bf16_t, float)
extern "C" __global__ void gemm_exact_mma_ffh(GX_ARGS(float, float, bf16_t)) GX_MMA(float, float, bf16_t)
extern "C" __global__ void gemm_exact_mma_hfh(GX_ARGS(bf16_t, float, bf16_t)) GX_MMA(bf16_t, float, bf16_t)
extern "C" __global__ void gemm_exact_mma_fhh(GX_ARGS(float, bf16_t, bf16_t)) GX_MMA(float, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_mma_hhh(GX_ARGS(bf16_t, bf16_t, bf16_t)) GX_MMA(bf16_t, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_mma64_fff(GX_ARGS(float, float, float)) GX_MMA64(float, float, float)
extern "C" __global__ void gemm_exact_mma64_hff(GX_ARGS(bf16_t, float, float)) GX_MMA64(bf16_t, float, float)
extern "C" __global__ void gemm_exact_mma64_fhf(GX_ARGS(float, bf16_t, float)) GX_MMA64(float, bf16_t, float)
extern "C" __global__ void gemm_exact_mma64_hhf(GX_ARGS(bf16_t, bf16_t, float)) GX_MMA64(bf16_t, bf16_t, float)
extern "C" __global__ void gemm_exact_mma64_ffh(GX_ARGS(float, float, bf16_t)) GX_MMA64(float, float, bf16_t)
extern "C" __global__ void gemm_exact_mma64_hfh(GX_ARGS(bf16_t, float, bf16_t)) GX_MMA64(bf16_t, float, bf16_t)
extern "C" __global__ void gemm_exact_mma64_fhh(GX_ARGS(float, bf16_t, bf16_t)) GX_MMA64(float, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_mma64_hhh(GX_ARGS(bf16_t, bf16_t, bf16_t)) GX_MMA64(bf16_t, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_wg_fff(GX_ARGS(float, float, float)) GX_WG(float, float, float)
extern "C" __global__ void gemm_exact_wg_hff(GX_ARGS(bf16_t, float, float)) GX_WG(bf16_t, float, float)
extern "C" __global__ void gemm_exact_wg_fhf(GX_ARGS(float, bf16_t, float)) GX_WG(float, bf16_t, float)
extern "C" __global__ void gemm_exact_wg_hhf(GX_ARGS(bf16_t, bf16_t, float)) GX_WG(bf16_t, bf16_t, float)
extern "C" __global__ void gemm_exact_wg_ffh(GX_ARGS(float, float, bf16_t)) GX_WG(float, float, bf16_t)
extern "C" __global__ void gemm_exact_wg_hfh(GX_ARGS(bf16_t, float, bf16_t)) GX_WG(bf16_t, float, bf16_t)
extern "C" __global__ void gemm_exact_wg_fhh(GX_ARGS(float, bf16_t, bf16_t)) GX_WG(float, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_wg_hhh(GX_ARGS(bf16_t, bf16_t, bf16_t)) GX_WG(bf16_t, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_wg64_fff(GX_ARGS(float, float, float)) GX_WG64(float, float, float)
extern "C" __global__ void gemm_exact_wg64_hff(GX_ARGS(bf16_t, float, float)) GX_WG64(bf16_t, float, float)
extern "C" __global__ void gemm_exact_wg64_fhf(GX_ARGS(float, bf16_t, float)) GX_WG64(float, bf16_t, float)
extern "C" __global__ void gemm_exact_wg64_hhf(GX_ARGS(bf16_t, bf16_t, float)) GX_WG64(bf16_t, bf16_t, float)
extern "C" __global__ void gemm_exact_wg64_ffh(GX_ARGS(float, float, bf16_t)) GX_WG64(float, float, bf16_t)
extern "C" __global__ void gemm_exact_wg64_hfh(GX_ARGS(bf16_t, float, bf16_t)) GX_WG64(bf16_t, float, bf16_t)
extern "C" __global__ void gemm_exact_wg64_fhh(GX_ARGS(float, bf16_t, bf16_t)) GX_WG64(float, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_wg64_hhh(GX_ARGS(bf16_t, bf16_t, bf16_t)) GX_WG64(bf16_t, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_ffma_fff(GX_ARGS(float, float, float), int rnd) GX_FFMA(float, float, float)
extern "C" __global__ void gemm_exact_ffma_hff(GX_ARGS(bf16_t, float, float), int rnd) GX_FFMA(bf16_t, float, float)
extern "C" __global__ void gemm_exact_ffma_fhf(GX_ARGS(float, bf16_t, float), int rnd) GX_FFMA(float, bf16_t, float)
extern "C" __global__ void gemm_exact_ffma_hhf(GX_ARGS(bf16_t, bf16_t, float), int rnd) GX_FFMA(bf16_t, bf16_t, float)
extern "C" __global__ void gemm_exact_ffma_ffh(GX_ARGS(float, float, bf16_t), int rnd) GX_FFMA(float, float, bf16_t)
extern "C" __global__ void gemm_exact_ffma_hfh(GX_ARGS(bf16_t, float, bf16_t), int rnd) GX_FFMA(bf16_t, float, bf16_t)
extern "C" __global__ void gemm_exact_ffma_fhh(GX_ARGS(float, bf16_t, bf16_t), int rnd) GX_FFMA(float, bf16_t, bf16_t)
extern "C" __global__ void gemm_exact_ffma_hhh(GX_ARGS(bf16_t, bf16_t, bf16_t), int rnd) GX_FFMA(bf16_t, bf16_t, bf16_t)

// gemm_exact_mma_ref is the specification the tiled mma kernels must meet
// bit for bit, for the tests only (TestExactMMAMatchesReference; the
// backend never launches it): one warp per 16 × 8 tile of c, fragments
// read straight from global memory, fp32 operands rounded to bf16, and
// 2·⌈K/32⌉ k-steps of 16 from k = 0 in order (the tiled kernels' chunks of
// 32, zeros past K), then the same epilogue. Grid ⌈N/8⌉ × ⌈M/16⌉, 32
// threads.
__device__ __forceinline__ unsigned gx_ref_pair(const float* p, int i, int k, int R, int K, long long sr, long long sk) {
	unsigned lo = i < R && k < K ? f32_to_bf16_bits(p[(long long)i * sr + (long long)k * sk]) : 0u;
	unsigned hi = i < R && k + 1 < K ? f32_to_bf16_bits(p[(long long)i * sr + (long long)(k + 1) * sk]) : 0u;
	return lo | hi << 16;
}

extern "C" __global__ void gemm_exact_mma_ref(GX_ARGS(float, float, float)) {
	const int i0 = blockIdx.y * 16, j0 = blockIdx.x * 8, g = threadIdx.x >> 2, t = threadIdx.x & 3;
	float acc[4] = {0.f, 0.f, 0.f, 0.f};
	const int steps = 2 * ((K + 31) / 32);
	for (int s = 0; s < steps; s++) {
		const int k = 16 * s + 2 * t;
		unsigned fa[4], fb[2];
		fa[0] = gx_ref_pair(a, i0 + g, k, M, K, sai, sak);
		fa[1] = gx_ref_pair(a, i0 + g + 8, k, M, K, sai, sak);
		fa[2] = gx_ref_pair(a, i0 + g, k + 8, M, K, sai, sak);
		fa[3] = gx_ref_pair(a, i0 + g + 8, k + 8, M, K, sai, sak);
		fb[0] = gx_ref_pair(b, j0 + g, k, N, K, sbj, sbk);
		fb[1] = gx_ref_pair(b, j0 + g, k + 8, N, K, sbj, sbk);
		mma_bf16_16816(acc, fa, fb);
	}
	for (int z = 0; z < 4; z++) {
		int i = i0 + g + 8 * (z >> 1), j = j0 + 2 * t + (z & 1);
		if (i < M && j < N) {
			long long ci = (long long)i * N + j;
			float v = acc[z];
			if (accumulate) v = __fadd_rn(c[ci], v);
			c[ci] = v;
		}
	}
}
