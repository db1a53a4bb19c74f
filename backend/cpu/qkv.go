package cpu

import "github.com/gdrotrain/gdrotrain/model"

// SplitQKV splits the fused projection with the fast RMSNorm and RoPE.
func (b *Backend) SplitQKV(qn, kn, v, rstdQ, rstdK, qkv, qw, kw *model.Tensor, pos []int32, theta float64, eps float32) {
	model.SplitQKVWith(b, b.ReferenceCPU, qn, kn, v, rstdQ, rstdK, qkv, qw, kw, pos, theta, eps)
}

// SplitQKVBackward is the split's backward with the fast ops.
func (b *Backend) SplitQKVBackward(dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *model.Tensor, pos []int32, theta float64) {
	model.SplitQKVBackwardWith(b, b.ReferenceCPU, dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK, pos, theta)
}
