package cuda

// Causal GQA attention: the tables that map segments to kernel rows and
// tiles, and the choice between the tiled and the per-row kernels.

import (
	"fmt"

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
	// Under a graph, only kernels whose launches do not follow the
	// segments' lengths (the per-row ones).
	graphed := b.gr != nil
	if !graphed && b.useFlash(D, segs, len(qRow)) {
		b.attentionFlash(suffix, p[0], lp, p[1], p[2], p[3], segs, H, G, D, kWidth(hk), scale)
		return
	}
	if !graphed && b.useGEMMAttention(hk, segs, len(qRow)) {
		b.attentionGEMM(p[0], lp, p[1], p[2], p[3], segs, H, G, D, scale)
		return
	}
	kvWidth := kWidth(hk)
	tiles := !graphed && b.useTiles(D, segs, len(qRow))
	if !tiles && b.useDecodeSplit(D, H, G) {
		b.attentionDecode(suffix, p[0], lp, p[1], p[2], p[3], qRow, kStart, kCount, H, G, D, kvWidth, scale)
		return
	}
	// QKᵀ and PV: 4·D per (query, key) pair and head; q, out, k, v once.
	b.d.cost(EngineAttention, 4*float64(D*H)*pairs(kCount), float64(4*len(qRow)*H*(2*D+1)+kvWidth*2*k.Shape[0]*G*D))
	if tiles {
		t0, tn, ks, kf := queryTiles(segs, attTile)
		tabs, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if ok {
			b.launch("attn_fwd_tiled"+suffix, [3]int{len(t0), H}, attThreads, p[0], lp, p[1], p[2], p[3],
				tabs[0], tabs[1], tabs[2], tabs[3], int32(H), int32(G), int32(D), scale)
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
	defer b.free(delta)
	b.kernelCost(2*q.Shape[0]*H*D, 4*(2*q.Shape[0]*H*D+q.Shape[0]*H))
	b.launch("attn_delta", [3]int{q.Shape[0] * H}, 128, delta.ptr, p[3], p[7], int32(D))
	if b.useFlash(D, segs, len(qRow)) {
		b.attentionFlashBackward(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[8], delta.ptr, segs, H, G, D, scale)
		return
	}
	if b.useGEMMAttention(false, segs, len(qRow)) {
		b.attentionGEMMBackward(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[8], delta.ptr, segs, H, G, D, scale)
		return
	}
	// Recomputed scores, dP = dO·Vᵀ, dV += Pᵀ·dO, dQ += dS·K, dK += dSᵀ·Q:
	// 10·D per pair and head; q, out, dout, dq, lse and k, v, dk, dv once.
	b.d.cost(EngineAttention, 10*float64(D*H)*pairs(kCount), float64(4*(4*len(qRow)*H*D+2*len(qRow)*H+4*k.Shape[0]*G*D)))
	if b.useTiles(D, segs, len(qRow)) {
		t0, tn, ks, kf := queryTiles(segs, attTile)
		qt, ok := b.upload("attention query tiles", t0, tn, ks, kf)
		if !ok {
			return
		}
		b.launch("attn_bwd_dq_tiled", [3]int{len(t0), H}, attThreads, p[0], p[3], p[4], p[5], p[6], p[8], delta.ptr,
			qt[0], qt[1], qt[2], qt[3], int32(H), int32(G), int32(D), scale)
		k0, kn, j0, sq, sl, so := keyTiles(segs, attTile)
		kt, ok := b.upload("attention key tiles", k0, kn, j0, sq, sl, so)
		if !ok {
			return
		}
		b.launch("attn_bwd_dkv_tiled", [3]int{len(k0), G}, attThreads, p[1], p[2], p[3], p[4], p[5], p[6], p[8], delta.ptr,
			kt[0], kt[1], kt[2], kt[3], kt[4], kt[5], int32(H), int32(G), int32(D), scale)
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
}

// pairs counts the (query, key) pairs attention visits: Σ kCount.
func pairs(kCount []int32) float64 {
	var n float64
	for _, c := range kCount {
		n += float64(c)
	}
	return n
}
