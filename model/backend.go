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

// Backend is the set of ops the model runs on.
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
	// (ActivationStore), rounded as it is written. LoRA adds each adapted
	// projection's low-rank term into the fused q/k/v product with it.
	AddCols(dst, src *Tensor, col0 int)
	// CopyCols overwrites dst (R, w) with columns [col0, col0+w) of src
	// (R, W), dst fp32, src fp32 or a bf16 activation (ActivationStore).
	CopyCols(dst, src *Tensor, col0 int)

	// GatherRows overwrites dst[i] = src[idx[i]] (rows along the first dim).
	GatherRows(dst, src *Tensor, idx []int32)
	// ScatterRows writes dst[idx[i]] = src[i], or += when accumulate.
	ScatterRows(dst, src *Tensor, idx []int32, accumulate bool)

	// AdamW updates p in place from gradient g with moments m and v
	// (decoupled weight decay, bias-corrected moments).
	AdamW(p, g, m, v *Tensor, h AdamWParams)
}

// Freezer is implemented by backends that can keep a read-only tensor in
// bf16, half the memory (the CUDA backend). A frozen tensor may afterwards
// be read only by MatMul, Embedding and Download.
type Freezer interface {
	Freeze(t *Tensor) error
}

// BatchInvariant is implemented by backends that can compute every op on
// the path from a token to its log-probability with the same order and
// roundings whatever rows share the op (precision.exact_logprobs,
// docs/algorithm.md §5.10): the CPU backends. A cached decode step's logits
// and log-softmax then equal, bit for bit, a training forward's over the
// same tokens.
type BatchInvariant interface {
	SetBatchInvariant(on bool)
}

// RowSampler is implemented by backends that reduce next-token logits on
// the device, so the sampler downloads a few numbers per row instead of a
// whole vocabulary (the CUDA backend). The rollout package uses it when
// the model's backend has it and falls back to full rows otherwise.
type RowSampler interface {
	// TopK returns, for each row of logits (R, V), its k largest logits in
	// descending order, ties broken by the lower id, and their ids.
	TopK(logits *Tensor, k int) (ids [][]int32, vals [][]float32)
	// ChunkSums returns, for each row, mx = max_v logits/temperature and,
	// for consecutive chunks of chunk ids, Σ exp(logit/temperature − mx)
	// accumulated in float64.
	ChunkSums(logits *Tensor, temperature float64, chunk int) (mx []float64, sums [][]float64)
	// Chunks returns, for each k, the logits of row rows[k] at ids
	// chunks[k]·chunk … (chunks[k]+1)·chunk − 1 (fewer at the end of the
	// vocabulary), brought back in one download.
	Chunks(logits *Tensor, rows, chunks []int32, chunk int) [][]float32
}

// Shadower is implemented by backends that can keep a bf16 copy of a
// writable float32 tensor for matrix products (the CUDA backend under bf16
// products): products then read the copy, half the bytes of the float32
// master, which stays what every other op and the optimizer see. The copy
// follows the master on the device (AdamW writes both; any other write
// marks it for refreshing at the next product). Shadow reports whether a
// copy was made: false where the backend's products are not bf16.
type Shadower interface {
	Shadow(t *Tensor) (bool, error)
}

// SquareSummer is implemented by backends that sum the squares of many
// tensors with one transfer to the host (the CUDA backend: one host
// synchronisation for the gradient norm instead of one per tensor). The
// result must equal Σ_t SumSquares(t), added in order.
type SquareSummer interface {
	SumSquaresAll(ts []*Tensor) float64
}

// MultiTensorOptimizer is implemented by backends that apply AdamW to, and
// clear, many tensors in one launch (the CUDA backend's multi-tensor
// kernels, as apex's multi_tensor_apply). AdamWAll must equal AdamW on
// each (ps[i], gs[i], ms[i], vs[i]) in turn, and ZeroAll Zero on each
// tensor, bit for bit.
type MultiTensorOptimizer interface {
	AdamWAll(ps, gs, ms, vs []*Tensor, h AdamWParams)
	ZeroAll(ts []*Tensor)
}

// HalfWeights is implemented by backends that can keep a weight matrix as
// writable bf16 storage alone, its fp32 master living elsewhere (the CUDA
// backend under bf16 products; the optimizer's sharded fp32 masters,
// optim/masters.go, hold the masters). Such a weight is read by MatMul (as a
// bf16 operand) and ReadHalf, written by AdamWHalf, WriteHalf and the
// ranks' gathers; Download of it is an error, since its fp32 values are
// not there.
type HalfWeights interface {
	// HalfOnly replaces t's float32 storage by bf16 storage holding its
	// values rounded to nearest even, with pad spare elements after the
	// storage's end. Views convert with their storage: converting the
	// storage first, then each view, points the views at the new storage.
	HalfOnly(t *Tensor, pad int) error
	// IsHalfOnly reports whether t is such a weight.
	IsHalfOnly(t *Tensor) bool
	// AdamWHalf is AdamW on the fp32 master that also writes the bf16
	// rounding of the updated master into half (equal sizes).
	AdamWHalf(master, half, g, m, v *Tensor, h AdamWParams)
	// ReadHalf downloads a bf16-only weight, widened (exact).
	ReadHalf(t *Tensor, dst []float32)
	// WriteHalf uploads src rounded to bf16 into a bf16-only weight.
	WriteHalf(t *Tensor, src []float32)
}

// ActivationStore is implemented by backends that keep some activations
// in bf16 (the CUDA backend under bf16 products): the model asks it for
// every activation a training pass saves but the residual stream and the
// statistics (newLayerActs lists them), which stay fp32 as do gradients.
// The model also asks it for the two activation gradients that only
// products read (the MLP's dgu and the fused projection's dqkv).
// Such a tensor is written (overwritten) by MatMul, RMSNorm (out),
// SplitQKV (qn, kn, v; from a bf16 qkv), Attention (out; with q, k, v bf16),
// SwiGLU, SwiGLUBackward (dgate, dup; with gate, up bf16),
// SplitQKVBackward (dqkv; with qkv bf16) and LogSoftmaxGatherBackward
// (dlogits), each rounding the fp32 result once, and read by MatMul,
// SwiGLU, SwiGLUBackward, SplitQKV and SplitQKVBackward (qkv), Attention and
// AttentionBackward (q, k, v, and out for the backward's Σ dout ⊙ out),
// CopyCols (src), Copy and Download; its contents are undefined until written. Backends without it (the CPU ones) keep these
// tensors fp32, so the model has one path.
type ActivationStore interface {
	ActivationHalf(shape ...int) *Tensor
}

// HalfStore is implemented by backends that can hold a writable tensor in
// bf16 (the CUDA backend): the KV cache, written by ScatterRows (rounding)
// and read by Attention, Copy and Download.
type HalfStore interface {
	NewHalf(shape ...int) *Tensor
}

// ConfigChecker is implemented by backends that cannot run every model
// Config.Validate admits (the CUDA backend's attention kernels take head
// dims up to a bound): CheckConfig says why, naming the config key, so a
// model is refused when it is loaded rather than computed wrongly.
type ConfigChecker interface {
	CheckConfig(c *Config) error
}

// CheckBackend returns b's refusal of c, if b is a ConfigChecker.
func CheckBackend(b Backend, c *Config) error {
	if cc, ok := b.(ConfigChecker); ok {
		return cc.CheckConfig(c)
	}
	return nil
}

// Releaser is implemented by backends whose memory is given back
// explicitly (the CUDA backend, whose device memory is a stream-ordered
// pool: a released block serves the next allocation of its size, which the
// stream runs after every op already issued on the old tensor). The model
// releases every temporary it allocates; a Pass is released by Backward or
// by Pass.Release, a KV cache by KVCache.Release. Backends without it (the
// CPU ones) leave tensors to the garbage collector.
type Releaser interface {
	// Release gives t's storage back; t and its views must not be used
	// afterwards. Releasing a tensor twice is an error the backend records.
	Release(ts ...*Tensor)
}

// Scratcher is implemented by backends that can hand out a tensor without
// clearing it (the CUDA backend: clearing every activation cost about a
// tenth of a training step's estimated time). Its contents are undefined
// until written: only an op that overwrites every element may come first.
type Scratcher interface {
	Scratch(shape ...int) *Tensor
}

// Scratch allocates a tensor the caller overwrites whole before reading
// it: uncleared on a Scratcher, zero-filled elsewhere.
func Scratch(b Backend, shape ...int) *Tensor {
	if s, ok := b.(Scratcher); ok {
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

// Release gives ts back to b when b is a Releaser (nil tensors skipped).
func Release(b Backend, ts ...*Tensor) {
	if r, ok := b.(Releaser); ok {
		r.Release(ts...)
	}
}
