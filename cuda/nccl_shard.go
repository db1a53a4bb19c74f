package cuda

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// ZeRO's two collectives over per-parameter ranges (model.Shard.Range).
// NCCL's reduce-scatter and all-gather need equal blocks, and the last
// ranks' ranges can be shorter or empty, so each tensor of n elements
// travels through a scratch buffer of World·⌈n/World⌉ elements whose block
// Rank is this rank's range; the collective runs in place (NCCL allows the
// rank's block of the receive buffer to be the send buffer, and the
// reverse). Copies and collectives run in order on the compute stream; the
// buffer goes back to the stream-ordered pool after each tensor, so the
// peak is one padded copy of the largest parameter (the embedding: 1.2 GB
// for Qwen3-1.7B) and the pool serves the next tensor of its size without
// an allocation. The bf16-only matrices of sharded fp32 masters need no
// such trip: their storage is allocated padded, and they gather in place
// (gatherHalf), at 2 bytes an element.

// padded is one tensor's trip through the scratch buffer.
type padded struct {
	flat, tmp, block *model.Tensor // the tensor flat, the buffer, this rank's block of it
	n, lo, hi        int           // elements; this rank's range
}

// eachPadded runs do for every tensor of ts with its scratch buffer.
func (c *Comm) eachPadded(what string, ts []*model.Tensor, s model.Shard, do func(i int, p padded) error) error {
	if s.World != c.world || s.Rank != c.rank {
		return fmt.Errorf("%s: the optimizer is rank %d of %d but the communicator rank %d of %d", what, s.Rank, s.World, c.rank, c.world)
	}
	for i, t := range ts {
		n := t.Numel()
		chunk := (n + c.world - 1) / c.world
		if chunk == 0 {
			continue
		}
		p := padded{flat: t.View(n), tmp: c.b.Scratch(c.world * chunk), n: n}
		p.block = p.tmp.Rows(c.rank*chunk, (c.rank+1)*chunk)
		p.lo, p.hi = s.Range(n)
		err := do(i, p)
		c.b.Release(p.tmp)
		if err != nil {
			return fmt.Errorf("%s: tensor %d of %d (%d elements): %w", what, i, len(ts), n, err)
		}
	}
	if err := c.b.Err(); err != nil {
		c.b.ResetErr()
		return fmt.Errorf("%s (rank %d of %d): %w", what, c.rank, c.world, err)
	}
	return nil
}

// reduceScatterPadded leaves in p.block the sum over the ranks of this
// rank's block of the tensor. The buffer's padding is zeroed, so no
// garbage is summed.
func (c *Comm) reduceScatterPadded(p padded) error {
	c.b.Copy(p.tmp.Rows(0, p.n), p.flat)
	if total := p.tmp.Numel(); total > p.n {
		c.b.Zero(p.tmp.Rows(p.n, total))
	}
	return c.ReduceScatter(p.block, p.tmp)
}

// GatherShards completes a ZeRO-1 optimizer step (optim.ShardGatherer):
// each tensor's range goes from its rank to every rank. The bf16-only
// weights of sharded masters go first (gatherHalf), then the float32
// tensors; every rank lists the same tensors, so the collectives match.
func (c *Comm) GatherShards(ts []*model.Tensor, s model.Shard) error {
	var whole []*model.Tensor
	for i, t := range ts {
		if !c.b.IsHalfOnly(t) {
			whole = append(whole, t)
			continue
		}
		if err := c.gatherHalf(t, s); err != nil {
			return fmt.Errorf("gather shards: tensor %d of %d (%d bf16 elements): %w", i, len(ts), t.Numel(), err)
		}
	}
	return c.eachPadded("gather shards", whole, s, func(_ int, p padded) error {
		if p.hi > p.lo {
			c.b.Copy(p.block.Rows(0, p.hi-p.lo), p.flat.Rows(p.lo, p.hi))
		}
		if err := c.AllGather(p.tmp, p.block); err != nil {
			return err
		}
		c.b.Copy(p.flat, p.tmp.Rows(0, p.n))
		return nil
	})
}

// ReduceScatterShards sums each tensor over the ranks into this rank's
// range only (optim.ShardReducer: half an all-reduce's traffic); the rest
// of the tensor keeps this rank's own, unsummed values.
func (c *Comm) ReduceScatterShards(ts []*model.Tensor, s model.Shard) error {
	return c.eachPadded("reduce-scatter shards", ts, s, func(_ int, p padded) error {
		if err := c.reduceScatterPadded(p); err != nil {
			return err
		}
		if p.hi > p.lo {
			c.b.Copy(p.flat.Rows(p.lo, p.hi), p.block.Rows(0, p.hi-p.lo))
		}
		return nil
	})
}

// ReduceScatterAdd is ZeRO-2's reduce-scatter (optim.ShardAccumulator):
// each tensor's sum over the ranks, this rank's range of it added into
// acc[i]. The tensors are left as they were; the caller zeroes them.
func (c *Comm) ReduceScatterAdd(ts, acc []*model.Tensor, s model.Shard) error {
	if len(acc) != len(ts) {
		return fmt.Errorf("reduce-scatter-add: %d tensors but %d accumulators", len(ts), len(acc))
	}
	return c.eachPadded("reduce-scatter-add", ts, s, func(i int, p padded) error {
		if err := c.reduceScatterPadded(p); err != nil {
			return err
		}
		if p.hi > p.lo {
			if acc[i] == nil || acc[i].Numel() != p.hi-p.lo {
				return fmt.Errorf("the accumulator of range [%d, %d) is missing or of another size", p.lo, p.hi)
			}
			c.b.Add(acc[i], p.block.Rows(0, p.hi-p.lo))
		}
		return nil
	})
}

// GatherBlocks all-gathers buf in place (optim.BlockGatherer): its World
// equal blocks, float32 or bf16, each from its rank.
func (c *Comm) GatherBlocks(buf *model.Tensor, s model.Shard) error {
	if s.World != c.world || s.Rank != c.rank {
		return fmt.Errorf("gather blocks: the optimizer is rank %d of %d but the communicator rank %d of %d", s.Rank, s.World, c.rank, c.world)
	}
	n := buf.Numel()
	if n%c.world != 0 {
		return fmt.Errorf("gather blocks (rank %d of %d): %d elements are not %d equal blocks", c.rank, c.world, n, c.world)
	}
	flat, chunk := buf.View(n), n/c.world
	if chunk == 0 {
		return nil
	}
	return c.AllGather(flat, flat.Rows(c.rank*chunk, (c.rank+1)*chunk))
}

// gatherHalf all-gathers the ranges of a bf16-only weight (model.HalfPrecision,
// written by AdamWHalf). In place where the weight's storage has room for
// W·⌈n/W⌉ elements from its start that belong to no other tensor: n a
// multiple of W, or the weight the last tensor of a storage padded for it
// (model.ShardedAdamW.ShardMasters pads every sharded weight's storage so).
// Otherwise (a fused storage's earlier view of n not a multiple of W)
// through a bf16 scratch buffer, as the float32 tensors go.
func (c *Comm) gatherHalf(t *model.Tensor, s model.Shard) error {
	if s.World != c.world || s.Rank != c.rank {
		return fmt.Errorf("the optimizer is rank %d of %d but the communicator rank %d of %d", s.Rank, s.World, c.rank, c.world)
	}
	n := t.Numel()
	total := s.PaddedLen(n)
	chunk := total / c.world
	if chunk == 0 {
		return nil
	}
	buf := t.Store.(*buffer)
	if total == n || (t.Off+n == buf.elems-buf.padding && t.Off+total <= buf.elems) {
		return c.GatherBlocks(&model.Tensor{Shape: []int{total}, Off: t.Off, Store: buf}, s)
	}
	tmp := c.b.newTensor("gather scratch", -2, []int{total})
	if err := c.b.Err(); err != nil {
		return err
	}
	defer c.b.Release(tmp)
	p, _, ok := c.b.operand("gather shards", 0, t)
	if !ok {
		return c.b.Err()
	}
	pt := tmp.Store.(*buffer).ptr
	if lo, hi := s.Range(n); hi > lo {
		c.b.keep(c.b.d.copyDevice(pt+2*uint64(c.rank*chunk), p+2*uint64(lo), 2*int64(hi-lo)))
	}
	if err := c.b.Err(); err != nil {
		return err
	}
	if err := c.GatherBlocks(tmp, s); err != nil {
		return err
	}
	c.b.keep(c.b.d.copyDevice(p, pt, 2*int64(n)))
	return c.b.Err()
}
