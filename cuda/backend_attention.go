package cuda

// Causal GQA attention: the tables that map segments to kernel rows and
// tiles, and the choice between the tiled and the per-row kernels.

import (
	"fmt"
	"slices"

	"github.com/gdrotrain/gdrotrain/model"
)

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

// queryTiles splits each segment's query rows into tiles of size rows.
func queryTiles(segs []model.Segment, size int) (qRow0, qCount, kStart, kFirst []int32) {
	for _, s := range segs {
		for i0 := 0; i0 < s.QLen; i0 += size {
			qRow0 = append(qRow0, int32(s.Q0+i0))
			qCount = append(qCount, int32(min(size, s.QLen-i0)))
			kStart = append(kStart, int32(s.K0))
			kFirst = append(kFirst, int32(s.KLen-s.QLen+i0+1))
		}
	}
	return
}

// keyTiles splits each segment's key rows into tiles of size rows.
func keyTiles(segs []model.Segment, size int) (kRow0, kCount, j0, segQ0, segQLen, segOff []int32) {
	for _, s := range segs {
		for j := 0; j < s.KLen; j += size {
			kRow0 = append(kRow0, int32(s.K0+j))
			kCount = append(kCount, int32(min(size, s.KLen-j)))
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
	if err := checkHeadDim(D); err != nil {
		b.keep(fmt.Errorf("%s: %w", op, err))
		return 0, 0, 0, false
	}
	return H, G, D, true
}

// MaxHeadDim is the largest head dimension the attention kernels take: the
// per-row kernels hold two elements of a row per thread (D ≤ 2 ×
// ATT_THREADS), and the other routes fall back to them. Every even head
// dim up to it is served (model.Config.Validate admits only even ones);
// the tests run each.
const MaxHeadDim = 2 * attThreads

// checkHeadDim refuses head dims the kernels cannot serve, naming the
// config key.
func checkHeadDim(D int) error {
	if D < 1 || D > MaxHeadDim {
		return fmt.Errorf("head_dim %d is not supported on cuda: its attention kernels take head_dim 1 to %d (run this model with --device cpu)", D, MaxHeadDim)
	}
	return nil
}

var _ model.ConfigChecker = (*Backend)(nil)

// CheckConfig refuses a model whose attention the kernels cannot compute
// (model.ConfigChecker), when it is loaded.
func (b *Backend) CheckConfig(c *model.Config) error {
	return checkHeadDim(c.HeadDim)
}

// Attention computes causal GQA attention per segment. q and out are fp32,
// or both bf16 activations (training under bf16 products, with k and v bf16
// too); k and v are fp32 or bf16 (activations or a KV cache), or an fp8 KV
// cache (backend_fp8.go). In exact mode one kernel serves every call
// (backend_attention_exact.go).
func (b *Backend) Attention(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	const op = "attention"
	if b.exact {
		b.attentionExact(out, lse, q, k, v, segs, scale)
		return
	}
	if isKV8(k) || isKV8(v) {
		b.attentionFP8(out, lse, q, k, v, segs, scale)
		return
	}
	po, ho, ok0 := b.activation(op, 0, out)
	pq, hq, ok1 := b.activation(op, 1, q)
	pk, hk, ok2 := b.operand(op, 2, k)
	pv, hv, ok3 := b.operand(op, 3, v)
	if !ok0 || !ok1 || !ok2 || !ok3 {
		return
	}
	if hk != hv || ho != hq || (hq && !hk) {
		b.keep(fmt.Errorf("attention: storages (bf16 q %v, k %v, v %v, out %v) must pair q with out and k with v, and bf16 queries need bf16 keys", hq, hk, hv, ho))
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
	if lse != nil && lse.Numel() != q.Shape[0]*H {
		b.keep(fmt.Errorf("attention: lse %v must hold (%d, %d)", lse.Shape, q.Shape[0], H))
		return
	}
	a := attnCall{out: po, lse: lp, q: pq, k: pk, v: pv, segs: segs, H: H, G: G, D: D, halfKV: hk,
		qRows: q.Shape[0], nk: k.Shape[0], scale: scale}
	if hq {
		b.attentionHalf(a)
		return
	}
	b.attentionRoute(a)
}

// attnCall is one attention forward's device operands and shape.
type attnCall struct {
	out, lse, q, k, v uint64
	segs              []model.Segment
	H, G, D           int
	halfKV            bool
	kvBytes           float64 // bytes per key or value element where not 4 or 2 (fp8: codes and scales)
	qRows, nk         int     // rows of q (and out) and of k (and v)
	scale             float32
}

// kvWidth is the bytes per key or value element the call reads.
func (a attnCall) kvWidth() float64 {
	if a.kvBytes > 0 {
		return a.kvBytes
	}
	return float64(widthOf(a.halfKV))
}

// attentionHalf serves bf16 activations (queries, keys, values, output):
// the fused kernels read and write them as they are; the other routes
// (short segments, or a route forced by tests) run as with fp32
// activations, on widened copies, and the output is rounded after.
func (b *Backend) attentionHalf(a attnCall) {
	if b.useFlash(a.D, a.segs, len(queryRows(a.segs))) {
		b.attentionFlash("_h", a, 2)
		return
	}
	nq, nk := a.qRows*a.H*a.D, a.nk*a.G*a.D
	wide, ok := b.widenAll([]uint64{a.q, a.k, a.v}, []int{nq, nk, nk})
	if !ok {
		return
	}
	wo, err := b.alloc(nq)
	if !b.keep(err) {
		b.free(wide...)
		return
	}
	defer b.free(append(wide, wo)...)
	out := a.out
	a.q, a.k, a.v, a.out, a.halfKV = wide[0].ptr, wide[1].ptr, wide[2].ptr, wo.ptr, false
	b.attentionRoute(a)
	b.kernelCost(nq, 6*nq)
	b.elementwise("f32_to_bf16", nq, out, wo.ptr, int64(nq))
}

// widenAll returns fp32 copies of bf16 tensors (addresses ps, sizes ns),
// for the caller to free.
func (b *Backend) widenAll(ps []uint64, ns []int) ([]*buffer, bool) {
	var out []*buffer
	for i, p := range ps {
		buf, err := b.alloc(ns[i])
		if !b.keep(err) {
			b.free(out...)
			return nil, false
		}
		out = append(out, buf)
		b.kernelCost(ns[i], 6*ns[i])
		b.elementwise("bf16_to_f32", ns[i], buf.ptr, p, int64(ns[i]))
	}
	return out, true
}

// queryRows lists the query rows of segs (attRows' first table).
func queryRows(segs []model.Segment) []int32 {
	q, _, _ := attRows(segs)
	return q
}

// attentionRoute runs a forward with fp32 queries and outputs on the route
// the call's shape selects.
func (b *Backend) attentionRoute(a attnCall) {
	segs, H, G, D, scale := a.segs, a.H, a.G, a.D, a.scale
	suffix := ""
	if a.halfKV {
		suffix = "_kvh" // a bf16 KV cache or bf16 activations
	}
	qRow, kStart, kCount := attRows(segs)
	if len(qRow) == 0 {
		return
	}
	// Under a graph, only kernels whose launches do not follow the
	// segments' lengths (the per-row ones).
	graphed := b.gr != nil
	if !graphed && b.useFlash(D, segs, len(qRow)) {
		b.attentionFlash(suffix, a, 4)
		return
	}
	if !graphed && b.useGEMMAttention(a.halfKV, segs, len(qRow)) {
		b.attentionGEMM(a.out, a.lse, a.q, a.k, a.v, segs, H, G, D, scale)
		return
	}
	kvWidth := a.kvWidth()
	tiles := !graphed && b.useTiles(D, segs, len(qRow))
	if !tiles && b.useDecodeSplit(D, H, G) {
		b.attentionDecode(suffix, a.out, a.lse, a.q, a.k, a.v, qRow, kStart, kCount, H, G, D, kvWidth, scale)
		return
	}
	// QKᵀ and PV: 4·D per (query, key) pair and head; q, out, k, v once.
	b.d.cost(EngineAttention, 4*float64(D*H)*pairs(kCount), float64(4*len(qRow)*H*(2*D+1))+kvWidth*float64(2*a.nk*G*D))
	if tiles {
		t0, tn, ks, kf := queryTiles(segs, attTile)
		tabs, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if ok {
			b.launch("attn_fwd_tiled"+suffix, [3]int{len(t0), H}, attThreads, a.out, a.lse, a.q, a.k, a.v,
				tabs[0], tabs[1], tabs[2], tabs[3], int32(H), int32(G), int32(D), scale)
		}
		return
	}
	addr, ok := b.upload("attention rows", qRow, kStart, kCount)
	if !ok {
		return
	}
	b.launch("attn_fwd"+suffix, [3]int{len(qRow), H}, attThreads, a.out, a.lse, a.q, a.k, a.v, addr[0], addr[1], addr[2],
		int32(H), int32(G), int32(D), scale)
}

// AttentionBackward overwrites dq, dk, dv, recomputing probabilities from
// the saved log-sum-exp. q, k, v are all fp32 or all bf16 activations, out
// fp32 or bf16; the gradients are fp32.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse *model.Tensor, segs []model.Segment, scale float32) {
	const op = "attention backward"
	p, ok := b.ptrs(op, dq, dk, dv, dout, lse)
	if !ok {
		return
	}
	markStale(dk, dv)
	pq, hq, ok1 := b.activation(op, 4, q)
	pk, hk, ok2 := b.activation(op, 5, k)
	pv, hv, ok3 := b.activation(op, 6, v)
	po, ho, ok4 := b.activation(op, 7, out)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if hq != hk || hq != hv {
		b.keep(fmt.Errorf("attention backward: q, k, v must share a storage (bf16 %v, %v, %v)", hq, hk, hv))
		return
	}
	H, G, D, ok := b.attentionDims(op, out, q, k, v, segs)
	if !ok {
		return
	}
	if !b.keep(model.SizeCheck(op, dq, q, dout)) || !b.keep(model.SizeCheck(op, dk, k, dv)) {
		return
	}
	if lse.Numel() != q.Shape[0]*H {
		b.keep(fmt.Errorf("attention backward: lse %v must hold (%d, %d)", lse.Shape, q.Shape[0], H))
		return
	}
	if _, _, _, err := keyRows(segs, k.Shape[0]); !b.keep(err) {
		return
	}
	flash := hq && b.useFlash(D, segs, len(queryRows(segs)))
	if !flash || !coversRows(segs, q.Shape[0], k.Shape[0]) {
		// Rows no segment reaches are 0; the fused kernels overwrite every
		// row a segment reaches, so a training batch (its segments tile the
		// rows) needs no clearing: 12 bytes per query row and head element.
		b.Zero(dq)
		b.Zero(dk)
		b.Zero(dv)
	}
	if len(queryRows(segs)) == 0 {
		return
	}
	delta, err := b.alloc(q.Shape[0] * H)
	if !b.keep(err) {
		return
	}
	defer b.free(delta)
	rowsH := q.Shape[0] * H
	b.kernelCost(2*rowsH*D, 4*(rowsH*D+rowsH)+widthOf(ho)*rowsH*D)
	name := "attn_delta"
	if ho {
		name += "_h"
	}
	b.launch(name, [3]int{rowsH}, 128, delta.ptr, p[3], po, int32(D))
	g := attnGrad{dq: p[0], dk: p[1], dv: p[2], dout: p[3], q: pq, k: pk, v: pv, lse: p[4], delta: delta.ptr,
		segs: segs, H: H, G: G, D: D, nk: k.Shape[0], scale: scale}
	if !hq {
		b.attentionBackwardRoute(g)
		return
	}
	if flash {
		b.attentionFlashBackward("_h", g, 2)
		return
	}
	// The other routes read fp32 q, k, v: widen them.
	wide, ok := b.widenAll([]uint64{g.q, g.k, g.v}, []int{q.Numel(), k.Numel(), v.Numel()})
	if !ok {
		return
	}
	defer b.free(wide...)
	g.q, g.k, g.v = wide[0].ptr, wide[1].ptr, wide[2].ptr
	b.attentionBackwardRoute(g)
}

// coversRows reports whether segs reach each of nq query rows and nk key
// rows exactly once.
func coversRows(segs []model.Segment, nq, nk int) bool {
	q, k := make([]bool, nq), make([]bool, nk)
	mark := func(seen []bool, r0, n int) bool {
		if r0 < 0 || r0+n > len(seen) {
			return false
		}
		for r := r0; r < r0+n; r++ {
			if seen[r] {
				return false
			}
			seen[r] = true
		}
		return true
	}
	for _, s := range segs {
		if !mark(q, s.Q0, s.QLen) || !mark(k, s.K0, s.KLen) {
			return false
		}
	}
	return !slices.Contains(q, false) && !slices.Contains(k, false)
}

// attnGrad is one attention backward's device operands and shape.
type attnGrad struct {
	dq, dk, dv, dout, q, k, v, lse, delta uint64
	segs                                  []model.Segment
	H, G, D, nk                           int
	scale                                 float32
}

// attentionBackwardRoute runs a backward with fp32 q, k, v on the route the
// call's shape selects.
func (b *Backend) attentionBackwardRoute(g attnGrad) {
	segs, H, G, D, scale := g.segs, g.H, g.G, g.D, g.scale
	qRow, _, kCount := attRows(segs)
	if b.useFlash(D, segs, len(qRow)) {
		b.attentionFlashBackward("", g, 4)
		return
	}
	if b.useGEMMAttention(false, segs, len(qRow)) {
		b.attentionGEMMBackward(g.dq, g.dk, g.dv, g.dout, g.q, g.k, g.v, g.lse, g.delta, segs, H, G, D, scale)
		return
	}
	// Recomputed scores, dP = dO·Vᵀ, dV += Pᵀ·dO, dQ += dS·K, dK += dSᵀ·Q:
	// 10·D per pair and head; q, out, dout, dq, lse and k, v, dk, dv once.
	b.d.cost(EngineAttention, 10*float64(D*H)*pairs(kCount), float64(4*(4*len(qRow)*H*D+2*len(qRow)*H+4*g.nk*G*D)))
	if b.useTiles(D, segs, len(qRow)) {
		t0, tn, ks, kf := queryTiles(segs, attTile)
		qt, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if !ok {
			return
		}
		b.launch("attn_bwd_dq_tiled", [3]int{len(t0), H}, attThreads, g.dq, g.dout, g.q, g.k, g.v, g.lse, g.delta,
			qt[0], qt[1], qt[2], qt[3], int32(H), int32(G), int32(D), scale)
		k0, kn, j0, sq, sl, so := keyTiles(segs, attTile)
		kt, ok := b.upload("attention key tiles", k0, kn, j0, sq, sl, so)
		if !ok {
			return
		}
		b.launch("attn_bwd_dkv_tiled", [3]int{len(k0), G}, attThreads, g.dk, g.dv, g.dout, g.q, g.k, g.v, g.lse, g.delta,
			kt[0], kt[1], kt[2], kt[3], kt[4], kt[5], int32(H), int32(G), int32(D), scale)
		return
	}
	_, kStart, _ := attRows(segs)
	rows, ok := b.upload("attention rows", qRow, kStart, kCount)
	if !ok {
		return
	}
	b.launch("attn_bwd_dq", [3]int{len(qRow), H}, attThreads, g.dq, g.dout, g.q, g.k, g.v, g.lse, g.delta,
		rows[0], rows[1], rows[2], int32(H), int32(G), int32(D), scale)
	kRow, qStart, qCount, _ := keyRows(segs, g.nk)
	if len(kRow) > 0 {
		keys, ok := b.upload("attention keys", kRow, qStart, qCount)
		if !ok {
			return
		}
		b.launch("attn_bwd_dkv", [3]int{len(kRow), G}, attThreads, g.dk, g.dv, g.dout, g.q, g.k, g.v, g.lse, g.delta,
			keys[0], keys[1], keys[2], int32(H), int32(G), int32(D), scale)
	}
}

// pairs counts the (query, key) pairs attention visits: Σ kCount.
func pairs(kCount []int32) float64 {
	var n float64
	for _, c := range kCount {
		n += float64(c)
	}
	return n
}
