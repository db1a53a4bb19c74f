package model

// The LM head's chunks, for the forward's log-probs and the backward's
// gradient. The loss's gradient needs the same logits as the log-probs,
// and is known only after the forward has returned them, so the backward
// either keeps the forward's logits or recomputes them. At Qwen3-1.7B's
// 151,936-token vocabulary and 8 × 2k tokens (14,336 target rows), keeping
// them all would hold M·V·4 = 8.7 GB (fp32; bf16 logits would move
// log-probs, and with them the importance ratios, by up to ≈ 0.06 at
// logits of 16) until the backward, 8.5× the two 512 MiB chunks the head
// works in, to save the recomputation's 2·M·V·C = 8.9 TFLOP (≈ 12 ms
// estimated on an H100) and its 8.7 GB write. The bound stays: the head
// keeps only the forward's last chunk, whose buffer it holds anyway, and
// the backward walks the chunks from the last, so the kept logits are read
// first and their buffer then serves the recomputations. The peak is
// unchanged (a logits chunk and a gradient chunk) and a pass of at most
// one chunk (883 target rows at that vocabulary) is never recomputed. The
// backward's chunks accumulate into the head's gradient in reverse order.
//
// Where the backend keeps activations in bf16 (HalfPrecision.ActivationHalf), the
// logits' gradient is written in bf16: its only readers are the two
// products, which round it to bf16 anyway, so the same numbers flow for
// half the bytes written and read (4.4 GB fewer writes at 8 × 2k).

// headMode says how headChunks walks the chunks.
type headMode int

const (
	headForward  headMode = iota // in order, the last chunk's logits kept for the backward
	headFused                    // in order, nothing kept (the fused head: tokenloss.go)
	headBackward                 // from the last chunk, the kept logits read first
)

// headChunks computes the LM-head logits of the pass's target rows chunk
// by chunk and hands each (rows lo..hi, logits (hi−lo, V), and the
// final-normed rows h (hi−lo, C) the logits came from) to f: in order for
// the forward, which keeps the last chunk's logits in p.headLast unless
// the head is fused; from the last chunk for the backward, which reads the
// kept logits instead of recomputing them (h is nil then) and releases
// them.
func (m *Model) headChunks(p *Pass, mode headMode, f func(lo, hi int, logits, h *Tensor)) {
	backward := mode == headBackward
	b := m.B
	M, chunk := len(p.rows), m.headChunkRows()
	if M == 0 {
		return
	}
	logits, kept := p.headLast, p.headLast != nil && backward
	p.headLast = nil
	if logits == nil {
		logits = Scratch(b, min(chunk, M), m.Cfg.VocabSize)
	}
	h := Scratch(b, min(chunk, M), m.Cfg.HiddenSize)
	last := (M - 1) / chunk * chunk // the first row of the last chunk
	for i := 0; i <= last/chunk; i++ {
		lo := i * chunk
		if backward {
			lo = last - i*chunk
		}
		hi := min(lo+chunk, M)
		hc, lc := h.Rows(0, hi-lo), logits.Rows(0, hi-lo)
		if kept && lo == last {
			hc = nil
		} else {
			b.GatherRows(hc, p.xf, p.rows[lo:hi])
			b.MatMul(lc, hc, m.P.LMHead, false, true, false)
		}
		f(lo, hi, lc, hc)
	}
	Release(b, h)
	if mode == headForward {
		p.headLast = logits
	} else {
		Release(b, logits)
	}
}

// headGradScratch allocates a chunk of the logits' gradient (rows, V): bf16
// where the backend keeps activations so (HalfPrecision.ActivationHalf), fp32 elsewhere.
func (m *Model) headGradScratch(rows int) *Tensor {
	if as := TrainerCapsOf(m.B).Half; as != nil {
		return as.ActivationHalf(rows, m.Cfg.VocabSize)
	}
	return Scratch(m.B, rows, m.Cfg.VocabSize)
}

// headChunkElems is HeadChunkElems; tests shrink it to run several chunks
// on a tiny vocabulary.
var headChunkElems = HeadChunkElems
