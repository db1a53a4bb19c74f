package cuda

// Exact-mode attention (kernels/attention_exact.cu): in exact mode every
// Attention forward, whatever its shape, storage or caller (a decode step
// of any batch, under a graph or not, a prefill, the training forward over
// packed segments), runs attn_exact*, whose result for a (query row, head)
// is a fixed sequence of roundings over its own window: splits of
// exactSplit keys from key 0, each an online softmax over tiles of 16,
// folded in order; no split that follows the length or the batch. The
// backward keeps the fast kernels: only the forward's values must match
// the sampler's bit for bit, and it reads the lse this forward writes.
//
// Under bf16 products (sm_80 and later, head dims up to exTCDMax) the
// kernels are attn_exact_tc* (kernels/attention_exact_tc.cu): the same
// splits and tiles of keys, the products on tensor cores (mma.sync, q, k,
// v and the probabilities rounded to bf16), each (row, head) pair a row of
// a 16-row fragment whose other rows change none of its bits. fp32 and
// tf32 products keep attn_exact* on CUDA cores, the exact route for them.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

const (
	exAcc    = 2048 // EX_ACC·EX_THREADS: output elements a block holds
	exPairs  = 64   // EX_PAIRS: (row, head) pairs a block holds
	exDMax   = 256  // EX_DMAX
	exSmallD = 128  // attn_exact_s*: head dims up to this
	exSmall  = 512  // attn_exact_s*: output elements a block holds
	exTCDMax = 128  // XT_DMAX: attn_exact_tc*'s largest head dim
	exTCRows = 16   // (row, head) pairs of an mma fragment: attn_exact_tc_s* holds one, attn_exact_tc* four
)

// exactAttnTC reports whether exact mode's attention takes the tensor-core
// kernels: under bf16 products where mma.sync exists (exactMMA), for head
// dims up to exTCDMax. It depends on the backend and the model only, never
// on a call's shape, so every call of a run (decode, prefill, training)
// takes the same route and the same arithmetic.
func (b *Backend) exactAttnTC(D int) bool { return b.prec == BF16 && b.exactMMA() && D <= exTCDMax }

// exactTilesTC sizes attn_exact_tc*'s blocks: decode steps (every segment
// one query row) one warp's fragment of 16 (row, head) pairs, the query
// heads of a key/value head; other calls four warps' 64 pairs, hb heads of
// qt rows. Which pairs share a fragment changes none of their bits.
func exactTilesTC(H, G int, segs []model.Segment) (small bool, hb, qt int) {
	per := H / G
	small = true
	for _, s := range segs {
		small = small && s.QLen <= 1
	}
	if small {
		return true, min(per, exTCRows), 1
	}
	hb = min(per, 4*exTCRows)
	return false, hb, max(1, 4*exTCRows/hb)
}

// exactTiles sizes a call's blocks: the kernel (attn_exact, or
// attn_exact_s where every segment is one query row and D allows), hb query
// heads of a key/value head per block and query tiles of at most qt rows.
// None of it changes a row's arithmetic, only which rows share a load of
// keys and values and how many blocks an SM holds.
func exactTiles(H, G, D int, segs []model.Segment) (small bool, hb, qt int) {
	per := H / G
	small = D <= exSmallD
	for _, s := range segs {
		small = small && s.QLen <= 1
	}
	if small {
		return true, min(per, exSmall/D, exPairs), 1
	}
	hb = min(per, exAcc/D, exPairs)
	qt = max(1, min(16, exAcc/(hb*D), exPairs/hb))
	return false, hb, qt
}

// attentionExact is Attention in exact mode: q and out fp32 or both bf16
// activations; k and v fp32, bf16 (a cache or activations) or an fp8 cache.
func (b *Backend) attentionExact(out, lse, q, k, v *model.Tensor, segs []model.Segment, scale float32) {
	const op = "attention (exact)"
	po, ho, ok0 := b.activation(op, 0, out)
	pq, hq, ok1 := b.activation(op, 1, q)
	if !ok0 || !ok1 {
		return
	}
	if ho != hq {
		b.keep(fmt.Errorf("%s: q and out must share a storage (bf16 %v, %v)", op, hq, ho))
		return
	}
	pk, pv, suffix, kvWidth, ok := b.exactKV(op, k, v)
	if !ok {
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
	if D > exDMax {
		b.keep(fmt.Errorf("%s: head_dim %d above %d", op, D, exDMax))
		return
	}
	if lse != nil && lse.Numel() != q.Shape[0]*H {
		b.keep(fmt.Errorf("%s: lse %v must hold (%d, %d)", op, lse.Shape, q.Shape[0], H))
		return
	}
	tc := b.exactAttnTC(D)
	var small bool
	var hb, qt int
	if tc {
		small, hb, qt = exactTilesTC(H, G, segs)
	} else {
		small, hb, qt = exactTiles(H, G, D, segs)
	}
	threads := attThreads
	if tc && small {
		threads = 32 // attn_exact_tc_s*: one warp
	}
	t0, tn, ks, kf := queryTiles(segs, qt)
	if len(t0) == 0 {
		return
	}
	b.attnExactCost(tn, kf, H, G, D, hb, widthOf(hq), kvWidth, lse != nil, tc)
	tabs, ok := b.upload("attention query tiles", t0, tn, ks, kf)
	if !ok {
		return
	}
	name := "attn_exact"
	if tc {
		name += "_tc"
	}
	if small {
		name += "_s"
	}
	if hq {
		name += "_h"
	}
	chunks := (H/G + hb - 1) / hb
	// 16-byte loads where every head's row starts 16-byte aligned: the
	// same values as element loads, fewer instructions.
	perLoad := int(16 / kvWidth)
	if suffix == "_kv8" {
		perLoad = 16
	}
	vec := int32(0)
	if D%perLoad == 0 && pk%16 == 0 && pv%16 == 0 {
		vec = 1
	}
	S := b.exactSplitKeys()
	nsplit := 0
	if small {
		nsplit = b.exactSplits(len(t0)*G*chunks, kf, S)
	}
	if nsplit == 0 {
		b.launch(name+suffix, [3]int{len(t0), G, chunks}, threads, po, lp, pq, pk, pv,
			tabs[0], tabs[1], tabs[2], tabs[3], int32(H), int32(G), int32(D), scale, int32(hb), vec,
			int32(S), uint64(0), int32(0))
		return
	}
	// A few rows with long windows: a block per split, then the splits
	// folded in order by attn_exact_combine (the same folds the one-block
	// launch makes).
	part, err := b.alloc(q.Shape[0] * H * nsplit * (D + 2))
	if !b.keep(err) {
		return
	}
	defer b.free(part)
	rowsH := len(t0) * H
	b.kernelCost(3*rowsH*nsplit*(D+2), 8*rowsH*nsplit*(D+2)+widthOf(hq)*rowsH*D)
	b.launch(name+suffix, [3]int{len(t0), G, chunks * nsplit}, threads, po, lp, pq, pk, pv,
		tabs[0], tabs[1], tabs[2], tabs[3], int32(H), int32(G), int32(D), scale, int32(hb), vec,
		int32(S), part.ptr, int32(nsplit))
	combine := "attn_exact_combine"
	if hq {
		combine += "_h"
	}
	b.launch(combine, [3]int{len(t0), H}, attThreads, po, lp, part.ptr, tabs[0], tabs[3], int32(H), int32(D), int32(S), int32(nsplit))
}

// exactSplit is the keys of a split: every row's window is cut into splits
// of this many keys from key 0, each an online softmax of its own, folded
// in order. Part of the arithmetic, so one size for every call.
const exactSplit = 256

// exactSplitTest, when set (tests only, a multiple of 16), replaces
// exactSplit, so that short sequences meet several splits.
var exactSplitTest int

// exactSplitKeys is the split size in use.
func (b *Backend) exactSplitKeys() int {
	if exactSplitTest > 0 {
		return exactSplitTest
	}
	return exactSplit
}

// exactSplits is how many splits a decode launch of blocks blocks gives a
// block each (0: the blocks fold their own): only when the blocks are too
// few to fill the GPU twice over and some window has more than one split.
// Under a graph the count follows the cache's length, so the launch stays
// the same step after step.
func (b *Backend) exactSplits(blocks int, kFirst []int32, S int) int {
	if blocks >= 2*b.d.Info.SMs {
		return 0
	}
	maxKeys := 0
	for _, n := range kFirst {
		maxKeys = max(maxKeys, int(n))
	}
	if b.gr != nil {
		maxKeys = b.gr.set.maxKeys
	}
	if n := (maxKeys + S - 1) / S; n > 1 {
		return n
	}
	return 0
}

// exactKV returns the key and value addresses, the kernel suffix of their
// storage and the bytes per element read.
func (b *Backend) exactKV(op string, k, v *model.Tensor) (pk, pv uint64, suffix string, width float64, ok bool) {
	if isKV8(k) || isKV8(v) {
		pk, lk, ok2 := b.kv8Operand(op, 2, k)
		pv, lv, ok3 := b.kv8Operand(op, 3, v)
		if !ok2 || !ok3 {
			return 0, 0, "", 0, false
		}
		if *lk != *lv {
			b.keep(fmt.Errorf("%s: fp8 keys and values of rows (%d, %d) and (%d, %d)", op, lk.G, lk.D, lv.G, lv.D))
			return 0, 0, "", 0, false
		}
		return pk, pv, "_kv8", float64(lk.rowBytes) / float64(lk.elems()), true
	}
	pk, hk, ok2 := b.operand(op, 2, k)
	pv, hv, ok3 := b.operand(op, 3, v)
	if !ok2 || !ok3 {
		return 0, 0, "", 0, false
	}
	if hk != hv {
		b.keep(fmt.Errorf("%s: keys and values must share a storage (bf16 %v, %v)", op, hk, hv))
		return 0, 0, "", 0, false
	}
	if hk {
		return pk, pv, "_kvh", 2, true
	}
	return pk, pv, "", 4, true
}

// attnExactCost records the kernel's work for the step profile: q read and
// out written once; each block reads its tile's keys and values (a decode
// row's window once per key/value head, a training tile's window once per
// tile of rows: what the DRAM serves when L2 keeps no tile between
// blocks, an upper bound). The arithmetic: on CUDA cores (attn_exact*),
// QKᵀ and PV, 4·D flops per (query, key) pair and head; on tensor cores
// (tc, attn_exact_tc*), what the fragments issue (exactTCFlops).
func (b *Backend) attnExactCost(qCount, kFirst []int32, H, G, D, hb, qoWidth int, kvWidth float64, lse, tc bool) {
	var pairs, keyLoads float64
	for i, n := range qCount {
		last := float64(kFirst[i] + n - 1) // keys the tile's last row sees
		pairs += float64(n)*float64(kFirst[i]) + float64(n)*float64(n-1)/2
		keyLoads += last
	}
	rows := float64(sum32(qCount))
	chunks := float64((H/G + hb - 1) / hb)
	bytes := rows*float64(H*D*2*qoWidth) + kvWidth*2*float64(G*D)*chunks*keyLoads
	if lse {
		bytes += 4 * rows * float64(H)
	}
	if tc {
		b.d.cost(EngineExactAttn, exactTCFlops(qCount, kFirst, H, G, D, hb), bytes)
		return
	}
	b.d.cost(EngineAttention, 4*float64(D*H)*pairs, bytes)
}

// exactTCFlops is attn_exact_tc*'s tensor-core arithmetic: a warp's
// fragment of 16 (row, head) pairs takes every 16-key tile its widest
// window reaches, QKᵀ and PV on the head dim rounded up to 16, 2·2·16·Dp
// flops a key, whatever rows of the fragment are live (a decode row and
// its query heads fill 2 of 16 at Qwen3's GQA: 8 times the useful work,
// which a step bound by reading the cache hides).
func exactTCFlops(qCount, kFirst []int32, H, G, D, hb int) float64 {
	per, Dp := H/G, (D+15)&^15
	var keys float64
	for i, n := range qCount {
		for h0 := 0; h0 < per; h0 += hb {
			pairs := int(n) * min(hb, per-h0)
			for w := 0; w < pairs; w += exTCRows {
				nk := int(kFirst[i]) + (min(pairs, w+exTCRows)-1)/min(hb, per-h0)
				keys += float64((nk + 15) &^ 15)
			}
		}
	}
	return 64 * float64(Dp) * float64(G) * keys
}

// sum32 adds the values of xs.
func sum32(xs []int32) int {
	n := 0
	for _, x := range xs {
		n += int(x)
	}
	return n
}

// widenCopy serves Copy from a bf16 tensor or an fp8 cache into a float32
// tensor of as many elements: the values the source holds (bf16 widened
// exactly, fp8 as code·scale), which exact mode's training forward hands
// its backward (model.Model.ExactKV). It reports whether it took the call.
func (b *Backend) widenCopy(dst, src *model.Tensor) bool {
	ds, ok1 := dst.Store.(*buffer)
	ss, ok2 := src.Store.(*buffer)
	if !ok1 || !ok2 || ds.bf16 || ds.kv8 != nil || (!ss.bf16 && ss.kv8 == nil) {
		return false
	}
	const op = "copy (widening)"
	pd, ok := b.ptrs(op, dst)
	if !ok || !b.keep(model.SizeCheck(op, dst, src)) || dst.Numel() == 0 {
		return true
	}
	n := dst.Numel()
	if ss.kv8 != nil {
		ps, l, ok := b.kv8Operand(op, 1, src)
		if !ok {
			return true
		}
		rows := n / l.elems()
		b.kernelCost(n, int(int64(rows)*l.rowBytes)+4*n)
		b.launch("kv8_gather_f32", [3]int{rows, l.G}, 128, pd[0], ps, uint64(0), int32(rows), int32(l.G), int32(l.D))
		return true
	}
	ps, _, ok := b.operand(op, 1, src)
	if ok {
		b.kernelCost(n, 6*n)
		b.elementwise("bf16_to_f32", n, pd[0], ps, int64(n))
	}
	return true
}
