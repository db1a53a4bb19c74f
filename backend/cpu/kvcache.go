package cpu

// The narrow KV cache formats (model.KVFormats): a bf16 cache and an fp8
// (e4m3) one with a scale per (token, KV head), held as what they are —
// bf16 bits (2 bytes an element) and e4m3 codes with float32 scales
// (model.FP8KVRowBytes a row's worth) — so that the CPU computes, and
// stores, what the CUDA backend's cache formats do and the conformance
// suite (model/backendtest, kvcache.go) holds both to one host reference.
//
// The storage is its own type, not []float32 holding rounded values: only
// the ops the KV cache needs take it (ScatterRows, rounding or quantising
// as it writes; Attention, Copy, Download and Release), every other op
// refuses it ("not a CPU tensor"), as CUDA's refuse its bf16 and fp8
// buffers, so a write that would skip the rounding cannot happen. The
// memory is the format's, which a memory plan for precision.kv_cache bf16
// or fp8 on the CPU counts.
//
// Attention widens the key and value rows its segments read into fp32
// scratch (exact: a bf16 value or code·scale is a float32) and runs the
// fp32 attention on them, as the CUDA backend's fp32 route over an fp8
// cache does; the kernels that read bf16 or codes directly compute the
// same function within rounding. The rows are widened a bounded number at
// a time (kvWidenElems), so a decode step over many long slots never
// holds an fp32 copy of the whole cache.
//
// Paging (model.KVPager) stays CUDA's: mapping pages into a reserved
// range is a GPU driver's service, and a CPU cache keeps full storage and
// only obeys the page budget (model/kvpages.go).

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

var _ model.KVFormats = (*Backend)(nil)

// kvFormat is a cache storage format.
type kvFormat int

const (
	kvBF16 kvFormat = iota + 1
	kvFP8
)

func (f kvFormat) String() string {
	if f == kvFP8 {
		return "fp8"
	}
	return "bf16"
}

// kvStore is the storage of a narrow KV cache tensor; views share it.
type kvStore struct {
	format kvFormat
	n      int       // elements
	half   []uint16  // bf16 bits (kvBF16)
	codes  []uint8   // e4m3 codes, head g of row r at (r·G + g)·D (kvFP8)
	scales []float32 // per (row, head) (kvFP8)
	G, D   int       // row layout (kvFP8: the scales' granularity)
	// released: given back (Release); every op refuses it, views included.
	released bool
}

// NewHalf returns a zero-filled bf16 cache tensor (model.KVFormats).
func (b *Backend) NewHalf(shape ...int) *model.Tensor {
	t := &model.Tensor{Shape: append([]int(nil), shape...), Store: &kvStore{format: kvBF16}}
	n := 1
	for _, d := range shape {
		if d < 0 {
			b.Keep(fmt.Errorf("new half: negative dimension in %v", shape))
			return t
		}
		n *= d
	}
	t.Store = &kvStore{format: kvBF16, n: n, half: make([]uint16, n)}
	return t
}

// FP8KV admits every model: the CPU converts with plain loops, with no
// kernel that bounds the head dim or the query heads per key head.
func (b *Backend) FP8KV(c *model.Config) error { return nil }

// NewFP8 returns a zero-filled fp8 cache tensor of shape (rows, G, D).
func (b *Backend) NewFP8(shape ...int) *model.Tensor {
	t := &model.Tensor{Shape: append([]int(nil), shape...), Store: &kvStore{format: kvFP8}}
	if len(shape) != 3 || shape[0] < 0 || shape[1] <= 0 || shape[2] <= 0 {
		b.Keep(fmt.Errorf("new fp8 kv cache %v: want (rows, kv heads, head_dim)", shape))
		return t
	}
	rows, G, D := shape[0], shape[1], shape[2]
	t.Store = &kvStore{format: kvFP8, n: rows * G * D, G: G, D: D,
		codes: make([]uint8, rows*G*D), scales: make([]float32, rows*G)}
	return t
}

// isKV reports whether t is a narrow cache tensor.
func isKV(t *model.Tensor) bool {
	if t == nil {
		return false
	}
	_, ok := t.Store.(*kvStore)
	return ok
}

// kvOperand validates cache tensor argument i of op: not released, inside
// its storage and, for fp8, a range of whole rows (the scales are per row).
func (b *Backend) kvOperand(op string, i int, t *model.Tensor) (*kvStore, bool) {
	if b.Err() != nil {
		return nil, false
	}
	s, ok := t.Store.(*kvStore)
	switch {
	case !ok:
		b.Keep(fmt.Errorf("%s: tensor argument %d %v is not a KV cache", op, i, t.Shape))
		return nil, false
	case s.released:
		b.Keep(fmt.Errorf("%s: tensor argument %d %v was released", op, i, t.Shape))
		return nil, false
	case t.Off < 0 || t.Off+t.Numel() > s.n:
		b.Keep(fmt.Errorf("%s: tensor argument %d (shape %v, offset %d) exceeds its storage", op, i, t.Shape, t.Off))
		return nil, false
	}
	if w := s.G * s.D; s.format == kvFP8 && (t.Off%w != 0 || t.Numel()%w != 0) {
		b.Keep(fmt.Errorf("%s: tensor argument %d (shape %v, offset %d) is not a range of whole rows of its fp8 cache", op, i, t.Shape, t.Off))
		return nil, false
	}
	return s, true
}

// ScatterRows writes src's rows into a cache tensor, rounded to bf16 or
// quantised to e4m3 (a scale per row and head), as the CUDA backend does;
// other destinations take the reference's copy. Plain writes only; a
// repeated row keeps its last source row.
func (b *Backend) ScatterRows(dst, src *model.Tensor, idx []int32, accumulate bool) {
	if !isKV(dst) {
		b.ReferenceCPU.ScatterRows(dst, src, idx, accumulate)
		return
	}
	const op = "scatter rows"
	s, ok := b.kvOperand(op, 0, dst)
	if !ok || !b.Check(op, src) {
		return
	}
	if accumulate {
		b.Keep(fmt.Errorf("scatter rows: %s destination %v takes plain writes only", s.format, dst.Shape))
		return
	}
	w, err := model.RowsDims(op, dst, src, idx)
	if !b.Keep(err) {
		return
	}
	S := b.Data(src)
	if s.format == kvBF16 {
		for i, r := range idx {
			row := s.half[dst.Off+int(r)*w:][:w]
			for j, v := range S[i*w : (i+1)*w] {
				row[j] = model.F32ToBF16(v)
			}
		}
		return
	}
	if w != s.G*s.D {
		b.Keep(fmt.Errorf("scatter rows: rows of %d values into an fp8 cache of rows (%d, %d)", w, s.G, s.D))
		return
	}
	for i, r := range idx {
		row := dst.Off/w + int(r) // whole rows (kvOperand)
		for g := 0; g < s.G; g++ {
			at := (row*s.G + g) * s.D
			s.scales[row*s.G+g] = model.QuantizeE4M3(s.codes[at:at+s.D], S[(i*s.G+g)*s.D:][:s.D])
		}
	}
}

// widen writes elements [off, off+len(dst)) of s as float32: bf16 bits or
// codes·scale, both exact.
func (s *kvStore) widen(dst []float32, off int) {
	if s.format == kvBF16 {
		for i, h := range s.half[off : off+len(dst)] {
			dst[i] = model.BF16ToF32(h)
		}
		return
	}
	for k := 0; k < len(dst); k += s.D { // off and len(dst) are whole heads
		h := (off + k) / s.D
		model.DequantizeE4M3(dst[k:k+s.D], s.codes[h*s.D:(h+1)*s.D], s.scales[h])
	}
}

// Download copies t into host memory, a cache tensor widened.
func (b *Backend) Download(t *model.Tensor, dst []float32) {
	if !isKV(t) {
		b.ReferenceCPU.Download(t, dst)
		return
	}
	s, ok := b.kvOperand("download", 0, t)
	if !ok {
		return
	}
	if len(dst) != t.Numel() {
		b.Keep(fmt.Errorf("download: tensor %v into %d values", t.Shape, len(dst)))
		return
	}
	s.widen(dst, t.Off)
}

// Copy overwrites dst with src; cache tensors copy between caches of one
// format (and row layout), bits unchanged (a slot's prefix), or from a
// cache into a float32 tensor of as many elements, widened (exact mode's
// training forward hands its backward the keys and values a cache holds,
// model.Model.ExactKV).
func (b *Backend) Copy(dst, src *model.Tensor) {
	if !isKV(dst) && !isKV(src) {
		b.ReferenceCPU.Copy(dst, src)
		return
	}
	if !isKV(dst) {
		ss, ok := b.kvOperand("copy", 1, src)
		if !ok || !b.Check("copy", dst) || !b.Keep(model.SizeCheck("copy", dst, src)) {
			return
		}
		ss.widen(b.Data(dst), src.Off)
		return
	}
	sd, ok1 := b.kvOperand("copy", 0, dst)
	ss, ok2 := b.kvOperand("copy", 1, src)
	if !ok1 || !ok2 || !b.Keep(model.SizeCheck("copy", dst, src)) {
		return
	}
	if sd.format != ss.format || sd.G != ss.G || sd.D != ss.D {
		b.Keep(fmt.Errorf("copy: %s cache %v into %s cache %v: formats or rows differ", ss.format, src.Shape, sd.format, dst.Shape))
		return
	}
	n := dst.Numel()
	if sd.format == kvBF16 {
		copy(sd.half[dst.Off:dst.Off+n], ss.half[src.Off:src.Off+n])
		return
	}
	copy(sd.codes[dst.Off:dst.Off+n], ss.codes[src.Off:src.Off+n])
	copy(sd.scales[dst.Off/sd.D:(dst.Off+n)/sd.D], ss.scales[src.Off/ss.D:(src.Off+n)/ss.D])
}

// kvWidenElems bounds the fp32 key (and value) elements one round of
// attention over a narrow cache widens: 4 Mi floats, 16 MiB each.
const kvWidenElems = 4 << 20

// attentionKV is Attention with keys and values in a narrow cache: the
// rows the segments read, widened segment after segment into fp32
// scratch, in rounds of at most kvWidenElems elements (one segment at
// least), each round the fp32 attention over its segments.
func (b *Backend) attentionKV(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	const op = "attention"
	ks, ok1 := b.kvOperand(op, 2, k)
	vs, ok2 := b.kvOperand(op, 3, v)
	if !ok1 || !ok2 || !b.Check(op, out, q) {
		return
	}
	if ks.format != vs.format {
		b.Keep(fmt.Errorf("attention: keys in %s, values in %s", ks.format, vs.format))
		return
	}
	_, G, D, err := model.AttentionDims(op, out, q, k, v, segs)
	if !b.Keep(err) {
		return
	}
	w := G * D
	for lo := 0; lo < len(segs); {
		hi, rows := lo, 0
		for hi < len(segs) && (hi == lo || (rows+segs[hi].KLen)*w <= kvWidenElems) {
			rows += segs[hi].KLen
			hi++
		}
		b.attentionWidened(out, lse, q, k, v, ks, vs, segs[lo:hi], rows, scale)
		lo = hi
	}
}

// attentionWidened runs segs (reading rows key rows in all) over fp32
// copies of their key and value rows, packed segment after segment.
func (b *Backend) attentionWidened(out, lse, q, k, v *model.Tensor, ks, vs *kvStore, segs []model.Segment, rows int, scale float32) {
	G, D := k.Shape[1], k.Shape[2]
	w := G * D
	kw, vw := b.Scratch(rows, G, D), b.Scratch(rows, G, D)
	defer b.Release(kw, vw)
	K, V := b.Data(kw), b.Data(vw)
	packed := make([]model.Segment, len(segs))
	at := 0
	for i, s := range segs {
		packed[i] = s
		packed[i].K0 = at
		at += s.KLen
	}
	b.ParallelFor(len(segs), 2*w*rows/max(len(segs), 1), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s, p := segs[i], packed[i]
			ks.widen(K[p.K0*w:(p.K0+s.KLen)*w], k.Off+s.K0*w)
			vs.widen(V[p.K0*w:(p.K0+s.KLen)*w], v.Off+s.K0*w)
		}
	})
	b.Attention(out, lse, q, kw, vw, packed, scale)
}

// releaseKV gives a cache tensor's storage back to the garbage collector
// (the pool recycles float32 storage only) and marks it, and so its views,
// released.
func (b *Backend) releaseKV(t *model.Tensor) {
	s := t.Store.(*kvStore)
	if s.released {
		b.Keep(fmt.Errorf("release: tensor %v was already released", t.Shape))
		return
	}
	*s = kvStore{format: s.format, released: true}
}
