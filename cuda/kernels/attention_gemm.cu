// Attention on tensor cores, llm.c's route without cuDNN: cuBLAS batched
// products compute the scores S = Q·Kᵀ of a segment for a chunk of query
// heads sharing one key/value head, these kernels turn them into causal
// softmax probabilities (and, in the backward, into dS), and cuBLAS
// products finish (P·V, Pᵀ·dO, dO·Vᵀ, dS·K, dSᵀ·Q). The scores of a chunk
// are laid out (hc, QLen, KLen), row-major; row r = j·QLen + i is query i
// of the chunk's head j, which sees keys 0 … off+i (off = KLen − QLen).

// attn_gemm_softmax overwrites S with P = softmax(scale·S) over each row's
// visible keys (0 beyond them) and writes each row's log-sum-exp to
// lse[(q0+i)·H + h0+j] when lse is not null. One block per row.
extern "C" __global__ void attn_gemm_softmax(float* S, float* lse, int QLen, int KLen, int off, int q0, int h0, int H,
                                             float scale) {
	__shared__ float sh[32];
	long long r = blockIdx.x;
	int j = (int)(r / QLen), i = (int)(r % QLen);
	int n = off + i + 1; // visible keys
	float* row = S + r * KLen;
	float mx = NEG_INF;
	for (int k = threadIdx.x; k < n; k += blockDim.x) mx = fmaxf(mx, scale * row[k]);
	mx = block_max(mx, sh);
	float sum = 0.f;
	for (int k = threadIdx.x; k < n; k += blockDim.x) sum += expf(scale * row[k] - mx);
	sum = block_sum(sum, sh);
	float l = mx + logf(sum);
	for (int k = threadIdx.x; k < KLen; k += blockDim.x) row[k] = k < n ? expf(scale * row[k] - l) : 0.f;
	if (lse && threadIdx.x == 0) lse[(long long)(q0 + i) * H + h0 + j] = l;
}

// attn_gemm_probs overwrites recomputed scores S with P = exp(scale·S − lse)
// (0 beyond the visible keys), from the forward's log-sum-exp. Grid: (rows,
// ceil(KLen/blockDim)).
extern "C" __global__ void attn_gemm_probs(float* S, const float* lse, int QLen, int KLen, int off, int q0, int h0,
                                           int H, float scale) {
	long long r = blockIdx.x;
	int k = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= KLen) return;
	int j = (int)(r / QLen), i = (int)(r % QLen);
	float l = lse[(long long)(q0 + i) * H + h0 + j];
	float* p = S + r * KLen + k;
	*p = k <= off + i ? expf(scale * *p - l) : 0.f;
}

// attn_gemm_dscores overwrites dP with dS = scale·P ⊙ (dP − δ), δ the row's
// Σ dO ⊙ O (attn_delta, laid out (Nq, H)). Grid: (rows, ceil(KLen/blockDim)).
extern "C" __global__ void attn_gemm_dscores(float* dP, const float* P, const float* delta, int QLen, int KLen,
                                             int q0, int h0, int H, float scale) {
	long long r = blockIdx.x;
	int k = blockIdx.y * blockDim.x + threadIdx.x;
	if (k >= KLen) return;
	int j = (int)(r / QLen), i = (int)(r % QLen);
	float d = delta[(long long)(q0 + i) * H + h0 + j];
	long long at = r * KLen + k;
	dP[at] = scale * P[at] * (dP[at] - d);
}
