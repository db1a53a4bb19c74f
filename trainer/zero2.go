package trainer

// ZeRO-2 in a data-parallel run (dist.zero_stage: 2): the gradients are
// sharded too (model/zero2.go). Each rank keeps the gradient window and
// the accumulators of its ranges; during every micro-batch's backward the
// completed parts are reduce-scattered into the accumulators and zeroed,
// and AdamW reads the accumulators. A rank that runs fewer micro-batches
// of a mini-batch than another (the micro-batches are dealt round-robin)
// flushes its zeroed window once per missing round, so every rank issues
// the same collectives in the same order.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// zero2 is one rank's sharded gradient state.
type zero2 struct {
	b      model.Backend
	window []*model.Tensor // the window's tensor of each parameter, Params.Named order
	acc    []*model.Tensor // the owned range's accumulator (nil where empty)
	parts  model.GradParts
	red    model.ShardAccumulator
	shard  model.Shard
}

// newZero2 replaces the trainer's gradients by ZeRO-2's window and gives
// the sharded optimizer the accumulators.
func (t *Trainer) newZero2(b model.Backend) error {
	sm := t.Opt.Sharded
	if sm == nil {
		return fmt.Errorf("dist.zero_stage 2 needs the sharded optimizer of ZeRO-1 (several ranks)")
	}
	mc := t.Policy.Cfg
	t.grads = model.NewWindowGrads(b, mc)
	z := &zero2{b: b, parts: model.PartsOf(mc), shard: sm.Shard}
	for i, np := range t.grads.Named(mc) {
		z.window = append(z.window, *np.Ptr)
		var a *model.Tensor
		if lo, hi := sm.Shard.Range(sm.Numel[i]); hi > lo {
			a = b.New(hi - lo)
		}
		z.acc = append(z.acc, a)
	}
	if r, ok := t.dp.red.(model.ShardAccumulator); ok {
		z.red = r
	} else {
		z.red = HostReducer{B: b, G: t.dp.g}
	}
	sm.G = z.acc
	t.z2 = z
	t.Log.Printf("ZeRO-2: this rank keeps a one-layer gradient window and the gradients of 1/%d of every parameter", sm.Shard.World)
	return nil
}

// flush reduce-scatters the parameters' window gradients into the
// accumulators and zeroes them (model.GradFlush).
func (z *zero2) flush(named []int) error {
	ts, acc := make([]*model.Tensor, len(named)), make([]*model.Tensor, len(named))
	for j, i := range named {
		ts[j], acc[j] = z.window[i], z.acc[i]
	}
	if err := z.red.ReduceScatterAdd(ts, acc, z.shard); err != nil {
		return fmt.Errorf("gradient reduce-scatter: %w", err)
	}
	for _, t := range ts {
		z.b.Zero(t)
	}
	return z.b.Err()
}

// flushEmpty is a round without a micro-batch: the zeroed window's parts,
// in the backward's order.
func (z *zero2) flushEmpty() error {
	for _, part := range z.parts.All() {
		if err := z.flush(part); err != nil {
			return err
		}
	}
	return nil
}

// zero clears the window and the accumulators before a mini-batch.
func (z *zero2) zero() {
	for _, t := range z.window {
		z.b.Zero(t)
	}
	for _, a := range z.acc {
		if a != nil {
			z.b.Zero(a)
		}
	}
}

// views are the accumulators, for the clip.
func (z *zero2) views() []*model.Tensor { return z.acc }

// roundsMissing is how many rounds of the mini-batch of micro-batches
// [k0, k1) this rank has no micro-batch for: the most any rank runs minus
// its own count.
func (t *Trainer) roundsMissing(k0, k1 int) int {
	counts := make([]int, t.dp.size)
	for k := k0; k < k1; k++ {
		counts[k%t.dp.size]++
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	return most - counts[t.dp.rank]
}

// ReduceScatterAdd implements model.ShardAccumulator through the control
// plane: the fixed-order sum of the whole tensors, of which each rank adds
// its range.
func (h HostReducer) ReduceScatterAdd(ts, acc []*model.Tensor, s model.Shard) error {
	if err := h.AllReduceSum(ts); err != nil {
		return err
	}
	for i, v := range model.ShardViews(ts, s) {
		if v != nil && acc[i] != nil {
			h.B.Add(acc[i], v)
		}
	}
	return h.B.Err()
}
