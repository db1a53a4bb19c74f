package optim

// ZeRO-2: gradients sharded over data-parallel ranks as well as the
// optimizer state. Under ZeRO-1 every rank accumulates the whole gradient
// of its micro-batches (4 bytes per parameter: 30.5 GiB for Qwen3-8B) and
// the ranks reduce-scatter it once per optimizer step. Under ZeRO-2 a rank
// keeps only
//
//   - a gradient window (window.go): one layer's gradients, shared by
//     every layer, plus the input embedding's, the final norm's and the LM
//     head's (an untied head shares the embedding's storage: its gradient
//     is complete and sent before the embedding's backward begins to
//     accumulate);
//   - accumulators for its own range of every parameter (4/W bytes per
//     parameter).
//
// The backward reports each part of the window as soon as the
// micro-batch's gradient of it is complete (model.GradFlush); the strategy
// reduce-scatters the part over the ranks, adds its range into the
// accumulators and zeroes the part, so the next layer's backward finds it
// clear. AdamW reads the accumulators (ShardedAdamW.G). The price is one
// reduce-scatter of the whole gradient per micro-batch instead of one per
// optimizer step; it runs on the compute stream (NCCL) in the order the
// backward frees the parts, so every rank issues the same collectives. A
// rank that runs fewer micro-batches of a mini-batch than another (the
// micro-batches are dealt round-robin) flushes its zeroed window once per
// missing round (Reduce), so the collectives still match.
//
// Summation order changes: the ranks' sums are added micro-batch by
// micro-batch rather than once, so ZeRO-2 equals ZeRO-1 bit for bit when
// each rank runs one micro-batch per optimizer step, and otherwise within
// floating-point reassociation (tested in trainer).

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// zero2 is one rank's sharded gradient state.
type zero2 struct {
	sharded
	window []*model.Tensor // the window's tensor of each parameter, Params.Named order
	acc    []*model.Tensor // the owned range's accumulator (nil where empty)
	parts  model.GradParts
}

// AllocGrads makes the window and the accumulators, and gives the sharded
// optimizer the accumulators.
func (z *zero2) AllocGrads() error {
	b, mc, o := z.m.B, z.m.Cfg, z.opt
	if tr := z.m.Trainable(); tr.LoRA != nil {
		// Adapters are small: their whole gradient is the window.
		z.grads = model.NewLike(b, mc, tr)
	} else {
		z.grads = NewWindowGrads(b, mc)
	}
	z.parts = model.PartsOfNamed(z.grads.Named(mc), mc.NumHiddenLayers)
	for i, np := range z.grads.Named(mc) {
		z.window = append(z.window, *np.Ptr)
		var a *model.Tensor
		if lo, hi := o.Shard.Range(o.Numel[i]); hi > lo {
			a = b.New(hi - lo)
		}
		z.acc = append(z.acc, a)
	}
	o.G = z.acc
	z.logf("ZeRO-2: this rank keeps a one-layer gradient window and the gradients of 1/%d of every parameter", o.Shard.World)
	return nil
}

func (z *zero2) Flush() model.GradFlush { return z.flush }

// flush reduce-scatters the parameters' window gradients into the
// accumulators and zeroes them (model.GradFlush).
func (z *zero2) flush(named []int) error {
	ts, acc := make([]*model.Tensor, len(named)), make([]*model.Tensor, len(named))
	for j, i := range named {
		ts[j], acc[j] = z.window[i], z.acc[i]
	}
	if err := z.comm.ReduceScatterAdd(ts, acc, z.opt.Shard); err != nil {
		return fmt.Errorf("gradient reduce-scatter: %w", err)
	}
	for _, t := range ts {
		z.m.B.Zero(t)
	}
	return z.m.B.Err()
}

// ZeroGrads clears the window and the accumulators before a mini-batch.
func (z *zero2) ZeroGrads() {
	for _, t := range z.window {
		z.m.B.Zero(t)
	}
	for _, a := range z.acc {
		if a != nil {
			z.m.B.Zero(a)
		}
	}
}

// Reduce: the backward has sent the gradients already; a rank that ran
// fewer micro-batches than another sends empty rounds (the zeroed
// window's parts, in the backward's order) to match its collectives.
func (z *zero2) Reduce(missing int) error {
	for range missing {
		for _, part := range z.parts.All() {
			if err := z.flush(part); err != nil {
				return fmt.Errorf("an empty round of the gradient reduce-scatter: %w", err)
			}
		}
	}
	return nil
}

// Clip clips the accumulators.
func (z *zero2) Clip() (float64, error) { return z.clipViews(z.acc) }
