// uses fp8.cuh
//
// Decode attention, split along the keys (flash-decoding): a query row
// attends to the keys of its cache slot, which at batch 1 is far too little
// work for one block per head. A block takes one query row, one key/value
// head and one contiguous range of its keys, for every query head of the
// group at once, so each key and value row is read once (not once per query
// head) and with 16-byte loads: a key row of D elements is split over
// lanes, 16 bytes each (lanesPerKey: the pieces rounded up to a power of
// two), and a warp takes 32 / lanesPerKey keys at a time.
// Each block leaves, per query head, its running max, its sum of
// exponentials and its unnormalised output; attn_decode_combine merges the
// splits in a fixed order (deterministic, no atomics) into out and lse.
//
// Rows come from the host as in attention.cu: query row qRow[r] sees keys
// kStart[r] … kStart[r]+kCount[r]−1. D: a multiple of 16 (fp8), 8 (bf16)
// or 4 (fp32), at most DEC_DMAX; at most DEC_PER query heads per key/value
// head. The head count a block keeps state for (PER: running maxes, sums,
// accumulators in registers, queries in shared memory) is a template
// parameter: each cache type has a kernel for PER = 1, 2, 4 and 8 (suffix
// _p1 … _p8), and the host launches the smallest PER ≥ H/G, so a model
// with 2 or 4 query heads per key/value head pays the registers of 2 or 4,
// not of DEC_PER. A PER above H/G (H/G = 3: PER 4) leaves heads H/G …
// PER−1 idle; each head's arithmetic is the same in every PER.
// An fp8 cache (fp8.cuh) is read as codes, 16 to a load: a key's scale
// multiplies its dot product and a value's its probability, so the codes
// are never scaled one by one.

#define DEC_THREADS 128
#define DEC_DMAX 256
#define DEC_PER 8

// dec_vec loads the E = 16/sizeof(KV) elements at p (16-byte aligned) as
// floats.
__device__ __forceinline__ void dec_vec(float* x, const float* p) {
	float4 v = *(const float4*)p;
	x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
}
__device__ __forceinline__ void dec_vec(float* x, const unsigned short* p) {
	uint4 v = *(const uint4*)p;
	unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int i = 0; i < 4; i++) {
		x[2 * i] = __uint_as_float(w[i] << 16);
		x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
	}
}

__device__ __forceinline__ void dec_vec(float* x, const unsigned char* p) { kv8_decode16(x, *(const uint4*)p); }

// dec_row is head g's elements in cache row `row`; dec_scale their scale
// (1 but for fp8, whose rows carry one per head).
__device__ __forceinline__ const float* dec_row(const float* p, long long row, int G, int g, int D) {
	return p + (row * G + g) * D;
}
__device__ __forceinline__ const unsigned short* dec_row(const unsigned short* p, long long row, int G, int g, int D) {
	return p + (row * G + g) * D;
}
__device__ __forceinline__ const unsigned char* dec_row(const unsigned char* p, long long row, int G, int g, int D) {
	return kv8_head(p, row, G, g, D);
}
__device__ __forceinline__ float dec_scale(const float*, long long, int, int, int) { return 1.f; }
__device__ __forceinline__ float dec_scale(const unsigned short*, long long, int, int, int) { return 1.f; }
__device__ __forceinline__ float dec_scale(const unsigned char* p, long long row, int G, int g, int D) {
	return kv8_scale(p, row, G, g, D);
}

// attn_decode_split_*: grid (rows, G, splits), DEC_THREADS threads; H/G ≤
// PER ≤ DEC_PER. part holds, per (row, query head, split), D output sums
// then the max and the sum of exponentials: (rows·H·splits) × (D + 2)
// floats.
template <typename KV, int PER>
__device__ __forceinline__ void attn_decode_split_impl(float* part, const float* q, const KV* k, const KV* v,
                                                       const int* qRow, const int* kStart, const int* kCount, int H,
                                                       int G, int D, float scale, int splits) {
	static_assert(PER >= 1 && PER <= DEC_PER, "PER: 1 to DEC_PER query heads per key/value head");
	constexpr int E = 16 / sizeof(KV); // elements per 16-byte load
	constexpr int VMAX = DEC_DMAX / E / 32 > 0 ? DEC_DMAX / E / 32 : 1;
	__shared__ float qs[PER * DEC_DMAX];
	__shared__ float wm[DEC_THREADS / 32][PER], wl[DEC_THREADS / 32][PER];
	int r = blockIdx.x, g = blockIdx.y, s = blockIdx.z, per = H / G;
	int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	long long qr = qRow[r];
	int nk = kCount[r], k0 = kStart[r];
	int chunk = (nk + splits - 1) / splits, j0 = s * chunk, j1 = min(nk, j0 + chunk);
	for (int i = threadIdx.x; i < per * D; i += DEC_THREADS) qs[i] = q[(qr * H + g * per) * D + i];
	__syncthreads();
	int vecs = D / E; // 16-byte pieces per row
	// Lanes per key: the pieces rounded up to a power of two (at most 32),
	// so that a key's lanes are an aligned group the xor shuffles below
	// reduce within, and a warp holds a whole number of keys. Lanes past
	// the pieces load nothing and add zeros. Where D/E is a power of two
	// (D = 128) this is D/E itself: no lane idles.
	int lpk = vecs >= 32 ? 32 : 1 << (32 - __clz(vecs - 1));
	int vpl = (vecs + lpk - 1) / lpk; // pieces per lane
	int kpw = 32 / lpk, sub = lane / lpk, li = lane % lpk; // keys per warp pass, this lane's key and piece
	float m[PER], l[PER], acc[PER][VMAX * E];
#pragma unroll
	for (int h = 0; h < PER; h++) {
		m[h] = NEG_INF, l[h] = 0.f;
#pragma unroll
		for (int e = 0; e < VMAX * E; e++) acc[h][e] = 0.f;
	}
	for (int jb = j0 + warp * kpw; jb < j1; jb += 4 * kpw) {
		int j = jb + sub;
		bool live = j < j1;
		long long row = k0 + (live ? j : j0);
		float sk = dec_scale(k, row, G, g, D), sv = live ? dec_scale(v, row, G, g, D) : 0.f;
		float kx[VMAX * E], vx[VMAX * E];
#pragma unroll
		for (int c = 0; c < VMAX; c++) {
			int piece = li + c * lpk;
			bool on = live && c < vpl && piece < vecs;
			const KV* kr = dec_row(k, row, G, g, D) + piece * E;
			const KV* vr = dec_row(v, row, G, g, D) + piece * E;
			if (on) {
				dec_vec(kx + c * E, kr);
				dec_vec(vx + c * E, vr);
			} else {
#pragma unroll
				for (int e = 0; e < E; e++) kx[c * E + e] = vx[c * E + e] = 0.f;
			}
		}
#pragma unroll
		for (int h = 0; h < PER; h++) {
			if (h >= per) continue; // constant trip counts keep m, l, acc in registers
			float dot = 0.f;
#pragma unroll
			for (int c = 0; c < VMAX; c++) {
				int piece = li + c * lpk;
				if (c < vpl && piece < vecs) {
#pragma unroll
					for (int e = 0; e < E; e++) dot += qs[h * D + piece * E + e] * kx[c * E + e];
				}
			}
			for (int o = lpk / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, o);
			float sc = live ? dot * sk * scale : NEG_INF;
			float mn = fmaxf(m[h], sc);
			float base = mn == NEG_INF ? 0.f : mn;
			float corr = __expf(m[h] - base), p = __expf(sc - base), pv = p * sv;
			l[h] = l[h] * corr + p;
#pragma unroll
			for (int e = 0; e < VMAX * E; e++) acc[h][e] = acc[h][e] * corr + pv * vx[e];
			m[h] = mn;
		}
	}
	// Merge the key groups of a warp (lanes li, li+lpk, …), then the warps.
#pragma unroll
	for (int h = 0; h < PER; h++) {
		if (h >= per) continue;
		for (int o = 16; o >= lpk; o >>= 1) {
			float mo = __shfl_xor_sync(FULL_MASK, m[h], o), lo = __shfl_xor_sync(FULL_MASK, l[h], o);
			float mn = fmaxf(m[h], mo), base = mn == NEG_INF ? 0.f : mn;
			float ca = __expf(m[h] - base), cb = __expf(mo - base);
			l[h] = l[h] * ca + lo * cb;
#pragma unroll
			for (int e = 0; e < VMAX * E; e++) acc[h][e] = acc[h][e] * ca + __shfl_xor_sync(FULL_MASK, acc[h][e], o) * cb;
			m[h] = mn;
		}
		if (lane == 0) wm[warp][h] = m[h], wl[warp][h] = l[h];
	}
	__syncthreads();
	// Every warp scales its sums to the block's max; the warps then add
	// them in order through shared memory, one warp at a time.
	float* out = part + ((long long)r * H + g * per) * splits * (D + 2);
	for (int w = 0; w < DEC_THREADS / 32; w++) {
		if (warp == w && sub == 0) {
#pragma unroll
			for (int h = 0; h < PER; h++) {
				if (h >= per) continue;
				float M = NEG_INF;
				for (int x = 0; x < DEC_THREADS / 32; x++) M = fmaxf(M, wm[x][h]);
				float c = M == NEG_INF ? 0.f : __expf(m[h] - M);
#pragma unroll
				for (int cc = 0; cc < VMAX; cc++) {
					int piece = li + cc * lpk;
					if (cc < vpl && piece < vecs) {
#pragma unroll
						for (int e = 0; e < E; e++) {
							float* o = out + ((long long)h * splits + s) * (D + 2) + piece * E + e;
							*o = (w == 0 ? 0.f : *o) + acc[h][cc * E + e] * c;
						}
					}
				}
			}
		}
		__syncthreads();
	}
	if (threadIdx.x < per) {
		int h = threadIdx.x;
		float M = NEG_INF, L = 0.f;
		for (int x = 0; x < DEC_THREADS / 32; x++) M = fmaxf(M, wm[x][h]);
		for (int x = 0; x < DEC_THREADS / 32; x++) L += wm[x][h] == NEG_INF ? 0.f : wl[x][h] * __expf(wm[x][h] - M);
		float* o = out + ((long long)h * splits + s) * (D + 2);
		o[D] = M, o[D + 1] = L;
	}
}

// The kernels: attn_decode_split_p<PER> reads an fp32 cache, _kvh_p<PER> a
// bf16 one, _kv8_p<PER> an fp8 one (fp8.cuh's rows; D a multiple of 16).
// The names are the host's (decodeSplitKernel in backend_attention_flash.go).

extern "C" __global__ void attn_decode_split_p1(float* part, const float* q, const float* k, const float* v,
                                                const int* qRow, const int* kStart, const int* kCount, int H, int G,
                                                int D, float scale, int splits) {
	attn_decode_split_impl<float, 1>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_p2(float* part, const float* q, const float* k, const float* v,
                                                const int* qRow, const int* kStart, const int* kCount, int H, int G,
                                                int D, float scale, int splits) {
	attn_decode_split_impl<float, 2>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_p4(float* part, const float* q, const float* k, const float* v,
                                                const int* qRow, const int* kStart, const int* kCount, int H, int G,
                                                int D, float scale, int splits) {
	attn_decode_split_impl<float, 4>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_p8(float* part, const float* q, const float* k, const float* v,
                                                const int* qRow, const int* kStart, const int* kCount, int H, int G,
                                                int D, float scale, int splits) {
	attn_decode_split_impl<float, 8>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kvh_p1(float* part, const float* q, const unsigned short* k,
                                                    const unsigned short* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned short, 1>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kvh_p2(float* part, const float* q, const unsigned short* k,
                                                    const unsigned short* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned short, 2>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kvh_p4(float* part, const float* q, const unsigned short* k,
                                                    const unsigned short* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned short, 4>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kvh_p8(float* part, const float* q, const unsigned short* k,
                                                    const unsigned short* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned short, 8>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kv8_p1(float* part, const float* q, const unsigned char* k,
                                                    const unsigned char* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned char, 1>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kv8_p2(float* part, const float* q, const unsigned char* k,
                                                    const unsigned char* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned char, 2>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kv8_p4(float* part, const float* q, const unsigned char* k,
                                                    const unsigned char* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned char, 4>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

extern "C" __global__ void attn_decode_split_kv8_p8(float* part, const float* q, const unsigned char* k,
                                                    const unsigned char* v, const int* qRow, const int* kStart,
                                                    const int* kCount, int H, int G, int D, float scale, int splits) {
	attn_decode_split_impl<unsigned char, 8>(part, q, k, v, qRow, kStart, kCount, H, G, D, scale, splits);
}

// attn_decode_combine merges the splits of each (row, head) in order:
// out = Σ_s e^(m_s − M)·o_s / Σ_s e^(m_s − M)·l_s, lse = M + log(that sum).
// Grid (rows, H), DEC_THREADS threads.
extern "C" __global__ void attn_decode_combine(float* out, float* lse, const float* part, const int* qRow, int H,
                                               int D, int splits) {
	int r = blockIdx.x, h = blockIdx.y;
	long long qr = qRow[r];
	const float* p = part + ((long long)r * H + h) * splits * (D + 2);
	float M = NEG_INF;
	for (int s = 0; s < splits; s++) M = fmaxf(M, p[s * (D + 2) + D]);
	float L = 0.f;
	for (int s = 0; s < splits; s++) {
		float ms = p[s * (D + 2) + D];
		if (ms != NEG_INF) L += p[s * (D + 2) + D + 1] * __expf(ms - M);
	}
	for (int d = threadIdx.x; d < D; d += DEC_THREADS) {
		float o = 0.f;
		for (int s = 0; s < splits; s++) {
			float ms = p[s * (D + 2) + D];
			if (ms != NEG_INF) o += p[s * (D + 2) + d] * __expf(ms - M);
		}
		out[(qr * H + h) * D + d] = o / L;
	}
	if (lse && threadIdx.x == 0) lse[qr * H + h] = M + logf(L);
}
