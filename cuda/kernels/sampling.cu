// Reductions of next-token logits for the sampler, so a decode step moves
// a few numbers per row to the host instead of the whole vocabulary.
// Reductions are shared-memory trees in a fixed order (deterministic).

#define SAMPLE_THREADS 256

// better reports whether (v, i) precedes (bv, bi) in descending value,
// ascending id order; NaN never precedes anything.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
	if (v != v) return false;
	if (bv != bv) return true;
	return v > bv || (v == bv && i < bi);
}

// topk_rows writes the k best (value, id) pairs of each row of logits
// (R, V) in order, by k selection passes: pass p takes the best element
// that comes after pass p−1's choice in the (value desc, id asc) order.
// Grid: R blocks of SAMPLE_THREADS.
extern "C" __global__ void topk_rows(int* outIds, float* outVals, const float* logits, int V, int k) {
	__shared__ float sv[SAMPLE_THREADS];
	__shared__ int si[SAMPLE_THREADS];
	long long r = blockIdx.x;
	const float* row = logits + r * V;
	float prevV = 0.f;
	int prevI = -1;
	for (int p = 0; p < k; p++) {
		float bv = __int_as_float(0x7fc00000); // NaN: nothing yet
		int bi = -1;
		for (int i = threadIdx.x; i < V; i += blockDim.x) {
			float v = row[i];
			bool after = prevI < 0 || v < prevV || (v == prevV && i > prevI);
			if (after && better(v, i, bv, bi)) {
				bv = v;
				bi = i;
			}
		}
		sv[threadIdx.x] = bv;
		si[threadIdx.x] = bi;
		__syncthreads();
		for (int w = blockDim.x / 2; w > 0; w >>= 1) {
			if ((int)threadIdx.x < w && si[threadIdx.x + w] >= 0 &&
			    (si[threadIdx.x] < 0 || better(sv[threadIdx.x + w], si[threadIdx.x + w], sv[threadIdx.x], si[threadIdx.x]))) {
				sv[threadIdx.x] = sv[threadIdx.x + w];
				si[threadIdx.x] = si[threadIdx.x + w];
			}
			__syncthreads();
		}
		prevV = sv[0];
		prevI = si[0];
		if (threadIdx.x == 0) {
			outVals[r * k + p] = prevV;
			outIds[r * k + p] = prevI;
		}
		__syncthreads(); // sv, si are rewritten by the next pass
	}
}

// chunk_sums writes, for each row, mx = max z with z = logit·invT… computed
// as (double)logit / temperature, and Σ exp(z − mx) over consecutive chunks
// of `chunk` ids, in float64. Grid: R blocks of SAMPLE_THREADS.
extern "C" __global__ void chunk_sums(double* mx, double* sums, const float* logits, int V, double temperature,
                                      int chunk) {
	__shared__ double sh[SAMPLE_THREADS];
	long long r = blockIdx.x;
	const float* row = logits + r * V;
	double m = -1.0 / 0.0;
	for (int i = threadIdx.x; i < V; i += blockDim.x) m = fmax(m, (double)row[i] / temperature);
	sh[threadIdx.x] = m;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + w]);
		__syncthreads();
	}
	m = sh[0];
	if (threadIdx.x == 0) mx[r] = m;
	int chunks = (V + chunk - 1) / chunk;
	for (int c = 0; c < chunks; c++) {
		int lo = c * chunk, hi = min(V, lo + chunk);
		double s = 0;
		for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) s += exp((double)row[i] / temperature - m);
		s = block_sum_d(s, sh);
		if (threadIdx.x == 0) sums[r * chunks + c] = s;
	}
}

// gather_chunks copies, for each request k, the logits of row rows[k] at
// ids chunks[k]·chunk … (up to V) into dst[k] (rows of chunk floats), so
// every chunk a sampling step walks comes back in one download.
// Grid: K blocks.
extern "C" __global__ void gather_chunks(float* dst, const float* logits, const int* rows, const int* chunks, int V,
                                         int chunk) {
	int k = blockIdx.x;
	long long lo = (long long)chunks[k] * chunk;
	const float* src = logits + (long long)rows[k] * V + lo;
	int n = (int)min((long long)chunk, V - lo);
	for (int e = threadIdx.x; e < n; e += blockDim.x) dst[(long long)k * chunk + e] = src[e];
}

// ---- drawing the token on the device (decode graphs) ----

// rng_mix and rng_uniform are internal/rng's Mix and Uniform, bit for bit:
// integer hashing, then the top 53 bits scaled by 2⁻⁵³ (both exact in
// float64). d holds the key's and the counter's low and high words.
__device__ __forceinline__ unsigned long long rng_mix(unsigned long long z) {
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
__device__ __forceinline__ double rng_uniform(const int* d) {
	unsigned long long key = (unsigned long long)(unsigned)d[0] | ((unsigned long long)(unsigned)d[1] << 32);
	unsigned long long ctr = (unsigned long long)(unsigned)d[2] | ((unsigned long long)(unsigned)d[3] << 32);
	return (double)(rng_mix(key ^ rng_mix(ctr)) >> 11) / 9007199254740992.0;
}

// sample_rows draws each row's token as rollout.Sample does without
// filters: u = rng_uniform(draws[r]), z = (double)logit / temperature, the
// first id (in id order) where Σ exp(z − max z) passes u·Σ. Each thread
// sums one contiguous range of ids; thread 0 adds the ranges in order,
// finds the one holding the target and walks it. out (R, 2): the token,
// then its log-prob's bits. Temperature 0 is greedy (the lowest id among
// the largest logits, log-prob 0). Grid: R blocks of SAMPLE_THREADS.
extern "C" __global__ void sample_rows(int* out, const float* logits, const int* draws, int V, double temperature) {
	__shared__ double sh[SAMPLE_THREADS];
	__shared__ float sv[SAMPLE_THREADS];
	__shared__ int si[SAMPLE_THREADS];
	long long r = blockIdx.x;
	const float* row = logits + r * V;
	int t = threadIdx.x;
	if (temperature == 0) {
		float bv = __int_as_float(0x7fc00000);
		int bi = -1;
		for (int i = t; i < V; i += blockDim.x)
			if (better(row[i], i, bv, bi)) bv = row[i], bi = i;
		sv[t] = bv, si[t] = bi;
		__syncthreads();
		for (int w = blockDim.x / 2; w > 0; w >>= 1) {
			if (t < w && si[t + w] >= 0 && (si[t] < 0 || better(sv[t + w], si[t + w], sv[t], si[t])))
				sv[t] = sv[t + w], si[t] = si[t + w];
			__syncthreads();
		}
		if (t == 0) out[2 * r] = si[0] < 0 ? 0 : si[0], out[2 * r + 1] = 0;
		return;
	}
	double m = -1.0 / 0.0;
	for (int i = t; i < V; i += blockDim.x) m = fmax(m, (double)row[i] / temperature);
	sh[t] = m;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w >>= 1) {
		if (t < w) sh[t] = fmax(sh[t], sh[t + w]);
		__syncthreads();
	}
	m = sh[0];
	__syncthreads();
	int per = (V + blockDim.x - 1) / blockDim.x, ranges = (V + per - 1) / per;
	int lo = t * per, hi = min(V, lo + per);
	double s = 0;
	for (int i = lo; i < hi; i++) s += exp((double)row[i] / temperature - m);
	sh[t] = s;
	__syncthreads();
	if (t != 0) return;
	double total = 0;
	for (int c = 0; c < ranges; c++) total += sh[c];
	double target = rng_uniform(draws + 4 * r) * total, cum = 0;
	int c = 0;
	while (c < ranges - 1 && cum + sh[c] <= target) cum += sh[c++];
	int tok = V - 1;
	double q = 0;
	for (int i = c * per; i < V; i++) {
		q = exp((double)row[i] / temperature - m);
		cum += q;
		if (target < cum) {
			tok = i;
			break;
		}
	}
	out[2 * r] = tok;
	out[2 * r + 1] = __float_as_int((float)log(q / total));
}

// sample_topk draws each row's token from its k best logits (topk_rows'
// output: descending, ties by id) exactly as rollout.Sample does with
// top-k (and top-p): the same float64 arithmetic in the same order, one
// thread per row, each sum recomputed rather than stored. Grid: ⌈R/128⌉
// blocks of 128.
extern "C" __global__ void sample_topk(int* out, const int* ids, const float* vals, const int* draws, int R, int k,
                                       double temperature, double topP) {
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= R) return;
	const float* v = vals + (long long)r * k;
	const int* id = ids + (long long)r * k;
	double mx = (double)v[0] / temperature, sum = 0;
	for (int i = 0; i < k; i++) sum += exp((double)v[i] / temperature - mx);
	int keep = k;
	if (topP < 1) {
		double cum = 0;
		for (int i = 0; i < k; i++) {
			cum += exp((double)v[i] / temperature - mx) / sum;
			if (cum >= topP) {
				keep = i + 1;
				break;
			}
		}
		sum = 0;
		for (int i = 0; i < keep; i++) sum += exp((double)v[i] / temperature - mx);
	}
	double target = rng_uniform(draws + 4 * r) * sum, cum = 0, q = 0;
	int pick = keep - 1;
	for (int i = 0; i < keep; i++) {
		q = exp((double)v[i] / temperature - mx);
		cum += q;
		if (target < cum) {
			pick = i;
			break;
		}
	}
	out[2 * r] = id[pick];
	out[2 * r + 1] = __float_as_int((float)log(q / sum));
}
