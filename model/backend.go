package model

// The Backend interface: the small set of ops the Qwen3 forward and backward
// need. The model is written once against it; the CPU backend (cpu.go) is the
// float32 reference and the CUDA backend (package cuda) the fast path.
//
// Dimension legend used in shape comments across this package:
//
//	N  tokens in a packed batch (all sequences concatenated)
//	M  rows whose next-token log-probability is requested
//	C  hidden size        F  intermediate (MLP) size     V  vocabulary size
//	H  query heads        G  key/value heads             D  head dim
//	S  KV-cache rows (slots × max length)
//
// Conventions every backend follows:
//   - Tensors are dense, row-major float32 (a backend may store them in a
//     narrower dtype internally, e.g. bf16 on the GPU, and says so).
//   - "overwrite" ops write every element of their output; "accumulate" ops
//     add into it (+=). Backward ops accumulate parameter gradients and
//     overwrite activation gradients, as llm.c does.
//   - Ops do not return errors one by one: a backend records the first
//     failure (bad shapes, device errors) and skips later work; the model
//     checks Err() at the end of each pass. This keeps the model code reading
//     like the equations while still never losing an error.

import "fmt"

// Tensor is a dense row-major array owned by a backend. Off is the element
// offset into the backend's storage, so Rows can return views without copies.
type Tensor struct {
	Shape []int
	Off   int
	Store any // backend-private storage
}

// Numel is the number of elements.
func (t *Tensor) Numel() int { return numel(t.Shape) }

// Rows returns the view of rows [a, b) along the first dimension.
func (t *Tensor) Rows(a, b int) *Tensor {
	row := t.Numel() / t.Shape[0]
	shape := append([]int{b - a}, t.Shape[1:]...)
	return &Tensor{Shape: shape, Off: t.Off + a*row, Store: t.Store}
}

// View returns the same storage with another shape of equal size.
func (t *Tensor) View(shape ...int) *Tensor {
	if numel(shape) != t.Numel() {
		panic(fmt.Sprintf("view %v as %v: element counts differ", t.Shape, shape))
	}
	return &Tensor{Shape: shape, Off: t.Off, Store: t.Store}
}

// Segment says which keys a contiguous run of query rows attends to: query
// rows [Q0, Q0+QLen) attend to key rows [K0, K0+KLen) causally, the queries
// being the last QLen positions of the KLen keys. Query i (0-based) sees keys
// K0 … K0+KLen−QLen+i. Training uses K0 = Q0 and KLen = QLen (a packed
// sequence attends to itself); cached decoding uses QLen = 1 and keys in the
// sequence's KV-cache slot.
type Segment struct {
	Q0, QLen, K0, KLen int
}

// AdamWParams are the hyperparameters of one AdamW step. Step counts from 1
// and sets the bias corrections 1−β^step.
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
	Step                               int
	// GradScale multiplies each gradient element (in float32, as Scale
	// would) before the step: gradient clipping's coefficient, applied in
	// the update's pass instead of a pass of its own. 0 means 1.
	GradScale float32
}

// Scale is GradScale, with 0 read as 1.
func (h AdamWParams) Scale() float32 {
	if h.GradScale == 0 {
		return 1
	}
	return h.GradScale
}

// Backend is the set of ops the model runs on, which every backend
// implements: the backend contract's first part. What a backend may add
// (bf16 storage, device sampling, memory management) is in
// capabilities.go, grouped by who needs it.
type Backend interface {
	Name() string
	// Err returns the first error recorded since the last ResetErr.
	Err() error
	ResetErr()

	// New allocates a zero-filled tensor.
	New(shape ...int) *Tensor
	// Upload copies host values into t (len(src) == t.Numel()).
	Upload(t *Tensor, src []float32)
	// Download copies t into host memory (len(dst) == t.Numel()).
	Download(t *Tensor, dst []float32)
	// Zero sets every element of t to 0.
	Zero(t *Tensor)
	// Copy overwrites dst with src (equal element counts).
	Copy(dst, src *Tensor)

	// MatMul computes c = op(a)·op(b) (overwrite) or c += op(a)·op(b)
	// (accumulate), with op(x) = xᵀ when the flag is set. Tensors are
	// viewed as matrices by flattening every dimension but the last:
	// a (M, K) or (K, M), b (K, N) or (N, K), c (M, N).
	MatMul(c, a, b *Tensor, transA, transB, accumulate bool)
	// Add accumulates dst += src (equal element counts).
	Add(dst, src *Tensor)
	// Scale multiplies t by s in place.
	Scale(t *Tensor, s float32)
	// SumSquares returns Σ t², accumulated in float64.
	SumSquares(t *Tensor) float64

	// Embedding overwrites out (N, C) with rows ids of table (V, C).
	Embedding(out, table *Tensor, ids []int32)
	// EmbeddingBackward accumulates dtable[ids[i]] += dout[i].
	EmbeddingBackward(dtable, dout *Tensor, ids []int32)

	// RMSNorm normalizes each row of x (…, n) over its last dimension:
	// out = x / sqrt(mean(x²) + eps) ⊙ w, with w (n). It overwrites out and,
	// if rstd is not nil, rstd (rows) with 1/sqrt(mean(x²)+eps).
	RMSNorm(out, rstd, x, w *Tensor, eps float32)
	// RMSNormBackward overwrites dx and accumulates dw, given the rstd saved
	// by RMSNorm.
	RMSNormBackward(dx, dw, dout, x, w, rstd *Tensor)

	// RoPE rotates x (N, heads, D) in place by position pos[n] with the
	// "rotate half" pairing (i, i+D/2) and frequencies theta^(−2i/D).
	// inverse rotates by −angle, which is the backward of the forward.
	RoPE(x *Tensor, pos []int32, theta float64, inverse bool)

	// SplitQKV reads the fused projection qkv (N, (H+2G)·D: per token H
	// query heads, then G key heads, then G value heads) and overwrites
	// qn (N, H, D) = RoPE(RMSNorm_per_head(q, qw)), kn (N, G, D) the same
	// of k with kw, v (N, G, D) with the value heads, and rstdQ (N·H),
	// rstdK (N·G) with each head's 1/sqrt(mean(x²)+eps). It is RMSNorm on
	// rows of D then RoPE (above) on q and k, in one pass over the product.
	SplitQKV(qn, kn, v, rstdQ, rstdK, qkv, qw, kw *Tensor, pos []int32, theta float64, eps float32)
	// SplitQKVBackward overwrites dqkv (N, (H+2G)·D) with the gradient of
	// the fused projection (query and key heads: the inverse rotation then
	// RMSNormBackward; value heads: dv) and accumulates dqw, dkw, given the
	// qkv and rstd the forward read and wrote.
	SplitQKVBackward(dqkv, dqw, dkw, dqn, dkn, dv, qkv, qw, kw, rstdQ, rstdK *Tensor, pos []int32, theta float64)

	// Attention overwrites out (Nq, H, D) with causal softmax(q·kᵀ·scale)·v
	// per segment; k, v are (Nk, G, D) and query head h reads key/value head
	// h/(H/G). If lse is not nil it is overwritten (Nq, H) with each row's
	// log-sum-exp of the scaled scores, which the backward needs.
	Attention(out, lse, q, k, v *Tensor, segs []Segment, scale float32)
	// AttentionBackward overwrites dq (Nq, H, D), dk and dv (Nk, G, D).
	AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse *Tensor, segs []Segment, scale float32)

	// SwiGLU overwrites out = silu(gate) ⊙ up (equal shapes).
	SwiGLU(out, gate, up *Tensor)
	// SwiGLUBackward overwrites dgate and dup.
	SwiGLUBackward(dgate, dup, dout, gate, up *Tensor)

	// LogSoftmaxGather reads logits (M, V) and overwrites logp (M) with
	// log softmax(logits)[targets[m]], lse (M) with each row's log-sum-exp
	// and, if entropy is not nil, entropy (M) with −Σ p log p.
	LogSoftmaxGather(logp, lse, entropy, logits *Tensor, targets []int32)
	// LogSoftmaxGatherBackward overwrites dlogits (M, V) with
	// dlogp[m] · (onehot(targets[m]) − softmax(logits[m])).
	LogSoftmaxGatherBackward(dlogits, dlogp, logits, lse *Tensor, targets []int32)

	// AddCols accumulates src (R, w) into columns [col0, col0+w) of dst
	// (R, W): dst[r, col0+j] += src[r, j]. dst may be a bf16 activation
	// (HalfPrecision.ActivationHalf), rounded as it is written. LoRA adds each adapted
	// projection's low-rank term into the fused q/k/v product with it.
	AddCols(dst, src *Tensor, col0 int)
	// CopyCols overwrites dst (R, w) with columns [col0, col0+w) of src
	// (R, W), dst fp32, src fp32 or a bf16 activation (HalfPrecision.ActivationHalf).
	CopyCols(dst, src *Tensor, col0 int)

	// GatherRows overwrites dst[i] = src[idx[i]] (rows along the first dim).
	GatherRows(dst, src *Tensor, idx []int32)
	// ScatterRows writes dst[idx[i]] = src[i], or += when accumulate.
	ScatterRows(dst, src *Tensor, idx []int32, accumulate bool)

	// AdamW updates p in place from gradient g with moments m and v
	// (decoupled weight decay, bias-corrected moments).
	AdamW(p, g, m, v *Tensor, h AdamWParams)
}

// CheckBackend returns b's refusal of c, if b is a ConfigChecker.
func CheckBackend(b Backend, c *Config) error {
	if cc := MemoryCapsOf(b).Checker; cc != nil {
		return cc.CheckConfig(c)
	}
	return nil
}

// Scratch allocates a tensor the caller overwrites whole before reading
// it: uncleared on a MemoryPool, zero-filled elsewhere.
func Scratch(b Backend, shape ...int) *Tensor {
	if s, ok := b.(MemoryPool); ok {
		return s.Scratch(shape...)
	}
	return b.New(shape...)
}

// NewFrom returns a new tensor of shape holding vals, or zeros when vals
// is nil.
func NewFrom(b Backend, vals []float32, shape ...int) *Tensor {
	t := b.New(shape...)
	if vals != nil {
		b.Upload(t, vals)
	}
	return t
}

// Values downloads ts and concatenates their values.
func Values(b Backend, ts ...*Tensor) []float32 {
	var out []float32
	for _, t := range ts {
		v := make([]float32, t.Numel())
		b.Download(t, v)
		out = append(out, v...)
	}
	return out
}

// Release gives ts back to b when b is a MemoryPool (nil tensors skipped).
func Release(b Backend, ts ...*Tensor) {
	if r, ok := b.(MemoryPool); ok {
		r.Release(ts...)
	}
}
