// Exact mode's fold of a split's online-softmax sums (precision.exact_logprobs;
// attention_exact.cu, attention_exact_tc.cu): folding a split's (m, l, acc)
// into the running (M, L, O): M′ = max(M, m), L = L·a + l·c, O = O·a + acc·c
// with a = e^(M−M′), c = e^(m−M′). One definition for every kernel that
// folds splits (a block folding its own, attn_exact_combine after a block
// per split), so all round alike.
__device__ __forceinline__ void ex_fold_coef(float M, float m, float& Mn, float& a, float& c) {
	Mn = fmaxf(M, m);
	float base = Mn == NEG_INF ? 0.f : Mn;
	a = __expf(__fsub_rn(M, base)); // M = −∞ (nothing folded yet): 0
	c = __expf(__fsub_rn(m, base));
}
__device__ __forceinline__ float ex_fold(float X, float a, float x, float c) { return __fmaf_rn(X, a, __fmul_rn(x, c)); }
