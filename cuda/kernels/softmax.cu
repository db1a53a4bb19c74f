// Log-softmax over the vocabulary, gathered at the target token, and its
// backward. The model calls these on chunks of rows, so fp32 logits never
// exist for a whole response at once.

// lsg_fwd: one block per row of logits (M, V). entropy may be null. Row m's
// target is targets[m·tstride]: 1 for a table of targets, 2 for the tokens a
// device draw wrote beside their log-probs (sample_rows, sample_topk), which
// a graphed decode step reads where they lie. A target outside [0, V) (never
// from the host, which checks its own) gives a NaN log-prob, not a stray read.
extern "C" __global__ void lsg_fwd(float* logp, float* lse, float* entropy, const float* logits, const int* targets,
                                   int V, int tstride) {
	__shared__ float sh[32];
	long long m = blockIdx.x;
	const float* row = logits + m * V;
	float mx = NEG_INF;
	for (int j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, row[j]);
	mx = block_max(mx, sh);
	float sum = 0.f, sumPX = 0.f;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float e = expf(row[j] - mx);
		sum += e;
		sumPX += e * (row[j] - mx);
	}
	sum = block_sum(sum, sh);
	sumPX = block_sum(sumPX, sh);
	if (threadIdx.x == 0) {
		float l = mx + logf(sum);
		lse[m] = l;
		int t = targets[m * tstride];
		logp[m] = (t >= 0 && t < V) ? row[t] - l : __int_as_float(0x7fc00000);
		// −Σ p log p = lse − Σ p·x, with x shifted by mx for stability.
		if (entropy) entropy[m] = logf(sum) - sumPX / sum;
	}
}

// lsg_bwd: dlogits = dlogp·(onehot(target) − softmax). Grid: (M, ceil(V/blockDim)).
template <typename O>
__device__ __forceinline__ void lsg_bwd_impl(O* dlogits, const float* dlogp, const float* logits, const float* lse,
                                             const int* targets, int V) {
	long long m = blockIdx.x;
	int j = blockIdx.y * blockDim.x + threadIdx.x;
	if (j >= V) return;
	float g = dlogp[m];
	float d = -g * expf(logits[m * V + j] - lse[m]);
	if (j == targets[m]) d += g;
	store_as(dlogits, m * V + j, d);
}

extern "C" __global__ void lsg_bwd(float* dlogits, const float* dlogp, const float* logits, const float* lse,
                                   const int* targets, int V) {
	lsg_bwd_impl(dlogits, dlogp, logits, lse, targets, V);
}

// lsg_bwd_h writes bf16 dlogits (an ActivationHalf): the LM head's products
// read them rounded to bf16 in any case, so the same numbers flow for half
// the bytes.
extern "C" __global__ void lsg_bwd_h(unsigned short* dlogits, const float* dlogp, const float* logits,
                                     const float* lse, const int* targets, int V) {
	lsg_bwd_impl(dlogits, dlogp, logits, lse, targets, V);
}
