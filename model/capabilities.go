package model

// The backend contract, part two: the optional capabilities. Backend
// (backend.go) is what every backend implements and what the model's one
// path needs; a capability below is something a backend may add, found by
// type assertion, each with the fallback the callers take without it.
// They are grouped by who needs them, and a group's accessor (SamplerCapsOf,
// TrainerCapsOf, MemoryCapsOf) asserts them all at once, so a caller reads
// a nil field instead of asserting. The two read on every temporary or
// layer have a helper each instead: MemoryPool (Scratch, Release) and
// ResidualNormer (AddRMSNorm, RMSNormBackwardAdd).
//
// Who implements what (C: CUDA backend, R: model.ReferenceCPU, F: the fast
// CPU backend, backend/cpu):
//
//	group    capability            C  R  F  without it
//	sampler  DeviceSampler         C        whole logit rows downloaded; host draws; eager decode steps
//	sampler  KVFormats             C     F  KV cache fp32; precision.kv_cache bf16 and fp8 refused (CheckKVCache)
//	sampler  KVPager               C        a paged cache keeps full storage; only its accounting
//	                                        follows the budget (DefaultKVPageBytes pages)
//	trainer  HalfPrecision         C        weights, activations and their products fp32
//	trainer  MultiTensorOptimizer  C     F  AdamW, Zero and SumSquares one tensor at a time
//	trainer  TokenLossGrader       C     F  the loss's derivatives computed through the host
//	trainer  BatchInvariant        C     F  precision.exact_logprobs refused
//	trainer  ResidualNormer        C  R  F  Copy, Add and RMSNorm (AddRMSNorm)
//	memory   MemoryPool            C     F  New (zero-filled); tensors left to the garbage collector
//	memory   MemoryReporter        C        the host's /proc/meminfo
//	memory   ConfigChecker         C        every config Config.Validate admits runs
//
// The rule: the fast CPU backend implements a capability whenever it can
// give the fallback's own numbers, so that the conformance suite
// (model/backendtest) runs the capability on the CPU and on CUDA against
// the same fallback. The capabilities fall in four kinds.
//
// Value-preserving (MultiTensorOptimizer, TokenLossGrader, MemoryPool):
// the CPU implements them with the fallback's numbers bit for bit (the
// demo's metrics and checkpoints are unchanged), and the suite checks each
// against its fallback on every backend that has it: multi.go against the
// one-tensor ops, tokenloss.go against the host's derivative, memory.go an
// op on a recycled NaN-filled Scratch tensor against the same op on New,
// and a released tensor's refusals. The reference stays without them:
// plain loops and zero-filled tensors are what it specifies.
//
// Facts about a device (MemoryReporter, ConfigChecker), with nothing to
// compute. MemoryReporter means "tensors in a device's own memory": on the
// CPU its fallback, the host's memory, is the truth, and its presence
// would make the trainer report a GPU peak (gpu_mem_peak_gib) and treat
// the backend as a GPU (a generation rank's weight link). The CPU refuses
// no config, which is what ConfigChecker's absence says; the suite checks
// that a checker admits every head dim its attention runs (memory.go).
//
// Formats asked for (KVFormats): a capability whose numbers differ from
// the fallback's by design, used only where the config asks for it
// (precision.kv_cache bf16 or fp8; auto resolves to fp32 on the CPU,
// whose products are fp32, so the demo is unchanged). The fast CPU
// backend holds the formats as they are (bf16 bits; e4m3 codes with a
// scale per token and head) and is their reference: the suite
// (kvcache.go) checks every backend's writes bit for bit against a host
// rounding and quantisation written apart from both, and attention over
// the cache against float64 attention over the values it holds. Paging
// (KVPager) maps physical pages into reserved address ranges, the CUDA
// driver's virtual memory management; the CPU keeps full storage (its
// own equivalent, reserved ranges whose pages madvise gives back, is not
// built) and the page accounting, plain Go on every backend, runs on it
// all the same (kvpages.go).
//
// Other arithmetic (DeviceSampler, HalfPrecision): a caller that
// finds the capability computes differently, not just elsewhere, so the
// CPU implementing it would change what the CPU computes (the demo's
// tokens and metrics). DeviceSampler would also save nothing there (what
// it saves is a download, a copy on the CPU): its reductions make the
// sampler draw unfiltered tokens by chunk sums, whose normaliser adds the
// probabilities in another order than sampler.Sample; its graphs pad
// decode steps to row buckets, and OpenBLAS picks its kernels by shape, so
// a row's logits would follow its bucket (exact.go in backend/cpu); and
// SampleTokens on the CPU would be sampler.Sample's arithmetic, which
// backend/cpu cannot import (both sit in the runtime row of
// docs/architecture.md's layer table) and should not copy. bf16 weights
// and activations round what the fp32 ones keep exact, and no key asks
// the CPU for them. For this kind the CPU's fp32 computation without the
// capability is the reference,
// and the cuda package's tests hold CUDA to it: TestFuzzSampling (TopK,
// ChunkSums and Chunks against the host's on the same rows),
// TestDeviceDrawMatchesHost (SampleTokens against sampler.Sample: the same
// token but within rounding of a boundary),
// TestDecodeGraphReplayEqualsEager, TestGenerateMatchesCPU,
// TestTrainingStepMatchesCPU. DeviceSampler's LogSoftmaxGatherDrawn gives
// LogSoftmaxGather's own numbers, but reads SampleTokens' output and serves
// only graphed steps, which the CPU does not run: it belongs with them
// rather than in a capability of its own the CPU would implement for
// nothing (TestLogSoftmaxGatherDrawn holds CUDA's to LogSoftmaxGather's
// bits).
//
// BatchInvariant is a guarantee rather than a speed-up: both fast
// backends give it (the reference's plain loops do not promise it), and
// the exact-mode tests hold each to it bit for bit (TestExactLogProbsRun
// on the CPU, TestExactLogProbsCUDA, and the self-test's full-distribution
// check on the GPU).

// ---- The sampler's capabilities ----

// DeviceSampler is implemented by backends that reduce and sample
// next-token logits on the device and replay decode steps as graphs (the
// CUDA backend): the sampler downloads a few numbers per row instead of a
// whole vocabulary, draws tokens without leaving the device, and runs
// decode steps as graphs. Without it the sampler downloads full rows and
// draws on the host (sampler.Sample), one eager step at a time.
type DeviceSampler interface {
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
	// SampleTokens writes, for each row r of logits (R, V), the token drawn
	// with uniform u = rng.Uniform(draws[r].Key, draws[r].Counter) and its
	// log-probability under the (tempered, filtered) distribution into out
	// (R, 2): the token's int32 bits, then the log-prob. The uniform is
	// bit-exact; the inverse CDF sums float64 probabilities in another
	// order than the host's sampler.Sample, so a draw within a rounding
	// error of a boundary between two tokens may pick the neighbour.
	SampleTokens(out, logits *Tensor, draws []Draw, p SampleParams)
	// LogSoftmaxGatherDrawn is LogSoftmaxGather(logp, lse, entropy,
	// logits, targets) with targets[r] the token SampleTokens wrote into
	// row r of drawn (R, 2), read where it lies: a graphed decode step in
	// exact mode (SampleParams.ExactLogProbs) gets its tokens' untempered
	// log-probs and entropies without a trip to the host. Its numbers are
	// LogSoftmaxGather's on those tokens, bit for bit (the same kernel);
	// a target outside the vocabulary gives a NaN log-prob.
	LogSoftmaxGatherDrawn(logp, lse, entropy, logits, drawn *Tensor)
	// DeviceSamples reports whether SampleTokens supports p (top-p without
	// top-k needs a whole-vocabulary sort and is not supported).
	DeviceSamples(p SampleParams) bool
	// NewGraphSet prepares graphs for a cache whose slots hold at most
	// maxKeys keys (kernels whose shape would follow the context length,
	// as split-K decode attention's split count, take it from maxKeys) and
	// whose positions stay below maxKeys (RoPE tables are sized first, so
	// that no graph ever sees them grow).
	NewGraphSet(maxKeys int, ropeTheta float64, headDim int) (GraphSet, error)
}

// KVFormats is implemented by backends that can hold the KV cache in a
// narrower format than fp32 (the CUDA backend; the fast CPU backend, whose
// numbers are the reference for CUDA's). Without it the cache is fp32 and
// precision.kv_cache bf16 and fp8 are refused (CheckKVCache).
type KVFormats interface {
	// NewHalf returns a writable bf16 tensor: the KV cache, written by
	// ScatterRows (rounding to nearest even, NaN kept quiet, as
	// F32ToBF16) and read by Attention, Copy and Download. Copy into a
	// float32 tensor of as many elements widens (exact mode's training
	// forward hands its backward the keys and values a cache holds,
	// Model.ExactKV); so does it from an fp8 one.
	NewHalf(shape ...int) *Tensor

	// FP8KV says why a model of config c cannot have an fp8 cache here
	// (nil when it can), naming precision.kv_cache (the CUDA backend
	// refuses below compute capability 8.9).
	FP8KV(c *Config) error
	// NewFP8 returns a tensor of shape (rows, g, d) in e4m3 with
	// per-(token, head) scales, that ScatterRows writes (quantising each
	// row and head as QuantizeE4M3) and Attention, Copy and Download read
	// (dequantised, exact in fp32).
	NewFP8(shape ...int) *Tensor
}

// KVPager is implemented by backends that back a bf16 or fp8 KV cache with
// pages mapped on demand into reserved address ranges (the CUDA backend's
// virtual memory management). Without it a paged cache keeps its full
// storage and only its accounting follows the budget (kvpages.go).
type KVPager interface {
	// KVPageBytes is the backend's mapping granularity.
	KVPageBytes() int64
	// NewPagedKV returns n writable bf16 tensors of shape (rows, g, d),
	// each in a fixed, reserved address range of its own with nothing
	// mapped, and the mapper that backs page p (bytes [p·pageBytes,
	// (p+1)·pageBytes)) of all n ranges at once, from a pool of at most
	// maxPages such pages.
	NewPagedKV(n, rows, g, d int, pageBytes int64, maxPages int) ([]*Tensor, PageMapper, error)
	// NewPagedFP8KV is NewPagedKV for an fp8 cache: the ranges hold rows
	// of FP8KVRowBytes(g, d) bytes.
	NewPagedFP8KV(n, rows, g, d int, pageBytes int64, maxPages int) ([]*Tensor, PageMapper, error)
}

// KVStore is both: the cache formats and their paging (the CUDA backend).
type KVStore interface {
	KVFormats
	KVPager
}

// SamplerCaps is what a backend offers the sampler and the KV cache
// beyond Backend; a nil field is a capability it lacks.
type SamplerCaps struct {
	Device DeviceSampler
	KV     KVFormats
	Pager  KVPager
}

// SamplerCapsOf asserts b's sampler capabilities.
func SamplerCapsOf(b Backend) SamplerCaps {
	var c SamplerCaps
	c.Device, _ = b.(DeviceSampler)
	c.KV, _ = b.(KVFormats)
	c.Pager, _ = b.(KVPager)
	return c
}

// ---- The trainer's capabilities ----

// HalfPrecision is implemented by backends that can hold weights and
// activations in bf16 (the CUDA backend; the methods that need bf16
// products say what they do without them). Without it every weight,
// activation and product stays fp32, so the model has one path.
type HalfPrecision interface {
	// Freeze keeps a read-only tensor in bf16, half the memory. A frozen
	// tensor may afterwards be read only by MatMul, Embedding and
	// Download.
	Freeze(t *Tensor) error

	// Shadow keeps a bf16 copy of a writable float32 tensor for matrix
	// products: products then read the copy, half the bytes of the float32
	// master, which stays what every other op and the optimizer see. The
	// copy follows the master on the device (AdamW writes both; any other
	// write marks it for refreshing at the next product). Shadow reports
	// whether a copy was made: false where the backend's products are not
	// bf16.
	Shadow(t *Tensor) (bool, error)

	// HalfOnly, IsHalfOnly, AdamWHalf, ReadHalf and WriteHalf keep a
	// weight matrix as writable bf16 storage alone, its fp32 master living
	// elsewhere (under bf16 products; the optimizer's sharded fp32
	// masters, optim/masters.go, hold the masters). Such a weight is read
	// by MatMul (as a bf16 operand) and ReadHalf, written by AdamWHalf,
	// WriteHalf and the ranks' gathers; Download of it is an error, since
	// its fp32 values are not there.
	//
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

	// ActivationHalf returns a bf16 activation (under bf16 products): the
	// model asks for every activation a training pass saves but the
	// residual stream and the statistics (newLayerActs lists them), which
	// stay fp32 as do gradients, and for the two activation gradients that
	// only products read (the MLP's dgu and the fused projection's dqkv).
	// Such a tensor is written (overwritten) by MatMul, RMSNorm (out),
	// SplitQKV (qn, kn, v; from a bf16 qkv), Attention (out; with q, k, v
	// bf16), SwiGLU, SwiGLUBackward (dgate, dup; with gate, up bf16),
	// SplitQKVBackward (dqkv; with qkv bf16) and LogSoftmaxGatherBackward
	// (dlogits), each rounding the fp32 result once, and read by MatMul,
	// SwiGLU, SwiGLUBackward, SplitQKV and SplitQKVBackward (qkv),
	// Attention and AttentionBackward (q, k, v, and out for the backward's
	// Σ dout ⊙ out), CopyCols (src), Copy and Download; its contents are
	// undefined until written.
	ActivationHalf(shape ...int) *Tensor
}

// MultiTensorOptimizer is implemented by backends that apply AdamW to,
// clear, and sum the squares of many tensors in one launch (the CUDA
// backend's multi-tensor kernels, as apex's multi_tensor_apply: one host
// synchronisation for the gradient norm instead of one per tensor; the
// fast CPU backend, one split of all the tensors' elements over its
// workers instead of one per tensor).
// AdamWAll must equal AdamW on each (ps[i], gs[i], ms[i], vs[i]) in turn,
// ZeroAll Zero on each tensor, bit for bit, and SumSquaresAll
// Σ_t SumSquares(t), added in order.
type MultiTensorOptimizer interface {
	AdamWAll(ps, gs, ms, vs []*Tensor, h AdamWParams)
	ZeroAll(ts []*Tensor)
	SumSquaresAll(ts []*Tensor) float64
}

// TokenLossGrader is implemented by backends that compute a TokenLoss's
// derivatives where the log-probs are (the CUDA backend, in a kernel; the
// fast CPU backend, TokenLoss.Grad on the tensor itself, rows over its
// workers): dl[i] = ∂J/∂log π of target row lo+i at logp[i], for
// i < hi−lo. A row range outside the loss is an error the backend records.
type TokenLossGrader interface {
	TokenLossGrad(dl, logp *Tensor, l *TokenLoss, lo, hi int)
}

// BatchInvariant is implemented by backends that can compute every op on
// the path from a token to its log-probability with the same order and
// roundings whatever rows share the op (precision.exact_logprobs,
// docs/algorithm.md §5.10): the CPU backends. A cached decode step's logits
// and log-softmax then equal, bit for bit, a training forward's over the
// same tokens.
//
// Only the sampler's decode and the forward that gives π_θ are on that
// path: Backward, and the trainer's reference forward, turn the mode off
// (PauseExact) for their own ops (they need no batch invariance, and the
// backend's shape-tuned kernels are several times faster) and back on.
type BatchInvariant interface {
	SetBatchInvariant(on bool)
	IsBatchInvariant() bool
}

// ResidualNormer is implemented by backends that fuse a residual add with
// the RMSNorm next to it (both CPU backends and the CUDA backend).
type ResidualNormer interface {
	// AddRMSNorm overwrites sum = x + y (equal element counts; sum may be
	// x or y) and out, rstd as RMSNorm(out, rstd, sum, w, eps) does (rstd
	// may be nil; out may be a bf16 activation where RMSNorm's may).
	AddRMSNorm(sum, out, rstd, x, y, w *Tensor, eps float32)
	// RMSNormBackwardAdd is RMSNormBackward that also adds res: it
	// overwrites dx with res + ∂J/∂x (the norm's input gradient, rounded to
	// float32 first, then added) and accumulates dw. res must not be dx.
	RMSNormBackwardAdd(dx, dw, dout, x, w, rstd, res *Tensor)
}

// TrainerCaps is what a backend offers the training pass and the
// optimizer beyond Backend; a nil field is a capability it lacks.
type TrainerCaps struct {
	Half      HalfPrecision
	Multi     MultiTensorOptimizer
	TokenLoss TokenLossGrader
	Exact     BatchInvariant
}

// TrainerCapsOf asserts b's trainer capabilities (ResidualNormer, read
// once a layer, has its own accessor, AddRMSNorm).
func TrainerCapsOf(b Backend) TrainerCaps {
	var c TrainerCaps
	c.Half, _ = b.(HalfPrecision)
	c.Multi, _ = b.(MultiTensorOptimizer)
	c.TokenLoss, _ = b.(TokenLossGrader)
	c.Exact, _ = b.(BatchInvariant)
	return c
}

// ---- Memory management ----

// MemoryPool is implemented by backends whose memory is a pool handed out
// and given back explicitly (the CUDA backend, whose device memory is a
// stream-ordered pool: a released block serves the next allocation of its
// size, which the stream runs after every op already issued on the old
// tensor; the fast CPU backend, which keeps released storage, poisoned
// with NaN, for the next Scratch of its size). Backends without it (the
// reference) zero-fill every tensor and leave it to the garbage collector.
// Read through Scratch and Release, which every temporary goes through.
type MemoryPool interface {
	// Release gives t's storage back; t and its views must not be used
	// afterwards. Using a released tensor, or releasing it twice, is an
	// error the backend records ("was released", "already released").
	// The model releases every temporary it allocates; a Pass is released
	// by Backward or by Pass.Release, a KV cache by KVCache.Release.
	Release(ts ...*Tensor)
	// Scratch hands out a tensor without clearing it (clearing every
	// activation cost about a tenth of a training step's estimated time).
	// Its contents are undefined until written: only an op that
	// overwrites every element may come first.
	Scratch(shape ...int) *Tensor
}

// MemoryReporter is the optional interface of a backend that holds its
// tensors in a device's own memory (the CUDA backend): the trainer plans a
// run against the device's free memory and logs the peak a step held
// through it, without importing the backend's package. The CPU backend
// does not implement it (the trainer reads /proc/meminfo instead).
type MemoryReporter interface {
	// DeviceName names the device in logs (e.g. "NVIDIA H100 80GB HBM3").
	DeviceName() string
	// MemInfo returns the device's free and total memory, in bytes.
	MemInfo() (free, total int64, err error)
	// MemPeak returns the most bytes the backend held at once since the
	// last ResetMemPeak.
	MemPeak() int64
	// ResetMemPeak restarts the peak from the bytes held now.
	ResetMemPeak()
}

// ConfigChecker is implemented by backends that cannot run every model
// Config.Validate admits (the CUDA backend's attention kernels take head
// dims up to a bound): CheckConfig says why, naming the config key, so a
// model is refused when it is loaded rather than computed wrongly.
type ConfigChecker interface {
	CheckConfig(c *Config) error
}

// MemoryCaps is how a backend reports its memory and limits beyond
// Backend; a nil field is a capability it lacks. MemoryPool, on every
// temporary, is read by Scratch and Release instead.
type MemoryCaps struct {
	Reporter MemoryReporter
	Checker  ConfigChecker
}

// MemoryCapsOf asserts b's memory capabilities.
func MemoryCapsOf(b Backend) MemoryCaps {
	var c MemoryCaps
	c.Reporter, _ = b.(MemoryReporter)
	c.Checker, _ = b.(ConfigChecker)
	return c
}
