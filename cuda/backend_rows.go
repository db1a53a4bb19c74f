package cuda

// Row ops: embeddings, gathers and scatters, and the index tables they
// upload (cached by content, since every layer of a pass uses the same ones).

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

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

// intArena holds the index tables ops upload (row ids, positions,
// attention segments) in one device buffer, by content: every layer of a
// pass indexes with the same tables, so each is copied once per pass. When
// a table does not fit in what is left, the arena starts over from its
// beginning (forgetting every table), and grows only for a table larger
// than all of it, so after a first step its size is fixed and uploads
// allocate nothing. Starting over is safe because each op launches its
// kernels right after its upload: every kernel reading an old table is
// issued, hence runs, before the copy that overwrites it.
type intArena struct {
	buf     *buffer
	used    int            // elements handed out since the last start-over
	offsets map[uint64]int // table set (content hash) → element offset
}

// arenaMinElems is the arena's first size (4 MiB).
const arenaMinElems = 1 << 20

// upload copies int32 tables to the device, reusing an earlier upload of
// the same content. It returns one address per table (0 for empty tables),
// valid until the next upload.
func (b *Backend) upload(kind string, tables ...[]int32) ([]uint64, bool) {
	if b.gr != nil {
		if addr, done, ok := b.graphUpload(tables); done {
			return addr, ok
		}
	}
	key := intKey(kind, tables...)
	total := 0
	for _, t := range tables {
		total += len(t)
	}
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	a := &b.ints
	off, hit := a.offsets[key]
	if !hit {
		need := (max(total, 1) + 63) / 64 * 64 // 256-byte aligned slices
		if a.buf == nil || need > a.buf.elems {
			b.free(a.buf)
			grown := arenaMinElems
			if a.buf != nil {
				grown = 2 * a.buf.elems
			}
			buf, err := b.allocFrom(b.d.alloc, max(need, grown), 4) // the main pool, even in a graph's eager run
			if !b.keep(err) {
				a.buf = nil
				return nil, false
			}
			a.buf, a.used, a.offsets = buf, 0, map[uint64]int{}
		}
		if a.used+need > a.buf.elems {
			a.used, a.offsets = 0, map[uint64]int{}
		}
		off = a.used
		a.used += need
		if total > 0 {
			flat := make([]int32, 0, total)
			for _, t := range tables {
				flat = append(flat, t...)
			}
			if !b.keep(b.d.copyIn(a.buf.ptr+uint64(off)*4, unsafe.Pointer(&flat[0]), int64(total)*4)) {
				return nil, false
			}
		}
		a.offsets[key] = off
	}
	out := make([]uint64, len(tables))
	for i, t := range tables {
		if len(t) > 0 {
			out[i] = a.buf.ptr + uint64(off)*4
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
	b.kernelCost(0, 8*n*C)
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
	b.kernelCost(len(at)*C, 4*(len(at)+2*len(order))*C)
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
	if isKV8(dst) {
		b.scatterFP8(dst, src, idx, accumulate)
		return
	}
	pd, half, ok := b.operand("scatter rows", 0, dst)
	if !ok {
		return
	}
	markStale(dst) // rows of dst (RowsDims checks the indices)
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
	rows, from := lastWrites(idx)
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
	defer b.free(picked)
	b.copyRows(picked.ptr, p[1], nil, from, len(rows), w)
	addr, ok := b.upload("scatter rows", rows)
	if ok {
		b.launch("scatter_rows_bf16", [3]int{len(rows), (w + 255) / 256}, 256, p[0], picked.ptr, addr[0], int32(len(rows)), int32(w))
	}
}
