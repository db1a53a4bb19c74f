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
