package cuda

import (
	"slices"
	"sort"

	"github.com/gdrotrain/gdrotrain/model"
)

// Staleness of a bf16 copy (Shadow) by element range.
//
// A buffer's bf16 copy is stale where the fp32 values were written after
// the copy was made. That is kept per element range, not per buffer,
// because of the fused weights: q/k/v are row views of one Layer.QKV
// buffer and gate/up of one buffer, and AdamW updates them view by view.
// AdamW writes the bf16 copy of the view it updates in the same pass, so
// after an optimizer step the whole buffer is fresh without a conversion
// of its own; with one flag a buffer, the first view's update would have
// to leave the flag set (the other views not yet written), and every
// product after every step paid an f32_to_bf16 pass over the fused
// weights. halfOf converts only what is stale.
//
// The bookkeeping is conservative: an op that writes through a tensor
// marks the tensor's whole element range [Off, Off+Numel) stale, whatever
// part of it the op actually writes (the ops write only inside the tensor:
// tensors are contiguous row views), and a range is marked fresh only by
// an op that wrote its bf16 copy from the fp32 values (AdamW, the fused
// norm backward, halfOf's conversion).

// span is the element range [lo, hi).
type span struct{ lo, hi int }

// spans is a set of element indices: sorted, disjoint, non-adjacent
// ranges (the common cases are none and one covering the buffer).
type spans []span

// add returns s ∪ [lo, hi).
func (s spans) add(lo, hi int) spans {
	if lo >= hi {
		return s
	}
	// s[i] is the first range that ends at or after lo (touching ones merge).
	i := sort.Search(len(s), func(k int) bool { return s[k].hi >= lo })
	j := i
	for ; j < len(s) && s[j].lo <= hi; j++ {
		lo, hi = min(lo, s[j].lo), max(hi, s[j].hi)
	}
	return slices.Replace(s, i, j, span{lo, hi})
}

// remove returns s \ [lo, hi).
func (s spans) remove(lo, hi int) spans {
	if lo >= hi || len(s) == 0 {
		return s
	}
	if lo <= s[0].lo && hi >= s[len(s)-1].hi {
		return s[:0]
	}
	out := make(spans, 0, len(s)+1)
	for _, r := range s {
		if r.hi <= lo || r.lo >= hi {
			out = append(out, r)
			continue
		}
		if r.lo < lo {
			out = append(out, span{r.lo, lo})
		}
		if r.hi > hi {
			out = append(out, span{hi, r.hi})
		}
	}
	return out
}

// elems counts the indices in s.
func (s spans) elems() int {
	n := 0
	for _, r := range s {
		n += r.hi - r.lo
	}
	return n
}

// markStale records that an op writes ts' elements: their buffers' bf16
// copies, if any, are stale over their ranges. addrs marks the first
// tensor of the ops that write it; ops that write others too mark those.
func markStale(ts ...*model.Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		if buf, ok := t.Store.(*buffer); ok && buf.shadow != nil {
			buf.stale = buf.stale.add(t.Off, t.Off+t.Numel())
		}
	}
}

// markAllStale records a write to the whole of buf.
func markAllStale(buf *buffer) {
	if buf.shadow != nil {
		buf.stale = buf.stale.add(0, buf.elems)
	}
}

// markFresh records that ops issued so far wrote elements [lo, hi) of
// buf's bf16 copy from its fp32 values (and nothing wrote the fp32 values
// since), unless the backend has failed (the op may not have run). Under a
// graph capture or replay (graph.go) the ops run only if the graph is
// launched: the range is marked fresh at once (later ops of the step may
// mark it stale again), and graphRun.undo puts back what it took away if
// the step's graph is not launched.
func (b *Backend) markFresh(buf *buffer, lo, hi int) {
	if buf.shadow == nil || !b.ok() {
		return
	}
	if gr := b.gr; gr != nil && b.d.rec != nil {
		for _, r := range buf.stale {
			if lo, hi := max(lo, r.lo), min(hi, r.hi); lo < hi {
				gr.fresh = append(gr.fresh, freshMark{buf, span{lo, hi}})
			}
		}
	}
	buf.stale = buf.stale.remove(lo, hi)
}

// freshMark is a range a graph step marked fresh (markFresh).
type freshMark struct {
	buf *buffer
	r   span
}

// undo marks stale again the ranges the step marked fresh: its graph was
// not launched, so the conversions that made them fresh never ran. (Ops of
// the step that wrote them never ran either; marking stale is always
// safe.)
func (gr *graphRun) undo() {
	for _, m := range gr.fresh {
		if !m.buf.released {
			m.buf.stale = m.buf.stale.add(m.r.lo, m.r.hi)
		}
	}
	gr.fresh = nil
}
