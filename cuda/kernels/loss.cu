// The GRPO loss's derivative per target token, for the fused LM head
// (model.TokenLoss, docs/algorithm.md §5.15): dl[m] = ∂J/∂log π at the
// token's log-prob logp[m], in float64 as the host computes it
// (grpo.Surrogate.Token and .Grad, mirrored branch for branch;
// change both together). c holds five doubles per row: the old and the
// reference log-probs, the importance weight, the weighted advantage and
// the aggregation's divisor (0: the token is dropped, dl = 0).

// go_min / go_max are Go's math.Min / math.Max: NaN if either is NaN
// (C's fmin / fmax would return the other operand).
__device__ __forceinline__ double go_min(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ __forceinline__ double go_max(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }

extern "C" __global__ void token_loss_grad(float* dl, const float* logp, const double* c, int M, double clipLow,
                                           double clipHigh, double dual, double klCoef, double ga) {
	int m = blockIdx.x * blockDim.x + threadIdx.x;
	if (m >= M) return;
	const double* r = c + 5 * (long long)m;
	double old = r[0], ref = r[1], is = r[2], aw = r[3], denom = r[4];
	if (denom == 0) {
		dl[m] = 0.f;
		return;
	}
	double lp = (double)logp[m];
	// The clipped surrogate (and the dual clip) on the ratio ρ = exp(Δ).
	double delta = lp - old, dDelta = 1.0;
	if (delta < -20 || delta > 20) {
		delta = go_max(-20, go_min(20, delta));
		dDelta = 0;
	}
	double rho = exp(delta);
	double clipped = go_max(1 - clipLow, go_min(1 + clipHigh, rho));
	double l1 = -aw * rho, l2 = -aw * clipped;
	double lc = l1, dlc = -aw * rho * dDelta;
	if (l2 > l1) {
		lc = l2;
		dlc = 0;
	}
	double dpol = dlc;
	if (dual > 0 && aw < 0 && lc > -aw * dual) dpol = 0;
	// The k3 KL against the reference, clamped as the host clamps it.
	double d = ref - lp, dd = -1.0;
	if (d < -20 || d > 20) {
		d = go_max(-20, go_min(20, d));
		dd = 0;
	}
	double k = exp(d) - d - 1;
	double dk = (exp(d) - 1) * dd;
	if (k < -10 || k > 10) dk = 0;
	// Two roundings, as Grad's explicit conversions keep them: no FMA.
	double pol = __dmul_rn(dpol, is), kl = __dmul_rn(klCoef, dk);
	dl[m] = (float)(__dadd_rn(pol, kl) / denom / ga);
}
