package cuda

// The fp8 (e4m3) KV cache (model.KVStore, precision.kv_cache fp8): a
// tensor (rows, G, D) whose rows are kernels/fp8.cuh's — G·D one-byte codes
// and G float32 scales, model.FP8KVRowBytes bytes, 1,056 at Qwen3-1.7B
// against 2,048 in bf16. ScatterRows quantises new keys and values with a
// scale per (token, head) as it writes them; the split-K decode kernel and
// the fused prefill read codes and scales directly; every other attention
// route reads an fp32 copy of the rows its segments use. Copy (a prefix
// shared by rollouts), Download and Release take the tensor as a whole row
// range; any other op refuses it.
//
// The kernels convert by hand and would run on any architecture, but the
// format is offered from compute capability 8.9 on (L40S, H100, H200),
// where NVIDIA and vLLM support fp8: an A100 keeps the measured bf16 path
// and a run asking for fp8 there is refused, naming the key, rather than
// silently given another cache (docs/gpu.md).

import (
	"fmt"
	"slices"

	"github.com/gdrotrain/gdrotrain/model"
)

// kv8Rows is the row layout of an fp8 cache buffer.
type kv8Rows struct {
	G, D     int
	rowBytes int64
}

// elems is the elements (codes) of a row.
func (l *kv8Rows) elems() int { return l.G * l.D }

// FP8KV says why a model of config c cannot have an fp8 cache on this GPU.
func (b *Backend) FP8KV(c *model.Config) error {
	info := b.d.Info
	if info.Major*10+info.Minor < 89 {
		return fmt.Errorf("precision.kv_cache fp8 needs a GPU of compute capability 8.9 or newer (L40S, H100, H200); %s is %d.%d: set precision.kv_cache to bf16", info.Name, info.Major, info.Minor)
	}
	if c.HeadDim%16 != 0 {
		return fmt.Errorf("precision.kv_cache fp8: head_dim %d is not a multiple of 16 (the kernels read 16 codes per load): set precision.kv_cache to bf16", c.HeadDim)
	}
	if per := c.NumAttentionHeads / c.NumKeyValueHeads; per > decPer {
		return fmt.Errorf("precision.kv_cache fp8: %d query heads per key/value head, the decode kernel takes at most %d: set precision.kv_cache to bf16", per, decPer)
	}
	return checkHeadDim(c.HeadDim)
}

// NewFP8 allocates a zero-filled fp8 cache tensor of shape (rows, G, D).
func (b *Backend) NewFP8(shape ...int) *model.Tensor {
	t := &model.Tensor{Shape: append([]int(nil), shape...), Store: &buffer{}}
	if len(shape) != 3 || shape[0] < 0 || shape[1] <= 0 || shape[2] <= 0 || shape[2]%16 != 0 {
		b.keep(fmt.Errorf("new fp8 kv cache %v: want (rows, kv heads, head_dim) with head_dim a multiple of 16", shape))
		return t
	}
	l := &kv8Rows{G: shape[1], D: shape[2], rowBytes: model.FP8KVRowBytes(shape[1], shape[2])}
	bytes := int64(shape[0]) * l.rowBytes
	buf, err := b.allocBytes(int(bytes), 1)
	if !b.keep(err) {
		return t
	}
	buf.elems, buf.kv8 = shape[0]*l.elems(), l
	t.Store = buf
	b.kernelCost(0, int(bytes))
	b.keep(b.d.memset32(buf.ptr, 0, bytes/4)) // rows are whole 16-byte pieces
	return t
}

// NewPagedFP8KV reserves n ranges for fp8 (rows, g, d) tensors and returns
// them and their page mapper (model.KVStore; vmm.go).
func (b *Backend) NewPagedFP8KV(n, rows, g, d int, pageBytes int64, maxPages int) ([]*model.Tensor, model.PageMapper, error) {
	if d%16 != 0 {
		return nil, nil, fmt.Errorf("paged fp8 kv: head_dim %d is not a multiple of 16", d)
	}
	l := &kv8Rows{G: g, D: d, rowBytes: model.FP8KVRowBytes(g, d)}
	return b.newPagedRanges(n, rows, g, d, int64(rows)*l.rowBytes, pageBytes, maxPages, func(buf *buffer) {
		buf.elems, buf.kv8 = rows*l.elems(), l
	})
}

// isKV8 reports whether t is an fp8 cache tensor.
func isKV8(t *model.Tensor) bool {
	if t == nil {
		return false
	}
	buf, ok := t.Store.(*buffer)
	return ok && buf.kv8 != nil
}

// kv8Operand validates an fp8 cache tensor (a whole cache or a view of
// whole rows) and returns the address of its first row and its layout.
func (b *Backend) kv8Operand(op string, i int, t *model.Tensor) (uint64, *kv8Rows, bool) {
	if !b.ok() {
		return 0, nil, false
	}
	buf, ok := t.Store.(*buffer)
	switch {
	case !ok || buf.kv8 == nil:
		b.keep(fmt.Errorf("%s: tensor argument %d %v is not an fp8 KV cache", op, i, t.Shape))
		return 0, nil, false
	case buf.released:
		b.keep(fmt.Errorf("%s: tensor argument %d %v was released", op, i, t.Shape))
		return 0, nil, false
	}
	l := buf.kv8
	if t.Off < 0 || t.Off+t.Numel() > buf.elems || t.Off%l.elems() != 0 || t.Numel()%l.elems() != 0 {
		b.keep(fmt.Errorf("%s: tensor argument %d (shape %v, offset %d) is not a range of whole rows of its fp8 cache", op, i, t.Shape, t.Off))
		return 0, nil, false
	}
	return buf.ptr + uint64(int64(t.Off/l.elems())*l.rowBytes), l, true
}

// scatterFP8 is ScatterRows into an fp8 cache: each written row is
// quantised, a scale per head (plain writes only; a repeated row keeps its
// last source row, as elsewhere).
func (b *Backend) scatterFP8(dst, src *model.Tensor, idx []int32, accumulate bool) {
	const op = "scatter rows"
	pd, l, ok := b.kv8Operand(op, 0, dst)
	if !ok {
		return
	}
	ps, ok := b.ptrs(op, src)
	if !ok {
		return
	}
	if accumulate {
		b.keep(fmt.Errorf("scatter rows: fp8 destination %v takes plain writes only", dst.Shape))
		return
	}
	if _, err := model.RowsDims(op, dst, src, idx); !b.keep(err) {
		return
	}
	rows, from := lastWrites(idx)
	if len(rows) == 0 {
		return
	}
	n := len(rows)
	// Read the fp32 rows once, write the codes and scales once.
	b.kernelCost(3*n*l.elems(), 4*n*l.elems()+int(int64(n)*l.rowBytes))
	addr, ok := b.upload("scatter rows", rows, from)
	if ok {
		b.launch("scatter_rows_fp8", [3]int{n}, 128, pd, ps[0], addr[0], addr[1], int32(n), int32(l.G), int32(l.D))
	}
}

// copyFP8 is Copy between fp8 caches of one layout (a slot's prefix).
func (b *Backend) copyFP8(dst, src *model.Tensor) {
	pd, ld, ok1 := b.kv8Operand("copy", 0, dst)
	ps, ls, ok2 := b.kv8Operand("copy", 1, src)
	if !ok1 || !ok2 || !b.keep(model.SizeCheck("copy", dst, src)) || dst.Numel() == 0 {
		return
	}
	if *ld != *ls {
		b.keep(fmt.Errorf("copy: fp8 caches of rows (%d, %d) and (%d, %d)", ld.G, ld.D, ls.G, ls.D))
		return
	}
	bytes := int64(dst.Numel()/ld.elems()) * ld.rowBytes
	b.kernelCost(0, int(2*bytes))
	b.keep(b.d.copyDevice(pd, ps, bytes))
}

// downloadFP8 is Download of an fp8 cache: codes·scale, exact in fp32.
func (b *Backend) downloadFP8(t *model.Tensor, dst []float32) {
	p, l, ok := b.kv8Operand("download", 0, t)
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
	wide, ok := b.kv8Widen(p, l, nil, t.Numel()/l.elems())
	if !ok {
		return
	}
	defer b.free(wide)
	b.download(&model.Tensor{Shape: []int{len(dst)}, Store: wide}, dst)
}

// kv8Widen returns an fp32 (n, G, D) copy of cache rows rows[0..n) (rows
// 0..n when rows is nil) of the cache at p, for the caller to free.
func (b *Backend) kv8Widen(p uint64, l *kv8Rows, rows []int32, n int) (*buffer, bool) {
	wide, err := b.alloc(n * l.elems())
	if !b.keep(err) {
		return nil, false
	}
	var table uint64
	if rows != nil {
		addr, ok := b.upload("fp8 cache rows", rows)
		if !ok {
			b.free(wide)
			return nil, false
		}
		table = addr[0]
	}
	b.kernelCost(n*l.elems(), int(int64(n)*l.rowBytes)+4*n*l.elems())
	b.launch("kv8_gather_f32", [3]int{n, l.G}, 128, wide.ptr, p, table, int32(n), int32(l.G), int32(l.D))
	return wide, true
}

// attentionFP8 is Attention over an fp8 cache with fp32 queries: the fused
// kernel for prefill-sized segments under bf16 products, the split-K
// decode kernel for decoding (always under a graph), and otherwise the
// fp32 route over a widened copy of the keys and values the segments read.
func (b *Backend) attentionFP8(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	const op = "attention"
	po, ho, ok0 := b.activation(op, 0, out)
	pq, hq, ok1 := b.activation(op, 1, q)
	pk, lk, ok2 := b.kv8Operand(op, 2, k)
	pv, lv, ok3 := b.kv8Operand(op, 3, v)
	if !ok0 || !ok1 || !ok2 || !ok3 {
		return
	}
	if ho || hq || *lk != *lv {
		b.keep(fmt.Errorf("attention over an fp8 KV cache: queries and output must be fp32 (bf16 %v, %v) and keys and values one layout", hq, ho))
		return
	}
	lp, ok := b.opt(op, lse)
	if !ok {
		return
	}
	H, G, D, ok := b.attentionDims(op, out, q, k, v, segs)
	if !ok {
		return
	}
	qRow, kStart, kCount := attRows(segs)
	if len(qRow) == 0 {
		return
	}
	a := attnCall{out: po, lse: lp, q: pq, k: pk, v: pv, segs: segs, H: H, G: G, D: D, kvBytes: float64(lk.rowBytes) / float64(G*D),
		qRows: q.Shape[0], nk: k.Shape[0], scale: scale}
	graphed := b.gr != nil
	prefill := b.useGEMMAttention(false, segs, len(qRow)) || b.useTiles(D, segs, len(qRow))
	switch {
	case !graphed && b.useFlash(D, segs, len(qRow)):
		b.attentionFlash("_kv8", a, 4)
	case D%16 == 0 && b.useDecodeSplit(D, H, G) && (graphed || !prefill):
		b.attentionDecode("_kv8", po, lp, pq, pk, pv, qRow, kStart, kCount, H, G, D, a.kvBytes, scale)
	default:
		b.attentionFP8Widened(a, lk)
	}
}

// attentionFP8Widened runs the fp32 route on fp32 copies of the key and
// value rows the segments read, packed segment after segment.
func (b *Backend) attentionFP8Widened(a attnCall, l *kv8Rows) {
	var rows []int32
	segs := make([]model.Segment, len(a.segs))
	for i, s := range a.segs {
		segs[i] = s
		segs[i].K0 = len(rows)
		for j := 0; j < s.KLen; j++ {
			rows = append(rows, int32(s.K0+j))
		}
	}
	kw, ok := b.kv8Widen(a.k, l, rows, len(rows))
	if !ok {
		return
	}
	defer b.free(kw)
	vw, ok := b.kv8Widen(a.v, l, rows, len(rows))
	if !ok {
		return
	}
	defer b.free(vw)
	a.k, a.v, a.segs, a.nk, a.kvBytes = kw.ptr, vw.ptr, segs, len(rows), 4
	b.attentionRoute(a)
}

// lastWrites lists the distinct rows of idx in increasing order and, for
// each, the position of its last occurrence: a scatter's plain writes to a
// repeated row keep the last one, as the sequential CPU loop does.
func lastWrites(idx []int32) (rows, from []int32) {
	last := map[int32]int32{}
	for i, r := range idx {
		last[r] = int32(i)
	}
	rows = make([]int32, 0, len(last))
	for r := range last {
		rows = append(rows, r)
	}
	slices.Sort(rows)
	from = make([]int32, len(rows))
	for i, r := range rows {
		from[i] = last[r]
	}
	return rows, from
}
