package optim

// Clipping fused into the update. The global norm must be known before any
// element is updated, so it stays a pass of its own (one read of the
// gradient, one download for every tensor: model.MultiTensorOptimizer); what the
// strategies fuse is the scaling: instead of a pass that multiplies every
// gradient by the clip coefficient (a read and a write of the whole
// gradient, 8 bytes an element), Clip hands the coefficient to the next
// AdamW update (model.AdamWParams.GradScale), whose pass reads the
// gradient anyway and multiplies it in float32 as that pass would have
// stored it: the update is bitwise the unfused one. The AdamW pass also
// writes the weight's bf16 copy (model.HalfPrecision). The gradient itself is
// left unscaled: nothing reads it between Clip and Update.

// ClipCoef is the coefficient clipping to maxNorm applies to gradients of
// global norm norm (torch.nn.utils.clip_grad_norm_'s, with its 1e-6
// guard), rounded to float32 as Scale takes it: 1 when the norm is within
// maxNorm, maxNorm ≤ 0 (no clipping) or the norm is not finite (the step
// is refused then).
func ClipCoef(norm, maxNorm float64) float32 {
	if maxNorm <= 0 {
		return 1
	}
	if coef := maxNorm / (norm + 1e-6); coef < 1 {
		return float32(coef)
	}
	return 1
}
