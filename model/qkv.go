package model

// The fused q/k/v projection's split on the CPU backends: both keep the
// product's output as one (N, (H+2G)·D) matrix, as the GPU does, and run
// their own RMSNorm and RoPE on contiguous copies of the query and key
// heads, so the arithmetic is the same ops on the same values as with three
// separate products (the CPU path's numerics, and the golden fixtures'
// agreement, do not change).

// gatherHeads copies heads [h0, h0+n) of every fused row of src into dst
// (N, n, D).
func gatherHeads(dst, src []float32, d QKVDims, h0, n int) {
	w, span := d.Width(), n*d.D
	for t := 0; t < d.N; t++ {
		copy(dst[t*span:(t+1)*span], src[t*w+h0*d.D:])
	}
}

// scatterHeads copies src (N, n, D) into heads [h0, h0+n) of every fused
// row of dst.
func scatterHeads(dst, src []float32, d QKVDims, h0, n int) {
	w, span := d.Width(), n*d.D
	for t := 0; t < d.N; t++ {
		copy(dst[t*w+h0*d.D:t*w+h0*d.D+span], src[t*span:(t+1)*span])
	}
}

// splitQKV is SplitQKV for both CPU backends: ops supplies RMSNorm and
// RoPE (the reference's or the fast backend's), ref the storage.
func splitQKV(ops Backend, ref *ReferenceCPU, qn, kn, v, rstdQ, rstdK, qkv, qw, kw *Tensor, pos []int32, theta float64, eps float32) {
	const op = "split qkv"
	if !ref.check(op, qn, kn, v, rstdQ, rstdK, qkv, qw, kw) {
		return
	}
	d, err := SplitQKVDims(op, qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos)
	if !ref.keep(err) {
		return
	}
	src := ref.data(qkv)
	q, k := ref.New(d.N, d.H, d.D), ref.New(d.N, d.G, d.D)
	gatherHeads(ref.data(q), src, d, 0, d.H)
	gatherHeads(ref.data(k), src, d, d.H, d.G)
	gatherHeads(ref.data(v), src, d, d.H+d.G, d.G)
	ops.RMSNorm(qn, rstdQ, q, qw, eps)
	ops.RMSNorm(kn, rstdK, k, kw, eps)
	ops.RoPE(qn, pos, theta, false)
	ops.RoPE(kn, pos, theta, false)
}

// splitQKVBackward is SplitQKVBackward for both CPU backends.
func splitQKVBackward(ops Backend, ref *ReferenceCPU, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *Tensor, pos []int32, theta float64) {
	const op = "split qkv backward"
	if !ref.check(op, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK) {
		return
	}
	d, err := SplitQKVDims(op, dqn, dkn, dv, rstdQ, rstdK, qkv, qw, kw, pos)
	if !ref.keep(err) || !ref.keep(SizeCheck(op, qkv, dqkv)) || !ref.keep(SizeCheck(op, qw, dqw, dkw)) {
		return
	}
	src := ref.data(qkv)
	q, k := ref.New(d.N, d.H, d.D), ref.New(d.N, d.G, d.D)
	gatherHeads(ref.data(q), src, d, 0, d.H)
	gatherHeads(ref.data(k), src, d, d.H, d.G)
	gq, gk := ref.New(d.N, d.H, d.D), ref.New(d.N, d.G, d.D) // the gradients before RoPE
	ops.Copy(gq, dqn)
	ops.Copy(gk, dkn)
	ops.RoPE(gq, pos, theta, true)
	ops.RoPE(gk, pos, theta, true)
	dq, dk := ref.New(d.N, d.H, d.D), ref.New(d.N, d.G, d.D)
	ops.RMSNormBackward(dq, dqw, gq, q, qw, rstdQ)
	ops.RMSNormBackward(dk, dkw, gk, k, kw, rstdK)
	dst := ref.data(dqkv)
	scatterHeads(dst, ref.data(dq), d, 0, d.H)
	scatterHeads(dst, ref.data(dk), d, d.H, d.G)
	scatterHeads(dst, ref.data(dv), d, d.H+d.G, d.G)
}

// SplitQKV splits the fused projection (Backend).
func (b *ReferenceCPU) SplitQKV(qn, kn, v, rstdQ, rstdK, qkv, qw, kw *Tensor, pos []int32, theta float64, eps float32) {
	splitQKV(b, b, qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, theta, eps)
}

// SplitQKVBackward is the split's backward (Backend).
func (b *ReferenceCPU) SplitQKVBackward(dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *Tensor, pos []int32, theta float64) {
	splitQKVBackward(b, b, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, theta)
}

// SplitQKVWith is SplitQKV for a backend that embeds the reference
// (backend/cpu): ops supplies RMSNorm and RoPE, ref the storage, argument
// checks and error recording.
func SplitQKVWith(ops Backend, ref *ReferenceCPU, qn, kn, v, rstdQ, rstdK, qkv, qw, kw *Tensor, pos []int32, theta float64, eps float32) {
	splitQKV(ops, ref, qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, theta, eps)
}

// SplitQKVBackwardWith is SplitQKVBackward for a backend that embeds the
// reference, as SplitQKVWith.
func SplitQKVBackwardWith(ops Backend, ref *ReferenceCPU, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *Tensor, pos []int32, theta float64) {
	splitQKVBackward(ops, ref, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, theta)
}
