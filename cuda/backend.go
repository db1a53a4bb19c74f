package cuda

// The CUDA implementation of model.Backend. Tensors are float32 in device
// memory (so weights double as the fp32 master copy AdamW updates) except
// three bf16 kinds: frozen weights (the reference model, Freeze), the KV
// cache (NewHalf) and, under bf16 products, saved activations
// (ActivationHalf, backend_half.go). Matrix products go through cuBLAS with a selectable
// compute precision (bf16 tensor cores by default, fp32 accumulation), and
// every other op is one of the embedded kernels. Shape checks are model's
// shared ones, so this backend refuses exactly what the CPU reference
// refuses. This file holds the tensor plumbing and the dense ops; rows,
// pointwise ops, attention and sampling reductions have their own files.

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// Precision is the compute precision of matrix products.
type Precision string

// Matrix-product precisions: inputs rounded to bf16 or tf32 on the tensor
// cores, or full fp32; all accumulate in fp32.
const (
	BF16 Precision = "bf16"
	TF32 Precision = "tf32"
	FP32 Precision = "fp32"
)

// cuBLAS compute types (cublasComputeType_t) by precision.
var computeTypes = map[Precision]int{FP32: blasCompute32F, BF16: blasCompute32FFast16BF, TF32: blasCompute32FFastTF32}

// ParsePrecision validates a precision name.
func ParsePrecision(s string) (Precision, error) {
	if _, ok := computeTypes[Precision(s)]; !ok {
		return "", fmt.Errorf("cuda matmul precision %q: want bf16, tf32 or fp32", s)
	}
	return Precision(s), nil
}

// Backend runs the model's ops on a Device.
type Backend struct {
	d       *Device
	compute int
	prec    Precision

	mu  sync.Mutex
	err error

	cacheMu sync.Mutex
	ints    intArena // uploaded index tables (backend_rows.go)
	rope    ropeTable

	// attnTiles chooses the attention kernels: 0 picks per call (tiles
	// for training-sized segments), +1 forces the tiled kernels, −1 the
	// one-row-per-block kernels (tests run both).
	attnTiles  int
	attnGEMM   int // attention products in cuBLAS: −1 never, 1 always (fp32 K/V), 0 auto (backend_attention_gemm.go)
	attnFlash  int // fused tensor-core attention: −1 never, 1 always, 0 auto (backend_attention_flash.go)
	attnWG     int // the fused route's warpgroup-MMA kernels on sm_90: −1 never, 0 where they serve (backend_attention_flash.go)
	attnDecode int // split-K decode kernels for per-row segments: −1 never, 1 always, 0 auto (same file)

	gr          *graphRun // set while a decode step runs under a graph (graph.go)
	normTwoPass bool      // the norm backward sums dw in a second pass (a test compares the two)
	graphEager  bool      // graph steps always run eagerly (tests compare replays with it)
	exact       bool      // precision.exact_logprobs: batch-invariant kernels (exact.go)
	exactNoMMA  bool      // exact bf16 products on the FFMA kernel, as below sm_80 (tests; backend_gemm_exact.go)
	exactWG     int       // exact bf16 products on the warpgroup-MMA kernels on sm_90a: −1 never, 0 there (backend_gemm_exact.go)
}

// buffer is one device allocation; tensors and views point at it. It goes
// back to the allocator's pool when released (Release for tensors, free for
// the backend's own scratch), never by the garbage collector in the normal
// course: a finalizer is only a safety net for a buffer someone forgot,
// counted as a leak (MemStats.Leaked) so tests and profiles show it.
type buffer struct {
	ptr      uint64
	size     int64 // bytes reserved
	elems    int   // elements usable
	bf16     bool  // 2-byte bf16 elements: frozen weights or a KV cache
	frozen   bool  // read-only (Freeze); otherwise writable by ScatterRows and Copy
	released bool
	a        *allocator
	// shadow is a bf16 copy of this fp32 buffer for products (Shadow);
	// stale holds the element ranges written since their copy was made
	// (spans.go: per range, for the fused weights' row views).
	shadow *buffer
	stale  spans
	// frozenAs is the bf16 buffer that replaced this one (Freeze, HalfOnly).
	frozenAs *buffer
	// halfOnly marks the frozen bf16 storage of a weight whose fp32 master
	// is sharded over the ranks' optimizers (HalfOnly, backend_masters.go):
	// AdamWHalf and the ranks' all-gather write it, Download refuses it.
	halfOnly bool
	padding  int // spare elements at the end of a bf16-only weight's storage, for in-place gathers
	// kv8 is the row layout of an fp8 KV cache (backend_fp8.go), whose
	// elems count codes; only the fp8-aware ops take it.
	kv8 *kv8Rows
}

// NewBackend returns a backend on d whose matrix products use prec.
func NewBackend(d *Device, prec Precision) *Backend {
	b := &Backend{d: d, compute: computeTypes[prec], prec: prec}
	if os.Getenv(WGMMAEnv) == "0" {
		b.attnWG = -1
	}
	if os.Getenv(ExactWGMMAEnv) == "0" {
		b.exactWG = -1
	}
	return b
}

// ForceAttention overrides the per-call choice of attention
// implementation, for tests and profiles that compare them (tools/profile):
// gemm −1 never puts attention's products in cuBLAS, +1 always (fp32 K/V),
// 0 chooses per call; flash the same for the fused tensor-core kernels. A
// new backend chooses per call.
func (b *Backend) ForceAttention(gemm, flash int) { b.attnGEMM, b.attnFlash = gemm, flash }

// ForceWGMMA sets whether the fused attention may take the warpgroup-MMA
// kernels where they serve (0, the default) or never does (−1), for the
// benchmark that times both routes on an sm_90 GPU.
func (b *Backend) ForceWGMMA(v int) { b.attnWG = v }

// Name identifies the backend and its matmul precision in logs.
func (b *Backend) Name() string { return "cuda/" + string(b.prec) }

// Device returns the GPU the backend runs on.
func (b *Backend) Device() *Device { return b.d }

// Err returns the first recorded error. It does not wait for the GPU (the
// model asks after every layer; a wait there would drain the stream each
// time): a fault inside a kernel surfaces at the next download or
// Synchronize, which records it.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// ResetErr clears the recorded error.
func (b *Backend) ResetErr() { b.mu.Lock(); b.err = nil; b.mu.Unlock() }

// keep records err, if any, and reports whether the op may go on.
func (b *Backend) keep(err error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil && b.err == nil {
		b.err = err
	}
	return b.err == nil
}

func (b *Backend) ok() bool { return b.keep(nil) }

// alloc reserves n float32/int32 elements.
func (b *Backend) alloc(n int) (*buffer, error) { return b.allocBytes(n, 4) }

// allocBytes reserves n elements of the given width, from the running
// graph's pool during a graph step (graph.go).
func (b *Backend) allocBytes(n, width int) (*buffer, error) {
	if gr := b.gr; gr != nil {
		if gr.mode == graphWarm {
			return b.allocFrom(gr.g.pool, n, width)
		}
		p, size, ok := gr.g.pool.hit(int64(n) * int64(width))
		if !ok {
			return nil, fmt.Errorf("graph %s: %d bytes not idle in the graph's pool: a capture or replay cannot allocate", gr.g.key, n*width)
		}
		return b.track(&buffer{ptr: p, size: size, elems: n, bf16: width == 2, a: gr.g.pool}), nil
	}
	return b.allocFrom(b.d.alloc, n, width)
}

// allocFrom reserves n elements of the given width from pool a.
func (b *Backend) allocFrom(a *allocator, n, width int) (*buffer, error) {
	p, size, err := a.get(int64(n) * int64(width))
	if err != nil {
		return nil, err
	}
	return b.track(&buffer{ptr: p, size: size, elems: n, bf16: width == 2, a: a}), nil
}

// track sets a buffer's leak finalizer.
func (b *Backend) track(buf *buffer) *buffer {
	runtime.SetFinalizer(buf, func(x *buffer) { x.a.leak(x.ptr, x.size) })
	return buf
}

// free returns buffers to the pool (nil ones skipped). The stream runs
// every op already issued on a buffer before any op issued later, so its
// block may serve the very next allocation.
func (b *Backend) free(bufs ...*buffer) {
	for _, buf := range bufs {
		if buf == nil || buf.a == nil || buf.released {
			continue
		}
		buf.released = true
		runtime.SetFinalizer(buf, nil)
		buf.a.put(buf.ptr, buf.size)
		b.free(buf.shadow)
	}
}

// Shadow gives t a bf16 copy that products read (model.HalfPrecision), under
// bf16 products only: the copy rounds what tf32 or fp32 products keep.
func (b *Backend) Shadow(t *model.Tensor) (bool, error) {
	if b.prec != BF16 {
		return false, nil
	}
	if _, ok := b.ptrs("shadow", t); !ok {
		return false, b.Err()
	}
	buf := t.Store.(*buffer)
	if buf.shadow != nil {
		return true, nil
	}
	sh, err := b.allocBytes(buf.elems, 2)
	if err != nil {
		return false, fmt.Errorf("bf16 copy of %v: %w", t.Shape, err)
	}
	sh.frozen = true
	runtime.SetFinalizer(sh, nil) // released with its master
	buf.shadow = sh
	markAllStale(buf)
	return true, nil
}

// hasHalf reports whether an fp32 operand has a bf16 copy.
func (b *Backend) hasHalf(t *model.Tensor) bool {
	buf, ok := t.Store.(*buffer)
	return ok && buf.shadow != nil
}

// halfOf returns the address of t's bf16 copy (hasHalf), refreshed first
// where writes have made it stale: one conversion per stale range of the
// buffer (f32_to_bf16 has no alignment needs beyond the elements'), after
// which the whole copy is fresh.
func (b *Backend) halfOf(t *model.Tensor) uint64 {
	buf := t.Store.(*buffer)
	if len(buf.stale) > 0 {
		for _, r := range buf.stale {
			n := r.hi - r.lo
			b.kernelCost(n, 6*n)
			b.elementwise("f32_to_bf16", n, buf.shadow.ptr+2*uint64(r.lo), buf.ptr+4*uint64(r.lo), int64(n))
		}
		b.markFresh(buf, 0, buf.elems)
	}
	return buf.shadow.ptr + 2*uint64(t.Off)
}

// Release gives tensors' storage back to the pool (model.MemoryPool). A view
// releases the whole buffer it belongs to; any later use of the buffer, or
// a second release, is an error.
func (b *Backend) Release(ts ...*model.Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		buf, ok := t.Store.(*buffer)
		switch {
		case !ok:
			b.keep(fmt.Errorf("release: tensor %v is not a CUDA tensor", t.Shape))
		case buf.released:
			b.keep(fmt.Errorf("release: tensor %v was already released", t.Shape))
		default:
			b.free(buf)
		}
	}
}

var _ model.MemoryPool = (*Backend)(nil)

// New allocates a zero-filled tensor.
func (b *Backend) New(shape ...int) *model.Tensor { return b.newTensor("new", 4, shape) }

// Scratch allocates a tensor left as the pool hands it out (model.MemoryPool).
func (b *Backend) Scratch(shape ...int) *model.Tensor { return b.newTensor("scratch", -4, shape) }

// newTensor allocates a zero-filled tensor of 4-byte (float32) or 2-byte
// (bf16) elements; a negative width leaves it uncleared.
func (b *Backend) newTensor(op string, width int, shape []int) *model.Tensor {
	clear := width > 0
	width = max(width, -width)
	n := 1
	for _, d := range shape {
		if d < 0 {
			b.keep(fmt.Errorf("%s: negative dimension in %v", op, shape))
			return &model.Tensor{Shape: make([]int, len(shape)), Store: &buffer{}}
		}
		n *= d
	}
	t := &model.Tensor{Shape: append([]int(nil), shape...), Store: &buffer{}}
	buf, err := b.allocBytes(n, width)
	if !b.keep(err) {
		return t
	}
	t.Store = buf
	if !clear {
		return t
	}
	// Whole 4-byte words: allocations are rounded up to 512 bytes, so an odd
	// bf16 count clears one spare element.
	b.kernelCost(0, n*width)
	b.keep(b.d.memset32(buf.ptr, 0, int64((n*width+3)/4)))
	return t
}

// ptrs validates that every tensor lives in this backend's memory and
// returns their device addresses (0 for nil tensors when allowed by the
// caller passing them as optional).
func (b *Backend) ptrs(op string, ts ...*model.Tensor) ([]uint64, bool) { return b.addrs(op, true, ts) }

// reads is ptrs for tensors the op only reads.
func (b *Backend) reads(op string, ts ...*model.Tensor) ([]uint64, bool) {
	return b.addrs(op, false, ts)
}

// addrs is ptrs; writesFirst says the op writes its first tensor.
func (b *Backend) addrs(op string, writesFirst bool, ts []*model.Tensor) ([]uint64, bool) {
	if !b.ok() {
		return nil, false
	}
	out := make([]uint64, len(ts))
	for i, t := range ts {
		if t == nil {
			b.keep(fmt.Errorf("%s: tensor argument %d is nil", op, i))
			return nil, false
		}
		p, frozen, ok := b.operand(op, i, t)
		if !ok {
			return nil, false
		}
		if i == 0 && writesFirst {
			// Every op writes through its first tensor argument, if any,
			// inside the tensor's element range.
			markStale(t)
		}
		if frozen {
			b.keep(fmt.Errorf("%s: tensor argument %d %v is bf16 storage (a frozen weight or the KV cache); only matmul, embedding, attention, copy, scatter and download take it", op, i, t.Shape))
			return nil, false
		}
		out[i] = p
	}
	return out, true
}

// operand validates one tensor and returns its address and whether it is
// frozen bf16 storage.
func (b *Backend) operand(op string, i int, t *model.Tensor) (uint64, bool, bool) {
	buf, isCUDA := t.Store.(*buffer)
	if !isCUDA {
		b.keep(fmt.Errorf("%s: tensor argument %d is not a CUDA tensor", op, i))
		return 0, false, false
	}
	if buf.released {
		b.keep(fmt.Errorf("%s: tensor argument %d %v was released", op, i, t.Shape))
		return 0, false, false
	}
	if buf.kv8 != nil {
		b.keep(fmt.Errorf("%s: tensor argument %d %v is an fp8 KV cache; only scatter rows, attention, copy and download take it", op, i, t.Shape))
		return 0, false, false
	}
	if t.Off < 0 || t.Off+t.Numel() > buf.elems {
		b.keep(fmt.Errorf("%s: tensor argument %d (shape %v, offset %d) exceeds its storage", op, i, t.Shape, t.Off))
		return 0, false, false
	}
	width := uint64(4)
	if buf.bf16 {
		width = 2
	}
	return buf.ptr + uint64(t.Off)*width, buf.bf16, true
}

// Freeze moves t to read-only bf16 storage (half the memory), rounding to
// nearest even; the reference model's matrices use it. Afterwards only
// MatMul, Embedding and Download may read t.
//
// Views freeze with their storage: the first view frozen rounds the whole
// buffer, and every other tensor on it (views, or the whole) is pointed at
// the same bf16 copy, at the same offset, when it is frozen in turn.
func (b *Backend) Freeze(t *model.Tensor) error {
	if old, ok := t.Store.(*buffer); ok && old.frozenAs != nil {
		t.Store = old.frozenAs
		return b.Err()
	}
	if _, ok := b.ptrs("freeze", t); !ok {
		return b.Err()
	}
	old := t.Store.(*buffer)
	n := old.elems
	buf, err := b.allocBytes(n, 2)
	if err != nil {
		return fmt.Errorf("freeze %v: %w", t.Shape, err)
	}
	b.elementwise("f32_to_bf16", n, buf.ptr, old.ptr, int64(n))
	buf.frozen = true
	b.free(old)
	old.frozenAs, t.Store = buf, buf
	return b.Err()
}

// NewHalf allocates a zero-filled bf16 tensor that ScatterRows writes
// (rounding) and Attention, Copy and Download read: the KV cache at half
// the memory and half the decode bandwidth.
func (b *Backend) NewHalf(shape ...int) *model.Tensor { return b.newTensor("new half", 2, shape) }

var _ model.KVStore = (*Backend)(nil)

// ActivationHalf hands out an uncleared activation kept in bf16 under bf16
// products (model.HalfPrecision): the products that read these tensors
// round their inputs to bf16 anyway, and the fused attention stages its
// operands in bf16. Under tf32 or fp32 products it is fp32, so those stay
// the exact modes.
func (b *Backend) ActivationHalf(shape ...int) *model.Tensor {
	if b.prec != BF16 {
		return b.Scratch(shape...)
	}
	return b.newTensor("activation", -2, shape)
}

// opt returns the address of an optional tensor (0 when nil).
func (b *Backend) opt(op string, t *model.Tensor) (uint64, bool) {
	if t == nil {
		return 0, true
	}
	p, ok := b.ptrs(op, t)
	if !ok {
		return 0, false
	}
	return p[0], true
}

// kernelCost records a kernel's arithmetic (CUDA cores) and DRAM bytes
// for the step profile.
func (b *Backend) kernelCost(flops, bytes int) {
	b.d.cost(EngineKernel, float64(flops), float64(bytes))
}

// gemmCost records a cuBLAS product: 2MNK on the engine its types select.
func (b *Backend) gemmCost(M, N, K, inType, compute int, accumulate bool, outType int) {
	e := EngineFP32GEMM
	switch {
	case inType == cudaR16BF || compute == blasCompute32FFast16BF:
		e = EngineTensorBF16
	case compute == blasCompute32FFastTF32:
		e = EngineTensorTF32
	}
	in := 4.0
	if inType == cudaR16BF {
		in = 2
	}
	out := 4.0
	if outType == cudaR16BF {
		out = 2
	}
	if accumulate {
		out *= 2 // read and write C
	}
	b.d.cost(e, 2*float64(M)*float64(N)*float64(K), in*float64(M*K+K*N)+out*float64(M*N))
}

// launch runs a kernel and records a failure.
func (b *Backend) launch(name string, grid [3]int, block int, args ...any) {
	b.keep(b.d.launch(name, grid, block, args...))
}

// elementwise launches a grid-stride kernel over n elements.
func (b *Backend) elementwise(name string, n int, args ...any) {
	if n == 0 {
		return
	}
	blocks := min((n+255)/256, 1<<16)
	b.launch(name, [3]int{blocks}, 256, args...)
}

// Upload copies host values into t.
func (b *Backend) Upload(t *model.Tensor, src []float32) {
	p, ok := b.ptrs("upload", t)
	if !ok {
		return
	}
	if len(src) != t.Numel() {
		b.keep(fmt.Errorf("upload: %d values into tensor %v", len(src), t.Shape))
		return
	}
	if len(src) > 0 {
		b.keep(b.d.copyIn(p[0], unsafe.Pointer(&src[0]), int64(len(src))*4))
	}
}

// Download copies t into host memory (frozen bf16 tensors widened). A
// bf16-only weight (HalfOnly) is an error: its fp32 values are the
// masters sharded over the ranks (optim.ShardedAdamW.GatherMasters gathers
// them); ReadHalf reads its bf16 values.
func (b *Backend) Download(t *model.Tensor, dst []float32) {
	if !b.ok() {
		return
	}
	if buf, ok := t.Store.(*buffer); ok && buf.halfOnly {
		b.keep(fmt.Errorf("download: tensor %v is a bf16-only weight whose fp32 master is sharded over the data-parallel ranks (ZeRO-1 with sharded masters): gather the masters (optim.ShardedAdamW.GatherMasters) or read the bf16 values (ReadHalf)", t.Shape))
		return
	}
	b.download(t, dst)
}

// download is Download without the bf16-only check.
func (b *Backend) download(t *model.Tensor, dst []float32) {
	if isKV8(t) {
		b.downloadFP8(t, dst)
		return
	}
	p, frozen, ok := b.operand("download", 0, t)
	if !ok {
		return
	}
	if len(dst) != t.Numel() {
		b.keep(fmt.Errorf("download: tensor %v into %d values", t.Shape, len(dst)))
		return
	}
	if len(dst) == 0 {
		return
	}
	if frozen {
		wide, err := b.alloc(len(dst))
		if !b.keep(err) {
			return
		}
		b.elementwise("bf16_to_f32", len(dst), wide.ptr, p, int64(len(dst)))
		p = wide.ptr
		defer b.free(wide)
	}
	b.keep(b.d.copyOut(unsafe.Pointer(&dst[0]), p, int64(len(dst))*4))
}

// Zero sets t to 0.
func (b *Backend) Zero(t *model.Tensor) {
	if p, ok := b.ptrs("zero", t); ok && t.Numel() > 0 {
		b.kernelCost(0, 4*t.Numel())
		b.keep(b.d.memset32(p[0], 0, int64(t.Numel())))
	}
}

// Copy overwrites dst with src (both float32, or both bf16 or fp8 as when
// a KV cache slot is copied); a float32 dst takes a bf16 or fp8 src widened
// (exact mode's keys and values as the cache holds them: widenCopy).
func (b *Backend) Copy(dst, src *model.Tensor) {
	if !b.ok() {
		return
	}
	if b.widenCopy(dst, src) {
		return
	}
	if isKV8(dst) || isKV8(src) {
		b.copyFP8(dst, src)
		return
	}
	pd, hd, ok1 := b.operand("copy", 0, dst)
	ps, hs, ok2 := b.operand("copy", 1, src)
	if !ok1 || !ok2 || !b.keep(model.SizeCheck("copy", dst, src)) || dst.Numel() == 0 {
		return
	}
	markStale(dst)
	if hd != hs || (hd && dst.Store.(*buffer).frozen) {
		b.keep(fmt.Errorf("copy: storages differ (bf16 %v → %v) or the destination is frozen", hs, hd))
		return
	}
	width := int64(4)
	if hd {
		width = 2
	}
	b.kernelCost(0, 2*dst.Numel()*int(width))
	b.keep(b.d.copyDevice(pd, ps, int64(dst.Numel())*width))
}

// Add accumulates dst += src.
func (b *Backend) Add(dst, src *model.Tensor) {
	p, ok := b.ptrs("add", dst, src)
	if ok && b.keep(model.SizeCheck("add", dst, src)) {
		b.kernelCost(dst.Numel(), 4*3*dst.Numel())
		b.elementwise("add_f32", dst.Numel(), p[0], p[1], int64(dst.Numel()))
	}
}

// Scale multiplies t by s.
func (b *Backend) Scale(t *model.Tensor, s float32) {
	if p, ok := b.ptrs("scale", t); ok {
		b.kernelCost(t.Numel(), 4*2*t.Numel())
		b.elementwise("scale_f32", t.Numel(), p[0], s, int64(t.Numel()))
	}
}

// SumSquares returns Σ t², accumulated in float64.
func (b *Backend) SumSquares(t *model.Tensor) float64 { return b.SumSquaresAll([]*model.Tensor{t}) }

// SumSquaresAll returns Σ_t Σ t² with one download: every tensor's float64
// block partials land in one buffer, and the host adds them tensor by
// tensor in order (so the sum equals the per-tensor sums added in order).
func (b *Backend) SumSquaresAll(ts []*model.Tensor) float64 {
	ps, ok := b.ptrs("sumsquares", ts...)
	if !ok {
		return 0
	}
	blocks := make([]int, len(ts))
	total := 0
	for i, t := range ts {
		blocks[i] = min((t.Numel()+255)/256, 1024)
		total += blocks[i]
	}
	if total == 0 {
		return 0
	}
	part, err := b.alloc(2 * total) // float64 partials
	if !b.keep(err) {
		return 0
	}
	defer b.free(part)
	var rows [][]uint64
	var live []int
	for i, t := range ts {
		if n := t.Numel(); n > 0 {
			b.kernelCost(2*n, 4*n)
			rows = append(rows, []uint64{ps[i], uint64(n)})
			live = append(live, blocks[i])
		}
	}
	if len(rows) == 1 || b.capturing() {
		off := 0
		for i, t := range ts {
			if n := t.Numel(); n > 0 {
				b.launch("sumsq_partial", [3]int{blocks[i]}, 256, part.ptr+uint64(8*off), ps[i], int64(n))
			}
			off += blocks[i]
		}
	} else if mt, ok := b.uploadMulti(rows, live); ok {
		// One launch (sumsq_multi): tensor i's blocks write the partials
		// sumsq_partial's would, at the same offsets (empty tensors have none).
		b.launch("sumsq_multi", [3]int{mt.blocks}, 256, part.ptr, mt.tab, mt.blk, mt.tensors)
		b.free(mt.buf)
	}
	host := make([]float64, total)
	if !b.keep(b.d.copyOut(unsafe.Pointer(&host[0]), part.ptr, int64(total)*8)) {
		return 0
	}
	var s float64
	off := 0
	for i := range ts {
		var st float64
		for _, v := range host[off : off+blocks[i]] {
			st += v
		}
		s += st
		off += blocks[i]
	}
	return s
}

// MatMul computes c = op(a)·op(b) or c += op(a)·op(b) with cuBLAS (in exact
// mode with the batch-invariant kernels, backend_gemm_exact.go). Row-major
// c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ, so b goes first. A
// frozen (bf16) operand is multiplied in bf16 with the other operand
// rounded to bf16 too (cuBLAS wants equal input types), accumulating in fp32.
func (b *Backend) MatMul(c, a, bm *model.Tensor, transA, transB, accumulate bool) {
	if !b.ok() {
		return
	}
	// c may be a writable bf16 activation (ActivationHalf), overwritten.
	pcc, halfC, ok := b.operand("matmul", 0, c)
	if !ok {
		return
	}
	if halfC && (c.Store.(*buffer).frozen || accumulate) {
		b.keep(fmt.Errorf("matmul: a bf16 product %v must be writable and overwritten, not accumulated", c.Shape))
		return
	}
	pc := []uint64{pcc}
	markStale(c) // M·N = c.Numel() elements (MatMulDims)
	pa, frozenA, okA := b.operand("matmul", 1, a)
	pb, frozenB, okB := b.operand("matmul", 2, bm)
	if !okA || !okB {
		return
	}
	M, N, K, err := model.MatMulDims(c, a, bm, transA, transB)
	if !b.keep(err) || M == 0 || N == 0 {
		return
	}
	if K == 0 {
		if !accumulate {
			b.Zero(c)
		}
		return
	}
	if b.exact { // batch-invariant kernels, rounding by the operands' kinds alone (backend_gemm_exact.go)
		b.matMulExact(pcc, halfC, a, bm, exactOperand{pa, frozenA}, exactOperand{pb, frozenB}, M, N, K,
			transA, transB, accumulate)
		return
	}
	inType, compute := cudaR32F, b.compute
	ha, hb := b.hasHalf(a), b.hasHalf(bm)
	if !halfC { // a bf16 activation against a much larger fp32 operand: widen it (backend_half.go)
		var wide []*buffer
		defer func() { b.free(wide...) }()
		if pa, frozenA, ok = b.widen(a, pa, frozenA, bm, frozenB || hb, &wide); !ok {
			return
		}
		if pb, frozenB, ok = b.widen(bm, pb, frozenB, a, frozenA || ha, &wide); !ok {
			return
		}
	}
	if !frozenA && !frozenB && ha != hb {
		// A weight's copy saves 2 bytes an element, and rounding the
		// other operand for it costs 6 (read 4, write 2): worth it for the
		// few rows of decoding and the LM head's chunks, not for a
		// training batch's activations, which go to the products as fp32
		// (cuBLAS rounds them in its tile loads under FAST_16BF).
		w, x := bm.Numel(), a.Numel()
		if ha {
			w, x = a.Numel(), bm.Numel()
		}
		if 3*x > w {
			ha, hb = false, false
		}
	}
	if frozenA || frozenB || ha || hb || halfC {
		// bf16 operands (a frozen weight or a bf16 activation, or a
		// weight's bf16 copy), or a bf16 product: the other operand is
		// rounded to bf16 as well (cuBLAS wants equal input types, and bf16
		// ones for a bf16 product), accumulating in fp32.
		if halfC && !frozenA && !frozenB && !ha && !hb {
			ha, hb = b.hasHalf(a), b.hasHalf(bm) // a weight's copy, whatever the sizes
		}
		inType, compute = cudaR16BF, computeTypes[FP32]
		var keep []*buffer
		defer func() { b.free(keep...) }()
		if ha {
			pa = b.halfOf(a)
		}
		if hb {
			pb = b.halfOf(bm)
		}
		if pa, ok = b.narrow(pa, ha, a.Numel(), frozenA, &keep); !ok {
			return
		}
		if pb, ok = b.narrow(pb, hb, bm.Numel(), frozenB, &keep); !ok {
			return
		}
	}
	ldb := N // b stored (K, N)
	if transB {
		ldb = K // b stored (N, K)
	}
	lda := K // a stored (M, K)
	if transA {
		lda = M // a stored (K, M)
	}
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	outType := cudaR32F
	if halfC {
		outType = cudaR16BF
	}
	b.gemmCost(M, N, K, inType, compute, accumulate, outType)
	b.keep(b.d.gemm(transB, transA, N, M, K, 1, pb, inType, ldb, pa, inType, lda,
		beta, pc[0], outType, N, compute))
}

// narrow returns a bf16 form of an operand: itself when frozen or already
// its bf16 copy (half), else a rounded copy appended to keep, to be
// released once the product is issued.
func (b *Backend) narrow(p uint64, half bool, n int, frozen bool, keep *[]*buffer) (uint64, bool) {
	if frozen || half {
		return p, true
	}
	buf, err := b.allocBytes(n, 2)
	if !b.keep(err) {
		return 0, false
	}
	b.kernelCost(n, 6*n)
	b.elementwise("f32_to_bf16", n, buf.ptr, p, int64(n))
	*keep = append(*keep, buf)
	return buf.ptr, true
}
