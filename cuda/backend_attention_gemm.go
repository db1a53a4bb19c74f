package cuda

// Causal GQA attention on tensor cores for training and prefill, the route
// llm.c takes without cuDNN: per segment, per key/value head and per chunk
// of the query heads that share it, cuBLAS strided-batched products compute
// the scores S = Q·Kᵀ (one product per query head, K shared: stride 0), a
// kernel turns them into causal softmax probabilities, and products finish
// the output (P·V). The backward recomputes S, rebuilds P from the saved
// log-sum-exp, and takes dV += Pᵀ·dO, dP = dO·Vᵀ, dS = scale·P ⊙ (dP − δ),
// dQ = dS·K and dK += dSᵀ·Q as products. Every multiply-add is on tensor
// cores under bf16 or tf32 products; the kernels are bandwidth-bound
// row passes.
//
// Cost against a fused FlashAttention kernel: the products cover the whole
// QLen × KLen rectangle (≈ 2× the causal arithmetic), and the scores of a
// chunk pass through DRAM (written by the product, read and rewritten by
// the softmax, read by the next product). Memory stays bounded: a chunk
// holds at most attnWorkspaceBytes of scores (one head of an 8k-token
// sequence), two in the backward. docs/gpu.md "Attention on tensor cores" has
// the FLOPs, bytes and memory at 2k and 8k.
//
// Layouts, row-major as the model keeps them: q, out, dq (Nq, H, D); k, v,
// dk, dv (Nk, G, D); a chunk's scores (hc, QLen, KLen). cuBLAS is
// column-major, so each product is written as its transpose: the
// column-major view of a row-major (R, C) matrix with row stride ld is its
// (C, R) transpose with leading dimension ld.

import (
	"github.com/gdrotrain/gdrotrain/model"
)

// attnWorkspaceBytes bounds the scores of one head chunk.
const attnWorkspaceBytes = 256 << 20

// useGEMMAttention reports whether the tensor-core route serves a call:
// fp32 keys and values (training, and prefill into an fp32 cache), segments
// long enough to fill products, and no forced kernel choice.
func (b *Backend) useGEMMAttention(halfKV bool, segs []model.Segment, rows int) bool {
	if halfKV || b.attnGEMM < 0 || (b.attnGEMM == 0 && b.attnTiles != 0) {
		return false
	}
	return b.attnGEMM > 0 || rows >= 16*len(segs)
}

// headChunk is how many query heads of a group one workspace holds for a
// segment (at least one: a longer sequence than the bound still runs, one
// head at a time).
func headChunk(s model.Segment, perGroup int) int {
	per := int64(s.QLen) * int64(s.KLen) * 4
	return max(1, min(perGroup, int(attnWorkspaceBytes/max(per, 1))))
}

// workspace allocates the scores buffer for the largest chunk of segs.
func (b *Backend) attnWorkspace(segs []model.Segment, perGroup int) (*buffer, bool) {
	n := 1
	for _, s := range segs {
		n = max(n, s.QLen*s.KLen*headChunk(s, perGroup))
	}
	buf, err := b.alloc(n)
	return buf, b.keep(err)
}

// gemmStrided is one strided-batched product with fp32 operands in the
// backend's precision (strides in elements).
func (b *Backend) gemmStrided(transA, transB bool, m, n, k int, A uint64, lda int, sA int64, B uint64, ldb int, sB int64,
	beta float32, C uint64, ldc int, sC int64, batch int) {
	if !b.ok() {
		return
	}
	b.gemmCost(m, n*batch, k, cudaR32F, b.compute, beta != 0, cudaR32F)
	b.keep(b.d.gemmBatched(transA, transB, m, n, k, 1, A, cudaR32F, lda, sA, B, cudaR32F, ldb, sB, beta,
		C, cudaR32F, ldc, sC, batch, b.compute))
}

// at returns the address of element (row, head) of a (rows, heads, D)
// fp32 tensor at p.
func at(p uint64, row, heads, head, D int) uint64 { return p + uint64(4*((row*heads+head)*D)) }

// attentionGEMM is the forward: out (and lse, when lse ≠ 0) from q, k, v.
func (b *Backend) attentionGEMM(out, lse, q, k, v uint64, segs []model.Segment, H, G, D int, scale float32) {
	per := H / G
	ws, ok := b.attnWorkspace(segs, per)
	if !ok {
		return
	}
	defer b.free(ws)
	for _, s := range segs {
		if s.QLen == 0 {
			continue
		}
		hc, area := headChunk(s, per), int64(s.QLen)*int64(s.KLen)
		for g := 0; g < G; g++ {
			for h0 := 0; h0 < per; h0 += hc {
				h, n := g*per+h0, min(hc, per-h0)
				// Sᵀ (KLen, QLen) = K (KLen, D) · Qᵀ (D, QLen), per head.
				b.gemmStrided(true, false, s.KLen, s.QLen, D, at(k, s.K0, G, g, D), G*D, 0,
					at(q, s.Q0, H, h, D), H*D, int64(D), 0, ws.ptr, s.KLen, area, n)
				b.kernelCost(5*n*s.QLen*s.KLen, 4*2*n*s.QLen*s.KLen)
				b.launch("attn_gemm_softmax", [3]int{n * s.QLen}, rowBlock, ws.ptr, lse, int32(s.QLen), int32(s.KLen),
					int32(s.KLen-s.QLen), int32(s.Q0), int32(h), int32(H), scale)
				// Outᵀ (D, QLen) = Vᵀ (D, KLen) · Pᵀ (KLen, QLen), per head.
				b.gemmStrided(false, false, D, s.QLen, s.KLen, at(v, s.K0, G, g, D), G*D, 0,
					ws.ptr, s.KLen, area, 0, at(out, s.Q0, H, h, D), H*D, int64(D), n)
			}
		}
	}
}

// attentionGEMMBackward accumulates dq, dk, dv (zeroed by the caller) from
// dout, with delta = Σ dO ⊙ O per (row, head).
func (b *Backend) attentionGEMMBackward(dq, dk, dv, dout, q, k, v, lse, delta uint64, segs []model.Segment,
	H, G, D int, scale float32) {
	per := H / G
	P, ok1 := b.attnWorkspace(segs, per)
	dP, ok2 := b.attnWorkspace(segs, per)
	if !ok1 || !ok2 {
		b.free(P, dP)
		return
	}
	defer b.free(P, dP)
	for _, s := range segs {
		if s.QLen == 0 {
			continue
		}
		hc, area := headChunk(s, per), int64(s.QLen)*int64(s.KLen)
		blocks := [3]int{0, (s.KLen + 255) / 256}
		for g := 0; g < G; g++ {
			kg, vg, dkg, dvg := at(k, s.K0, G, g, D), at(v, s.K0, G, g, D), at(dk, s.K0, G, g, D), at(dv, s.K0, G, g, D)
			for h0 := 0; h0 < per; h0 += hc {
				h, n := g*per+h0, min(hc, per-h0)
				qh, dOh := at(q, s.Q0, H, h, D), at(dout, s.Q0, H, h, D)
				blocks[0] = n * s.QLen
				b.gemmStrided(true, false, s.KLen, s.QLen, D, kg, G*D, 0, qh, H*D, int64(D), 0, P.ptr, s.KLen, area, n)
				b.kernelCost(3*n*s.QLen*s.KLen, 4*2*n*s.QLen*s.KLen)
				b.launch("attn_gemm_probs", blocks, 256, P.ptr, lse, int32(s.QLen), int32(s.KLen), int32(s.KLen-s.QLen),
					int32(s.Q0), int32(h), int32(H), scale)
				// dVᵀ (D, KLen) += dOᵀ (D, QLen) · P (QLen, KLen), head by
				// head in order (heads of a group add into one dV).
				for j := 0; j < n; j++ {
					b.gemmStrided(false, true, D, s.KLen, s.QLen, dOh+uint64(4*j*D), H*D, 0,
						P.ptr+uint64(4*int64(j)*area), s.KLen, 0, 1, dvg, G*D, 0, 1)
				}
				// dPᵀ (KLen, QLen) = V (KLen, D) · dOᵀ (D, QLen), per head.
				b.gemmStrided(true, false, s.KLen, s.QLen, D, vg, G*D, 0, dOh, H*D, int64(D), 0, dP.ptr, s.KLen, area, n)
				b.kernelCost(3*n*s.QLen*s.KLen, 4*3*n*s.QLen*s.KLen)
				b.launch("attn_gemm_dscores", blocks, 256, dP.ptr, P.ptr, delta, int32(s.QLen), int32(s.KLen),
					int32(s.Q0), int32(h), int32(H), scale)
				// dQᵀ (D, QLen) = Kᵀ (D, KLen) · dSᵀ (KLen, QLen), per head.
				b.gemmStrided(false, false, D, s.QLen, s.KLen, kg, G*D, 0, dP.ptr, s.KLen, area, 0,
					at(dq, s.Q0, H, h, D), H*D, int64(D), n)
				// dKᵀ (D, KLen) += Qᵀ (D, QLen) · dS (QLen, KLen), head by head.
				for j := 0; j < n; j++ {
					b.gemmStrided(false, true, D, s.KLen, s.QLen, qh+uint64(4*j*D), H*D, 0,
						dP.ptr+uint64(4*int64(j)*area), s.KLen, 0, 1, dkg, G*D, 0, 1)
				}
			}
		}
	}
}
