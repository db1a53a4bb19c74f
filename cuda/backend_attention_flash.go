package cuda

// Causal GQA attention in fused tensor-core kernels (kernels/attention_flash.cu),
// the FlashAttention-2 route: scores and probabilities never leave the
// registers, so attention reads q, k, v (and dout) and writes out (and the
// gradients) once per tile pass, instead of writing and re-reading a
// T × T score matrix per head as the cuBLAS route does. Operands are bf16
// with fp32 accumulation, so the backend takes this route under bf16
// products only (fp32 and tf32 keep the cuBLAS route); head dims up to 128
// in steps of 16, sm_80 and later.
//
// Work: the forward visits, per query tile of 64 rows, the key tiles of 64
// up to the tile's last visible key (4·D FLOPs per visited pair); the
// backward visits them twice, once per output it owns (dq: 6·D per pair
// over 32-key tiles; dk, dv: 8·D per pair over 16-query tiles), so that no
// two blocks add into one row and the result is deterministic.
//
// Traffic, as the step profile counts it: every tensor once per query head
// that reads it. A block re-reads its keys and values (or, for dk/dv, its
// queries and output gradients) once per tile it pairs with, but blocks are
// issued query tile by query tile within a head, so the few hundred blocks
// running at once share one key/value head of the batch (16 MiB of fp32
// keys and values at 8 × 2k or 2 × 8k for Qwen3-1.7B), which the H100's 50
// MB L2 holds: the re-reads are L2 hits, not DRAM traffic.

import (
	"strconv"

	"github.com/gdrotrain/gdrotrain/model"
)

// Tile sizes of kernels/attention_flash.cu.
const (
	flashThreads = 128 // FA_THREADS
	flashBQ      = 64  // FA_BQ: query rows per forward and dq block
	flashBK      = 64  // FA_BK: keys per forward tile
	flashBKQ     = 32  // FA_BKQ: keys per dq tile
	flashBKV     = 64  // FA_BKV: keys per dk/dv block
	flashBQV     = 16  // FA_BQV: query rows per dk/dv tile
	flashDMax    = 128 // FA_DMAX
)

// Tiles of the warpgroup-MMA kernels (attn_wg_*, sm_90a, head dim 128):
// the forward's and dq's grids and query tiles are flashBQ's, the dk/dv
// grid flashBKV's.
const (
	wgHeadDim = 128 // WG_D
	wgBK      = 64  // WG_BK: keys per forward and dq tile
	wgBQV     = 32  // WG_BQV: query rows per dk/dv tile
)

// WGMMAEnv set to 0 keeps the fused attention on the mma.sync kernels on a
// Hopper GPU (the warpgroup-MMA kernels are its default there).
const WGMMAEnv = "GDROTRAIN_ATTN_WGMMA"

// useWG reports whether a fused bf16-activation ("_h") call runs on the
// warpgroup-MMA kernels: on a compute capability 9.0 device (the kernels are
// sm_90a code), head dim 128 (Qwen3's), unless turned off (attnWG < 0, or
// GDROTRAIN_ATTN_WGMMA=0 when the backend was made).
func (b *Backend) useWG(suffix string, D int) bool {
	return suffix == "_h" && D == wgHeadDim && b.attnWG >= 0 && b.d.Info.HasWGMMA()
}

// useFlash reports whether the fused tensor-core kernels serve a call: by
// default under bf16 products on sm_80 or later, for head dims they take,
// with segments long enough to fill query tiles (training, prefill), and no
// other route forced (tests force each).
func (b *Backend) useFlash(D int, segs []model.Segment, rows int) bool {
	if b.attnFlash < 0 || D%16 != 0 || D > flashDMax || b.d.Info.Major < 8 {
		return false
	}
	if b.attnFlash > 0 {
		return true
	}
	return b.prec == BF16 && b.attnGEMM == 0 && b.attnTiles == 0 && rows >= 16*len(segs)
}

// flashPairs counts the (query, key) pairs the tiles of a pass visit: per
// query tile, its rows times its keys rounded up to whole key tiles.
func flashPairs(qCount, kFirst []int32, rows, keys int) float64 {
	var n float64
	for t := range qCount {
		visible := int(kFirst[t] + qCount[t] - 1)
		n += float64(rows) * float64((visible+keys-1)/keys*keys)
	}
	return n
}

// attentionFlash is the forward: out (and lse when lse ≠ 0). qWidth is the
// bytes of a query and output element: 4 for fp32, 2 for the bf16 kernels
// ("_h": queries, keys, values and output all bf16).
func (b *Backend) attentionFlash(suffix string, a attnCall, qWidth int) {
	t0, tn, ks, kf := queryTiles(a.segs, flashBQ)
	if len(t0) == 0 {
		return
	}
	H, G, D := a.H, a.G, a.D
	name, engine := "attn_flash_fwd"+suffix, EngineFlash
	if b.useWG(suffix, D) {
		name, engine = "attn_wg_fwd_h", EngineWGFlash
	}
	pairs := flashPairs(tn, kf, flashBQ, flashBK) * float64(H)
	// q, out and lse once; keys and values once per query head.
	rows := float64(sumInt32(tn) * H)
	b.d.cost(engine, 4*float64(D)*pairs, float64(qWidth)*2*rows*float64(D)+4*rows+a.kvWidth()*float64(2*D*H)*keysOf(a.segs))
	tiles, ok := b.upload("flash query tiles", t0, tn, ks, kf)
	if ok {
		b.launch(name, [3]int{len(t0), H}, flashThreads, a.out, a.lse, a.q, a.k, a.v,
			tiles[0], tiles[1], tiles[2], tiles[3], int32(H), int32(G), int32(D), a.scale)
	}
}

// attentionFlashBackward overwrites dq, dk and dv for every row of segs,
// given delta = Σ dO ⊙ O per (row, head). width is the bytes of a q, k or
// v element (2: the "_h" kernels reading bf16 activations); dout and the
// gradients are fp32.
func (b *Backend) attentionFlashBackward(suffix string, g attnGrad, width int) {
	segs, H, G, D := g.segs, g.H, g.G, g.D
	t0, tn, ks, kf := queryTiles(segs, flashBQ)
	if len(t0) == 0 {
		return
	}
	wg := b.useWG(suffix, D)
	dqName, dkvName, engine, dqKeys := "attn_flash_bwd_dq"+suffix, "attn_flash_bwd_dkv"+suffix, EngineFlashBwd, flashBKQ
	if wg {
		dqName, dkvName, engine, dqKeys = "attn_wg_bwd_dq_h", "attn_wg_bwd_dkv_h", EngineWGFlashBwd, wgBK
	}
	pairs := flashPairs(tn, kf, flashBQ, dqKeys) * float64(H)
	w := float64(width)
	// q, dout, dq, lse and delta once; keys and values once per query head.
	rows := float64(sumInt32(tn) * H)
	b.d.cost(engine, 6*float64(D)*pairs, rows*float64(D)*(w+8)+8*rows+w*float64(2*D*H)*keysOf(segs))
	qt, ok := b.upload("flash query tiles", t0, tn, ks, kf)
	if !ok {
		return
	}
	b.launch(dqName, [3]int{len(t0), H}, flashThreads, g.dq, g.dout, g.q, g.k, g.v, g.lse, g.delta,
		qt[0], qt[1], qt[2], qt[3], int32(H), int32(G), int32(D), g.scale)
	k0, kn, j0, sq, sl, so := keyTiles(segs, flashBKV)
	if wg { // the pairs the dk/dv blocks visit: their keys by their query tiles
		pairs = keyTilePairs(j0, sl, so, flashBKV, wgBQV) * float64(H)
	}
	// The same visited pairs, seen from the keys: k, v read and dk, dv
	// written once; q, dout, lse and delta once per query head.
	keys := float64(sumInt32(kn) * G * D)
	b.d.cost(engine, 8*float64(D)*pairs, 2*w*keys+8*keys+rows*float64(D)*(w+4)+8*rows)
	kt, ok := b.upload("flash key tiles", k0, kn, j0, sq, sl, so)
	if ok {
		b.launch(dkvName, [3]int{len(k0), G}, flashThreads, g.dk, g.dv, g.dout, g.q, g.k, g.v, g.lse, g.delta,
			kt[0], kt[1], kt[2], kt[3], kt[4], kt[5], int32(H), int32(G), int32(D), g.scale)
	}
}

// keyTilePairs counts the (key, query) pairs the dk/dv blocks visit per
// query head: each key tile's rows (whole tiles) times its queries from
// the first that sees its first key, rounded up to whole query tiles.
func keyTilePairs(j0, segQLen, segOff []int32, rows, queries int) float64 {
	var n float64
	for t := range j0 {
		first := max(0, int(j0[t]-segOff[t]))
		if left := int(segQLen[t]) - first; left > 0 {
			n += float64(rows) * float64((left+queries-1)/queries*queries)
		}
	}
	return n
}

// keysOf counts the key rows the segments read.
func keysOf(segs []model.Segment) float64 {
	n := 0
	for _, s := range segs {
		n += s.KLen
	}
	return float64(n)
}

func sumInt32(xs []int32) int {
	s := 0
	for _, x := range xs {
		s += int(x)
	}
	return s
}

// Split-K decode attention (kernels/attention_decode.cu).
const (
	decThreads = 128 // DEC_THREADS
	decDMax    = 256 // DEC_DMAX
	decPer     = 8   // DEC_PER: the most query heads per key/value head
	decMinKeys = 256 // keys a split takes at least
)

// decodeSplitKernel names the split-K decode kernel for a cache (suffix ""
// fp32, "_kvh" bf16, "_kv8" fp8) and per query heads per key/value head:
// the one compiled for the smallest head count PER ∈ {1, 2, 4, 8} ≥ per
// (attn_decode_split<suffix>_p<PER>), whose registers hold PER heads'
// accumulators. per must be 1 … decPer (useDecodeSplit's gate).
func decodeSplitKernel(suffix string, per int) string {
	p := 1
	for p < per {
		p *= 2
	}
	return "attn_decode_split" + suffix + "_p" + strconv.Itoa(p)
}

// useDecodeSplit reports whether the split-K decode kernels serve a call
// the per-row kernels would otherwise take (decoding: a few query rows per
// segment): head dims in whole 16-byte pieces, at most decPer query heads
// per key/value head, and no kernel choice forced.
func (b *Backend) useDecodeSplit(D, H, G int) bool {
	if b.attnDecode < 0 || D%8 != 0 || D > decDMax || H/G > decPer {
		return false
	}
	return b.attnDecode > 0 || b.attnTiles == 0
}

// decodeSplits picks how many key ranges each (row, key/value head) is cut
// into: enough blocks for two per SM, each range at least decMinKeys long.
func decodeSplits(blocks, sms, maxKeys int) int {
	want := (2*sms + blocks - 1) / max(blocks, 1)
	return max(1, min(want, (maxKeys+decMinKeys-1)/decMinKeys))
}

// attentionDecode computes out (and lse) for per-row segments with the
// split kernel for H/G heads (decodeSplitKernel) and attn_decode_combine;
// kvWidth is the bytes a key or value element takes (4, 2, or an fp8 row's
// bytes per code).
func (b *Backend) attentionDecode(suffix string, out, lse, q, k, v uint64, qRow, kStart, kCount []int32, H, G, D int, kvWidth float64, scale float32) {
	maxKeys := 0
	for _, n := range kCount {
		maxKeys = max(maxKeys, int(n))
	}
	if b.gr != nil {
		// A graph's split count is the cache's: a row's splits past its
		// keys are empty, and the launch stays the same step after step.
		maxKeys = b.gr.set.maxKeys
	}
	splits := decodeSplits(len(qRow)*G, b.d.Info.SMs, maxKeys)
	part, err := b.alloc(len(qRow) * H * splits * (D + 2))
	if !b.keep(err) {
		return
	}
	defer b.free(part)
	keys := float64(sumInt32(kCount))
	rows := float64(len(qRow) * H)
	// Keys and values once per key/value head; q once; the splits' partial
	// sums written and read back; out and lse once.
	b.kernelCost(int(4*float64(D*H)*keys), int(kvWidth*float64(2*D*G)*keys+4*rows*float64(D)+8*rows*float64(splits*(D+2))+4*rows*float64(D+1)))
	addr, ok := b.upload("decode rows", qRow, kStart, kCount)
	if !ok {
		return
	}
	b.launch(decodeSplitKernel(suffix, H/G), [3]int{len(qRow), G, splits}, decThreads, part.ptr, q, k, v,
		addr[0], addr[1], addr[2], int32(H), int32(G), int32(D), scale, int32(splits))
	b.launch("attn_decode_combine", [3]int{len(qRow), H}, decThreads, out, lse, part.ptr, addr[0], int32(H), int32(D), int32(splits))
}
