package cuda

// The CUDA implementation of model.Backend. Tensors are float32 in device
// memory (so weights double as the fp32 master copy AdamW updates), matrix
// products go through cuBLAS with a selectable compute precision (bf16
// tensor cores by default, fp32 accumulation), and every other op is one of
// the embedded kernels. Shape checks are model's shared ones, so this
// backend refuses exactly what the CPU reference refuses. Host-side index
// tables (token ids, positions, attention rows) are uploaded once per
// distinct content and reused across layers.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"sort"
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

// cuBLAS compute types (cublasComputeType_t) and data types (cudaDataType).
var computeTypes = map[Precision]int{FP32: 68, BF16: 75, TF32: 77}

const (
	cudaR32F  = 0
	cudaR16BF = 14
)

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
	ints    map[uint64]*buffer // uploaded index tables by content hash
	rope    ropeTable

	// attnTiles chooses the attention kernels: 0 picks per call (tiles
	// for training-sized segments), +1 forces the tiled kernels, −1 the
	// one-row-per-block kernels (tests run both).
	attnTiles int
}

// buffer is one device allocation; tensors and views point at it, and its
// finalizer returns the block to the allocator's cache.
type buffer struct {
	ptr    uint64
	size   int64 // bytes reserved
	elems  int   // elements usable
	bf16   bool  // 2-byte bf16 elements: frozen weights or a KV cache
	frozen bool  // read-only (Freeze); otherwise writable by ScatterRows and Copy
	a      *allocator
}

// NewBackend returns a backend on d whose matrix products use prec.
func NewBackend(d *Device, prec Precision) *Backend {
	return &Backend{d: d, compute: computeTypes[prec], prec: prec, ints: map[uint64]*buffer{}}
}

// Name identifies the backend and its matmul precision in logs.
func (b *Backend) Name() string { return "cuda/" + string(b.prec) }

// Device returns the GPU the backend runs on.
func (b *Backend) Device() *Device { return b.d }

// Err returns the first recorded error, after waiting for issued work so
// that faults inside kernels surface here.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil {
		if err := b.d.Synchronize(); err != nil {
			b.err = err
		}
	}
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

// allocBytes reserves n elements of the given width.
func (b *Backend) allocBytes(n, width int) (*buffer, error) {
	p, size, err := b.d.alloc.get(int64(n) * int64(width))
	if err != nil {
		return nil, err
	}
	buf := &buffer{ptr: p, size: size, elems: n, bf16: width == 2, a: b.d.alloc}
	runtime.SetFinalizer(buf, func(x *buffer) { x.a.put(x.ptr, x.size) })
	return buf, nil
}

// New allocates a zero-filled tensor.
func (b *Backend) New(shape ...int) *model.Tensor {
	n := 1
	for _, d := range shape {
		if d < 0 {
			b.keep(fmt.Errorf("new: negative dimension in %v", shape))
			return &model.Tensor{Shape: make([]int, len(shape)), Store: &buffer{}}
		}
		n *= d
	}
	t := &model.Tensor{Shape: append([]int(nil), shape...)}
	buf, err := b.alloc(n)
	if !b.keep(err) {
		t.Store = &buffer{}
		return t
	}
	t.Store = buf
	b.keep(b.d.drv.MemsetD32(buf.ptr, 0, int64(n)))
	return t
}

// ptrs validates that every tensor lives in this backend's memory and
// returns their device addresses (0 for nil tensors when allowed by the
// caller passing them as optional).
func (b *Backend) ptrs(op string, ts ...*model.Tensor) ([]uint64, bool) {
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
func (b *Backend) Freeze(t *model.Tensor) error {
	p, ok := b.ptrs("freeze", t)
	if !ok {
		return b.Err()
	}
	n := t.Numel()
	buf, err := b.allocBytes(n, 2)
	if err != nil {
		return fmt.Errorf("freeze %v: %w", t.Shape, err)
	}
	b.elementwise("f32_to_bf16", n, buf.ptr, p[0], int64(n))
	buf.frozen = true
	t.Store, t.Off = buf, 0
	return b.Err()
}

// NewHalf allocates a zero-filled bf16 tensor that ScatterRows writes
// (rounding) and Attention, Copy and Download read: the KV cache at half
// the memory and half the decode bandwidth.
func (b *Backend) NewHalf(shape ...int) *model.Tensor {
	n := 1
	for _, d := range shape {
		n *= max(d, 0)
	}
	t := &model.Tensor{Shape: append([]int(nil), shape...)}
	buf, err := b.allocBytes(n, 2)
	if !b.keep(err) {
		t.Store = &buffer{}
		return t
	}
	t.Store = buf
	b.keep(b.d.drv.MemsetD32(buf.ptr, 0, int64((n+1)/2))) // allocations are rounded up to 512 bytes
	return t
}

var _ model.HalfStore = (*Backend)(nil)

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
		b.keep(b.d.drv.HtoD(p[0], unsafe.Pointer(&src[0]), int64(len(src))*4))
	}
}

// Download copies t into host memory (frozen bf16 tensors widened).
func (b *Backend) Download(t *model.Tensor, dst []float32) {
	if !b.ok() {
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
		defer runtime.KeepAlive(wide)
	}
	b.keep(b.d.drv.DtoH(unsafe.Pointer(&dst[0]), p, int64(len(dst))*4))
}

// Zero sets t to 0.
func (b *Backend) Zero(t *model.Tensor) {
	if p, ok := b.ptrs("zero", t); ok && t.Numel() > 0 {
		b.keep(b.d.drv.MemsetD32(p[0], 0, int64(t.Numel())))
	}
}

// Copy overwrites dst with src (both float32, or both bf16 as when a KV
// cache slot is copied).
func (b *Backend) Copy(dst, src *model.Tensor) {
	if !b.ok() {
		return
	}
	pd, hd, ok1 := b.operand("copy", 0, dst)
	ps, hs, ok2 := b.operand("copy", 1, src)
	if !ok1 || !ok2 || !b.keep(model.SizeCheck("copy", dst, src)) || dst.Numel() == 0 {
		return
	}
	if hd != hs || (hd && dst.Store.(*buffer).frozen) {
		b.keep(fmt.Errorf("copy: storages differ (bf16 %v → %v) or the destination is frozen", hs, hd))
		return
	}
	width := int64(4)
	if hd {
		width = 2
	}
	b.keep(b.d.drv.DtoD(pd, ps, int64(dst.Numel())*width))
}

// Add accumulates dst += src.
func (b *Backend) Add(dst, src *model.Tensor) {
	p, ok := b.ptrs("add", dst, src)
	if ok && b.keep(model.SizeCheck("add", dst, src)) {
		b.elementwise("add_f32", dst.Numel(), p[0], p[1], int64(dst.Numel()))
	}
}

// Scale multiplies t by s.
func (b *Backend) Scale(t *model.Tensor, s float32) {
	if p, ok := b.ptrs("scale", t); ok {
		b.elementwise("scale_f32", t.Numel(), p[0], s, int64(t.Numel()))
	}
}

// SumSquares returns Σ t², accumulated in float64.
func (b *Backend) SumSquares(t *model.Tensor) float64 {
	p, ok := b.ptrs("sumsquares", t)
	n := t.Numel()
	if !ok || n == 0 {
		return 0
	}
	blocks := min((n+255)/256, 1024)
	part, err := b.alloc(2 * blocks) // float64 partials
	if !b.keep(err) {
		return 0
	}
	b.launch("sumsq_partial", [3]int{blocks}, 256, part.ptr, p[0], int64(n))
	host := make([]float64, blocks)
	if !b.keep(b.d.drv.DtoH(unsafe.Pointer(&host[0]), part.ptr, int64(blocks)*8)) {
		return 0
	}
	runtime.KeepAlive(part)
	var s float64
	for _, v := range host {
		s += v
	}
	return s
}

// MatMul computes c = op(a)·op(b) or c += op(a)·op(b) with cuBLAS. Row-major
// c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ, so b goes first. A
// frozen (bf16) operand is multiplied in bf16 with the other operand
// rounded to bf16 too (cuBLAS wants equal input types), accumulating in fp32.
func (b *Backend) MatMul(c, a, bm *model.Tensor, transA, transB, accumulate bool) {
	pc, ok := b.ptrs("matmul", c)
	if !ok {
		return
	}
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
	inType, compute := cudaR32F, b.compute
	if frozenA || frozenB {
		inType, compute = cudaR16BF, computeTypes[FP32]
		var keep []*buffer
		if pa, ok = b.narrow(pa, a.Numel(), frozenA, &keep); !ok {
			return
		}
		if pb, ok = b.narrow(pb, bm.Numel(), frozenB, &keep); !ok {
			return
		}
		defer runtime.KeepAlive(keep)
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
	b.keep(b.d.blas.Gemm(transB, transA, N, M, K, 1, pb, inType, ldb, pa, inType, lda,
		beta, pc[0], cudaR32F, N, compute))
}

// narrow returns a bf16 copy of an fp32 operand (or the frozen operand
// itself); the copy is appended to keep so it outlives the product.
func (b *Backend) narrow(p uint64, n int, frozen bool, keep *[]*buffer) (uint64, bool) {
	if frozen {
		return p, true
	}
	buf, err := b.allocBytes(n, 2)
	if !b.keep(err) {
		return 0, false
	}
	b.elementwise("f32_to_bf16", n, buf.ptr, p, int64(n))
	*keep = append(*keep, buf)
	return buf.ptr, true
}

// intKey hashes an index table's purpose and content.
func intKey(kind string, vals ...[]int32) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	var buf [4]byte
	for _, v := range vals {
		binary.LittleEndian.PutUint32(buf[:], uint32(len(v)))
		h.Write(buf[:])
		if len(v) > 0 {
			h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*4))
		}
	}
	return h.Sum64()
}

// upload copies int32 tables to the device, reusing an earlier upload of
// the same content (every layer of a pass indexes with the same tables).
// It returns one address per table (0 for empty tables).
func (b *Backend) upload(kind string, tables ...[]int32) ([]uint64, bool) {
	key := intKey(kind, tables...)
	total := 0
	for _, t := range tables {
		total += len(t)
	}
	b.cacheMu.Lock()
	buf := b.ints[key]
	b.cacheMu.Unlock()
	if buf == nil {
		var err error
		if buf, err = b.alloc(max(total, 1)); !b.keep(err) {
			return nil, false
		}
		flat := make([]int32, 0, total)
		for _, t := range tables {
			flat = append(flat, t...)
		}
		if total > 0 && !b.keep(b.d.drv.HtoD(buf.ptr, unsafe.Pointer(&flat[0]), int64(total)*4)) {
			return nil, false
		}
		b.cacheMu.Lock()
		if len(b.ints) >= 64 {
			clear(b.ints) // the buffers return to the allocator when unreachable
		}
		b.ints[key] = buf
		b.cacheMu.Unlock()
	}
	out := make([]uint64, len(tables))
	off := 0
	for i, t := range tables {
		if len(t) > 0 {
			out[i] = buf.ptr + uint64(off)*4
		}
		off += len(t)
	}
	return out, true
}

// copyRows launches copy_rows: dst[dstIdx[k]] = src[srcIdx[k]], nil index
// tables meaning the identity.
func (b *Backend) copyRows(dst, src uint64, dstIdx, srcIdx []int32, n, C int) {
	if n == 0 || C == 0 {
		return
	}
	var tables [][]int32
	if dstIdx != nil {
		tables = append(tables, dstIdx)
	}
	if srcIdx != nil {
		tables = append(tables, srcIdx)
	}
	addr, ok := b.upload("copy_rows", tables...)
	if !ok {
		return
	}
	var dp, sp uint64
	if dstIdx != nil {
		dp, addr = addr[0], addr[1:]
	}
	if srcIdx != nil {
		sp = addr[0]
	}
	b.launch("copy_rows", [3]int{n, (C + 255) / 256}, 256, dst, src, dp, sp, int32(n), int32(C))
}

// accumulateRows adds src rows idx[i] into dst rows at[i], grouped by
// destination so each destination sums its rows in index order, as the CPU
// loop does — deterministic without atomics.
func (b *Backend) accumulateRows(dst, src uint64, at []int32, C int) {
	if len(at) == 0 || C == 0 {
		return
	}
	groups := map[int32][]int32{}
	var order []int32
	for i, r := range at {
		if _, seen := groups[r]; !seen {
			order = append(order, r)
		}
		groups[r] = append(groups[r], int32(i))
	}
	offsets := make([]int32, 0, len(order)+1)
	srcIdx := make([]int32, 0, len(at))
	for _, r := range order {
		offsets = append(offsets, int32(len(srcIdx)))
		srcIdx = append(srcIdx, groups[r]...)
	}
	offsets = append(offsets, int32(len(srcIdx)))
	addr, ok := b.upload("accumulate_rows", order, offsets, srcIdx)
	if !ok {
		return
	}
	b.launch("accumulate_rows", [3]int{len(order), (C + 255) / 256}, 256, dst, src, addr[0], addr[1], addr[2],
		int32(len(order)), int32(C))
}

// Embedding overwrites out rows with table rows ids (a frozen table is
// widened from bf16 on the fly).
func (b *Backend) Embedding(out, table *model.Tensor, ids []int32) {
	p, ok := b.ptrs("embedding", out)
	if !ok {
		return
	}
	pt, frozen, ok := b.operand("embedding", 1, table)
	if !ok {
		return
	}
	C, err := model.EmbeddingDims("embedding", out, table, ids)
	if !b.keep(err) || len(ids) == 0 || C == 0 {
		return
	}
	if !frozen {
		b.copyRows(p[0], pt, nil, ids, len(ids), C)
		return
	}
	addr, ok := b.upload("copy_rows", ids)
	if ok {
		b.launch("copy_rows_bf16", [3]int{len(ids), (C + 255) / 256}, 256, p[0], pt, addr[0], int32(len(ids)), int32(C))
	}
}

// EmbeddingBackward accumulates dtable[ids[i]] += dout[i].
func (b *Backend) EmbeddingBackward(dtable, dout *model.Tensor, ids []int32) {
	p, ok := b.ptrs("embedding backward", dtable, dout)
	if !ok {
		return
	}
	C, err := model.EmbeddingDims("embedding backward", dout, dtable, ids)
	if b.keep(err) {
		b.accumulateRows(p[0], p[1], ids, C)
	}
}

// GatherRows overwrites dst[i] = src[idx[i]].
func (b *Backend) GatherRows(dst, src *model.Tensor, idx []int32) {
	p, ok := b.ptrs("gather rows", dst, src)
	if !ok {
		return
	}
	w, err := model.RowsDims("gather rows", src, dst, idx)
	if b.keep(err) {
		b.copyRows(p[0], p[1], nil, idx, len(idx), w)
	}
}

// ScatterRows writes (or accumulates) dst[idx[i]] = src[i]. Plain writes to
// a repeated row keep the last one, as the sequential CPU loop does.
func (b *Backend) ScatterRows(dst, src *model.Tensor, idx []int32, accumulate bool) {
	if !b.ok() {
		return
	}
	pd, half, ok := b.operand("scatter rows", 0, dst)
	if !ok {
		return
	}
	ps, ok := b.ptrs("scatter rows", src)
	if !ok {
		return
	}
	p := []uint64{pd, ps[0]}
	w, err := model.RowsDims("scatter rows", dst, src, idx)
	if !b.keep(err) {
		return
	}
	if half && (accumulate || dst.Store.(*buffer).frozen) {
		b.keep(fmt.Errorf("scatter rows: bf16 destination %v takes plain writes only", dst.Shape))
		return
	}
	if accumulate {
		b.accumulateRows(p[0], p[1], idx, w)
		return
	}
	last := map[int32]int32{}
	for i, r := range idx {
		last[r] = int32(i)
	}
	rows := make([]int32, 0, len(last))
	for r := range last {
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i] < rows[j] })
	from := make([]int32, len(rows))
	for i, r := range rows {
		from[i] = last[r]
	}
	if !half {
		b.copyRows(p[0], p[1], rows, from, len(rows), w)
		return
	}
	// Gather the chosen source rows into a compact buffer, then round them
	// into their cache rows.
	if len(rows) == 0 || w == 0 {
		return
	}
	picked, err := b.alloc(len(rows) * w)
	if !b.keep(err) {
		return
	}
	b.copyRows(picked.ptr, p[1], nil, from, len(rows), w)
	addr, ok := b.upload("scatter rows", rows)
	if ok {
		b.launch("scatter_rows_bf16", [3]int{len(rows), (w + 255) / 256}, 256, p[0], picked.ptr, addr[0], int32(len(rows)), int32(w))
	}
	runtime.KeepAlive(picked)
}

// rowBlock is the thread count of one-block-per-row kernels.
const rowBlock = 256

// RMSNorm normalizes rows of x over the last dimension.
func (b *Backend) RMSNorm(out, rstd, x, w *model.Tensor, eps float32) {
	p, ok := b.ptrs("rmsnorm", out, x, w)
	if !ok {
		return
	}
	rs, ok := b.opt("rmsnorm", rstd)
	if !ok {
		return
	}
	R, n, err := model.RMSNormDims(out, rstd, x, w)
	if b.keep(err) && R > 0 {
		b.launch("rmsnorm_fwd", [3]int{R}, rowBlock, p[0], rs, p[1], p[2], int32(n), eps)
	}
}

// RMSNormBackward overwrites dx and accumulates dw. dw's column sums are
// taken over fixed chunks of rows and the chunks added in order
// (deterministic, no atomics).
func (b *Backend) RMSNormBackward(dx, dw, dout, x, w, rstd *model.Tensor) {
	p, ok := b.ptrs("rmsnorm backward", dx, dw, dout, x, w, rstd)
	if !ok {
		return
	}
	R, n, err := model.RMSNormBackwardDims(dx, dw, dout, x, w, rstd)
	if !b.keep(err) || R == 0 || n == 0 {
		return
	}
	b.launch("rmsnorm_bwd_dx", [3]int{R}, rowBlock, p[0], p[2], p[3], p[4], p[5], int32(n))
	perChunk := max(64, (R+65534)/65535)
	chunks := (R + perChunk - 1) / perChunk
	part, err := b.alloc(chunks * n)
	if !b.keep(err) {
		return
	}
	cols := (n + 255) / 256
	b.launch("rmsnorm_bwd_dw_partial", [3]int{cols, chunks}, 256, part.ptr, p[2], p[3], p[5], int32(R), int32(n), int32(perChunk))
	b.launch("sum_chunks", [3]int{cols}, 256, p[1], part.ptr, int32(chunks), int32(n))
	runtime.KeepAlive(part)
}

// ropeTable holds cos/sin of pos·theta^(−2i/D) for positions [0, maxPos),
// computed in float64 on the host like the CPU reference.
type ropeTable struct {
	theta    float64
	D        int
	maxPos   int
	cos, sin *buffer
}

// ropeTables returns tables covering position maxPos−1, growing them to the
// next power of two so a generation does not rebuild them every token.
func (b *Backend) ropeTables(theta float64, D, maxPos int) (*ropeTable, bool) {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	t := &b.rope
	if t.cos != nil && t.theta == theta && t.D == D && t.maxPos >= maxPos {
		return t, true
	}
	size := 1024
	for size < maxPos {
		size *= 2
	}
	half := D / 2
	cosH, sinH := make([]float32, size*half), make([]float32, size*half)
	for i := 0; i < half; i++ {
		inv := math.Pow(theta, -2*float64(i)/float64(D))
		for p := 0; p < size; p++ {
			ang := float64(p) * inv
			cosH[p*half+i], sinH[p*half+i] = float32(math.Cos(ang)), float32(math.Sin(ang))
		}
	}
	c, err := b.alloc(len(cosH))
	if !b.keep(err) {
		return nil, false
	}
	s, err := b.alloc(len(sinH))
	if !b.keep(err) {
		return nil, false
	}
	if !b.keep(b.d.drv.HtoD(c.ptr, unsafe.Pointer(&cosH[0]), int64(len(cosH))*4)) ||
		!b.keep(b.d.drv.HtoD(s.ptr, unsafe.Pointer(&sinH[0]), int64(len(sinH))*4)) {
		return nil, false
	}
	*t = ropeTable{theta: theta, D: D, maxPos: size, cos: c, sin: s}
	return t, true
}

// RoPE rotates pairs (i, i+D/2) of every head by pos·theta^(−2i/D).
func (b *Backend) RoPE(x *model.Tensor, pos []int32, theta float64, inverse bool) {
	p, ok := b.ptrs("rope", x)
	if !ok {
		return
	}
	N, H, D, err := model.RoPEDims(x, pos)
	if !b.keep(err) || N == 0 || H == 0 || D == 0 {
		return
	}
	maxPos := int32(0)
	for i, v := range pos {
		if v < 0 {
			b.keep(fmt.Errorf("rope: negative position %d at row %d", v, i))
			return
		}
		maxPos = max(maxPos, v)
	}
	tab, ok := b.ropeTables(theta, D, int(maxPos)+1)
	if !ok {
		return
	}
	addr, ok := b.upload("rope", pos)
	if !ok {
		return
	}
	sign := float32(1)
	if inverse {
		sign = -1
	}
	b.elementwise("rope", N*H*D/2, p[0], addr[0], tab.cos.ptr, tab.sin.ptr, int32(N), int32(H), int32(D), sign)
}

// attRows flattens segments into the per-query-row tables attn kernels read.
func attRows(segs []model.Segment) (qRow, kStart, kCount []int32) {
	for _, s := range segs {
		for i := 0; i < s.QLen; i++ {
			qRow = append(qRow, int32(s.Q0+i))
			kStart = append(kStart, int32(s.K0))
			kCount = append(kCount, int32(s.KLen-s.QLen+i+1))
		}
	}
	return
}

// keyRows flattens segments into per-key-row tables: key row kRow[r] is
// seen by query rows qStart[r] … qStart[r]+qCount[r]−1. A key row in two
// segments would need its sums merged; the model never does that, so it is
// refused.
func keyRows(segs []model.Segment, nk int) (kRow, qStart, qCount []int32, err error) {
	owner := make([]int32, nk)
	for si, s := range segs {
		off := s.KLen - s.QLen
		for j := 0; j < s.KLen; j++ {
			kr := s.K0 + j
			if owner[kr] != 0 {
				return nil, nil, nil, fmt.Errorf("attention backward: segments %d and %d share key row %d (unsupported on cuda)", owner[kr]-1, si, kr)
			}
			owner[kr] = int32(si + 1)
			i0 := max(0, j-off)
			if i0 < s.QLen {
				kRow = append(kRow, int32(kr))
				qStart = append(qStart, int32(s.Q0+i0))
				qCount = append(qCount, int32(s.QLen-i0))
			}
		}
	}
	return
}

const (
	attThreads = 128 // ATT_THREADS in attention.cu
	attTile    = 32  // TQ, TK in attention_tiled.cu
)

// useTiles reports whether the tiled attention kernels serve this call:
// D within their register budget and segments long enough that a tile of
// 32 query rows is mostly full (training, prefill), not decode.
func (b *Backend) useTiles(D int, segs []model.Segment, rows int) bool {
	if D > 128 || D%4 != 0 || b.attnTiles < 0 {
		return false
	}
	return b.attnTiles > 0 || rows >= 16*len(segs)
}

// queryTiles splits each segment's query rows into tiles of attTile rows.
func queryTiles(segs []model.Segment) (qRow0, qCount, kStart, kFirst []int32) {
	for _, s := range segs {
		for i0 := 0; i0 < s.QLen; i0 += attTile {
			qRow0 = append(qRow0, int32(s.Q0+i0))
			qCount = append(qCount, int32(min(attTile, s.QLen-i0)))
			kStart = append(kStart, int32(s.K0))
			kFirst = append(kFirst, int32(s.KLen-s.QLen+i0+1))
		}
	}
	return
}

// keyTiles splits each segment's key rows into tiles of attTile rows.
func keyTiles(segs []model.Segment) (kRow0, kCount, j0, segQ0, segQLen, segOff []int32) {
	for _, s := range segs {
		for j := 0; j < s.KLen; j += attTile {
			kRow0 = append(kRow0, int32(s.K0+j))
			kCount = append(kCount, int32(min(attTile, s.KLen-j)))
			j0 = append(j0, int32(j))
			segQ0 = append(segQ0, int32(s.Q0))
			segQLen = append(segQLen, int32(s.QLen))
			segOff = append(segOff, int32(s.KLen-s.QLen))
		}
	}
	return
}

func (b *Backend) attentionDims(op string, out, q, k, v *model.Tensor, segs []model.Segment) (H, G, D int, ok bool) {
	H, G, D, err := model.AttentionDims(op, out, q, k, v, segs)
	if !b.keep(err) {
		return 0, 0, 0, false
	}
	if D > 2*attThreads {
		b.keep(fmt.Errorf("%s: head dim %d above the kernel's %d", op, D, 2*attThreads))
		return 0, 0, 0, false
	}
	return H, G, D, true
}

// Attention computes causal GQA attention per segment.
func (b *Backend) Attention(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	if !b.ok() {
		return
	}
	pk, hk, ok1 := b.operand("attention", 2, k)
	pv, hv, ok2 := b.operand("attention", 3, v)
	if !ok1 || !ok2 {
		return
	}
	if hk != hv {
		b.keep(fmt.Errorf("attention: k and v storages differ (bf16 %v, %v)", hk, hv))
		return
	}
	pq, ok := b.ptrs("attention", out, q)
	if !ok {
		return
	}
	p := []uint64{pq[0], pq[1], pk, pv}
	suffix := ""
	if hk {
		suffix = "_kvh" // a bf16 KV cache
	}
	lp, ok := b.opt("attention", lse)
	if !ok {
		return
	}
	H, G, D, ok := b.attentionDims("attention", out, q, k, v, segs)
	if !ok {
		return
	}
	if lse != nil && lse.Numel() != q.Shape[0]*H {
		b.keep(fmt.Errorf("attention: lse %v must hold (%d, %d)", lse.Shape, q.Shape[0], H))
		return
	}
	qRow, kStart, kCount := attRows(segs)
	if len(qRow) == 0 {
		return
	}
	if b.useTiles(D, segs, len(qRow)) {
		t0, tn, ks, kf := queryTiles(segs)
		tiles, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if ok {
			b.launch("attn_fwd_tiled"+suffix, [3]int{len(t0), H}, attThreads, p[0], lp, p[1], p[2], p[3],
				tiles[0], tiles[1], tiles[2], tiles[3], int32(H), int32(G), int32(D), scale)
		}
		return
	}
	addr, ok := b.upload("attention rows", qRow, kStart, kCount)
	if !ok {
		return
	}
	b.launch("attn_fwd"+suffix, [3]int{len(qRow), H}, attThreads, p[0], lp, p[1], p[2], p[3], addr[0], addr[1], addr[2],
		int32(H), int32(G), int32(D), scale)
}

// AttentionBackward overwrites dq, dk, dv, recomputing probabilities from
// the saved log-sum-exp.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse *model.Tensor, segs []model.Segment, scale float32) {
	p, ok := b.ptrs("attention backward", dq, dk, dv, dout, q, k, v, out, lse)
	if !ok {
		return
	}
	H, G, D, ok := b.attentionDims("attention backward", out, q, k, v, segs)
	if !ok {
		return
	}
	if !b.keep(model.SizeCheck("attention backward", dq, q, dout)) || !b.keep(model.SizeCheck("attention backward", dk, k, dv)) {
		return
	}
	if lse.Numel() != q.Shape[0]*H {
		b.keep(fmt.Errorf("attention backward: lse %v must hold (%d, %d)", lse.Shape, q.Shape[0], H))
		return
	}
	kRow, qStart, qCount, err := keyRows(segs, k.Shape[0])
	if !b.keep(err) {
		return
	}
	b.Zero(dq)
	b.Zero(dk)
	b.Zero(dv)
	qRow, kStart, kCount := attRows(segs)
	if len(qRow) == 0 {
		return
	}
	delta, err := b.alloc(q.Shape[0] * H)
	if !b.keep(err) {
		return
	}
	b.launch("attn_delta", [3]int{q.Shape[0] * H}, 128, delta.ptr, p[3], p[7], int32(D))
	if b.useTiles(D, segs, len(qRow)) {
		t0, tn, ks, kf := queryTiles(segs)
		qt, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if !ok {
			return
		}
		b.launch("attn_bwd_dq_tiled", [3]int{len(t0), H}, attThreads, p[0], p[3], p[4], p[5], p[6], p[8], delta.ptr,
			qt[0], qt[1], qt[2], qt[3], int32(H), int32(G), int32(D), scale)
		k0, kn, j0, sq, sl, so := keyTiles(segs)
		kt, ok := b.upload("attention key tiles", k0, kn, j0, sq, sl, so)
		if !ok {
			return
		}
		b.launch("attn_bwd_dkv_tiled", [3]int{len(k0), G}, attThreads, p[1], p[2], p[3], p[4], p[5], p[6], p[8], delta.ptr,
			kt[0], kt[1], kt[2], kt[3], kt[4], kt[5], int32(H), int32(G), int32(D), scale)
		runtime.KeepAlive(delta)
		return
	}
	rows, ok := b.upload("attention rows", qRow, kStart, kCount)
	if !ok {
		return
	}
	b.launch("attn_bwd_dq", [3]int{len(qRow), H}, attThreads, p[0], p[3], p[4], p[5], p[6], p[8], delta.ptr,
		rows[0], rows[1], rows[2], int32(H), int32(G), int32(D), scale)
	if len(kRow) > 0 {
		keys, ok := b.upload("attention keys", kRow, qStart, qCount)
		if !ok {
			return
		}
		b.launch("attn_bwd_dkv", [3]int{len(kRow), G}, attThreads, p[1], p[2], p[3], p[4], p[5], p[6], p[8], delta.ptr,
			keys[0], keys[1], keys[2], int32(H), int32(G), int32(D), scale)
	}
	runtime.KeepAlive(delta)
}

// SwiGLU computes silu(gate) ⊙ up.
func (b *Backend) SwiGLU(out, gate, up *model.Tensor) {
	p, ok := b.ptrs("swiglu", out, gate, up)
	if ok && b.keep(model.SizeCheck("swiglu", out, gate, up)) {
		b.elementwise("swiglu_fwd", out.Numel(), p[0], p[1], p[2], int64(out.Numel()))
	}
}

// SwiGLUBackward overwrites dgate and dup.
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up *model.Tensor) {
	p, ok := b.ptrs("swiglu backward", dgate, dup, dout, gate, up)
	if ok && b.keep(model.SizeCheck("swiglu backward", dgate, dup, dout, gate, up)) {
		b.elementwise("swiglu_bwd", gate.Numel(), p[0], p[1], p[2], p[3], p[4], int64(gate.Numel()))
	}
}

// LogSoftmaxGather computes target log-probabilities, log-sum-exp and entropy.
func (b *Backend) LogSoftmaxGather(logp, lse, entropy, logits *model.Tensor, targets []int32) {
	p, ok := b.ptrs("logsoftmax gather", logp, lse, logits)
	if !ok {
		return
	}
	ep, ok := b.opt("logsoftmax gather", entropy)
	if !ok {
		return
	}
	M, V, err := model.LSGDims("logsoftmax gather", logits, targets, logp, lse, entropy)
	if !b.keep(err) || M == 0 {
		return
	}
	addr, ok := b.upload("targets", targets)
	if ok {
		b.launch("lsg_fwd", [3]int{M}, rowBlock, p[0], p[1], ep, p[2], addr[0], int32(V))
	}
}

// LogSoftmaxGatherBackward overwrites dlogits = dlogp·(onehot − softmax).
func (b *Backend) LogSoftmaxGatherBackward(dlogits, dlogp, logits, lse *model.Tensor, targets []int32) {
	p, ok := b.ptrs("logsoftmax gather backward", dlogits, dlogp, logits, lse)
	if !ok || !b.keep(model.SizeCheck("logsoftmax gather backward", dlogits, logits)) {
		return
	}
	M, V, err := model.LSGDims("logsoftmax gather backward", logits, targets, dlogp, lse)
	if !b.keep(err) || M == 0 || V == 0 {
		return
	}
	addr, ok := b.upload("targets", targets)
	if ok {
		b.launch("lsg_bwd", [3]int{M, (V + 255) / 256}, 256, p[0], p[1], p[2], p[3], addr[0], int32(V))
	}
}

// AdamW applies one decoupled-weight-decay Adam step in float64 arithmetic.
func (b *Backend) AdamW(p, g, m, v *model.Tensor, h model.AdamWParams) {
	ps, ok := b.ptrs("adamw", p, g, m, v)
	if !ok || !b.keep(model.AdamWCheck(p, g, m, v, h)) {
		return
	}
	bc1 := 1 - math.Pow(h.Beta1, float64(h.Step))
	bc2 := 1 - math.Pow(h.Beta2, float64(h.Step))
	b.elementwise("adamw", p.Numel(), ps[0], ps[1], ps[2], ps[3], int64(p.Numel()),
		h.Beta1, h.Beta2, h.LR, h.WeightDecay, h.Eps, bc1, bc2)
}

var _ model.Backend = (*Backend)(nil)

// TopK returns each row's k largest logits (descending, ties by lower id)
// and their ids; the sampler's top-k and greedy paths download only these.
func (b *Backend) TopK(logits *model.Tensor, k int) ([][]int32, [][]float32) {
	p, ok := b.ptrs("topk", logits)
	if !ok {
		return nil, nil
	}
	R, V := model.Matrix(logits)
	if k < 1 || k > V {
		b.keep(fmt.Errorf("topk: k = %d for rows of %d", k, V))
		return nil, nil
	}
	ids, err := b.alloc(R * k)
	if !b.keep(err) {
		return nil, nil
	}
	vals, err := b.alloc(R * k)
	if !b.keep(err) {
		return nil, nil
	}
	b.launch("topk_rows", [3]int{R}, 256, ids.ptr, vals.ptr, p[0], int32(V), int32(k))
	hostIDs, hostVals := make([]int32, R*k), make([]float32, R*k)
	if R*k > 0 {
		b.keep(b.d.drv.DtoH(unsafe.Pointer(&hostIDs[0]), ids.ptr, int64(R*k)*4))
		b.keep(b.d.drv.DtoH(unsafe.Pointer(&hostVals[0]), vals.ptr, int64(R*k)*4))
	}
	runtime.KeepAlive(ids)
	runtime.KeepAlive(vals)
	outIDs, outVals := make([][]int32, R), make([][]float32, R)
	for r := range outIDs {
		outIDs[r], outVals[r] = hostIDs[r*k:(r+1)*k], hostVals[r*k:(r+1)*k]
	}
	return outIDs, outVals
}

// ChunkSums returns each row's max of logits/temperature and the float64
// sums of exp(logit/temperature − max) over consecutive chunks of ids.
func (b *Backend) ChunkSums(logits *model.Tensor, temperature float64, chunk int) ([]float64, [][]float64) {
	p, ok := b.ptrs("chunk sums", logits)
	if !ok {
		return nil, nil
	}
	R, V := model.Matrix(logits)
	if chunk < 1 || temperature <= 0 {
		b.keep(fmt.Errorf("chunk sums: chunk %d, temperature %g", chunk, temperature))
		return nil, nil
	}
	chunks := (V + chunk - 1) / chunk
	mx, err := b.allocBytes(R, 8)
	if !b.keep(err) {
		return nil, nil
	}
	sums, err := b.allocBytes(R*chunks, 8)
	if !b.keep(err) {
		return nil, nil
	}
	b.launch("chunk_sums", [3]int{R}, 256, mx.ptr, sums.ptr, p[0], int32(V), temperature, int32(chunk))
	hostMx, hostSums := make([]float64, R), make([]float64, R*chunks)
	if R > 0 {
		b.keep(b.d.drv.DtoH(unsafe.Pointer(&hostMx[0]), mx.ptr, int64(R)*8))
		b.keep(b.d.drv.DtoH(unsafe.Pointer(&hostSums[0]), sums.ptr, int64(R*chunks)*8))
	}
	runtime.KeepAlive(mx)
	runtime.KeepAlive(sums)
	out := make([][]float64, R)
	for r := range out {
		out[r] = hostSums[r*chunks : (r+1)*chunks]
	}
	return hostMx, out
}

var _ model.RowSampler = (*Backend)(nil)
