package cuda

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// GatherShards completes a ZeRO-1 optimizer step (model.ShardGatherer):
// each tensor's owned range, per model.Shard.Range, goes from its rank to
// every rank. NCCL's all-gather needs equal blocks, and the last ranks'
// ranges can be shorter or empty, so each tensor travels through a
// scratch buffer of World·⌈n/World⌉ elements: the rank's range is copied
// into its block, the blocks are gathered in place (NCCL allows the send
// buffer to be the rank's block of the receive buffer), and the first n
// elements are copied back. Copies and collectives run in order on the
// compute stream; the scratch buffer goes back to the stream-ordered pool
// after each tensor, so the peak is one padded copy of the largest
// parameter (the embedding: 1.2 GB for Qwen3-1.7B) and the pool serves the
// next tensor of the same size without an allocation.
func (c *Comm) GatherShards(ts []*model.Tensor, s model.Shard) error {
	if s.World != c.world || s.Rank != c.rank {
		return fmt.Errorf("gather shards: the optimizer is rank %d of %d but the communicator rank %d of %d", s.Rank, s.World, c.rank, c.world)
	}
	for i, t := range ts {
		n := t.Numel()
		chunk := (n + c.world - 1) / c.world
		if chunk == 0 {
			continue
		}
		tmp := c.b.Scratch(c.world * chunk)
		flat := t.View(n)
		lo, hi := s.Range(n)
		block := tmp.Rows(c.rank*chunk, (c.rank+1)*chunk)
		if hi > lo {
			c.b.Copy(block.Rows(0, hi-lo), flat.Rows(lo, hi))
		}
		if err := c.AllGather(tmp, block); err != nil {
			c.b.Release(tmp)
			return fmt.Errorf("parameter %d of %d (%d elements): %w", i, len(ts), n, err)
		}
		c.b.Copy(flat, tmp.Rows(0, n))
		c.b.Release(tmp)
	}
	if err := c.b.Err(); err != nil {
		c.b.ResetErr()
		return fmt.Errorf("gather shards (rank %d of %d): %w", c.rank, c.world, err)
	}
	return nil
}

var _ model.ShardGatherer = (*Comm)(nil)

// ReduceScatterShards sums each tensor over the ranks into this rank's
// range only (model.ShardReducer, ZeRO-2's reduce-scatter: half an
// all-reduce's traffic). As in GatherShards each tensor goes through a
// padded buffer of World·⌈n/World⌉ elements (the padding zeroed, so no
// garbage is summed): the whole tensor is copied in, NCCL reduce-scatters
// it in place (the receive buffer is the rank's block of the send
// buffer), and the rank's block is copied back to its range. The rest of
// the tensor keeps this rank's own, unsummed values.
func (c *Comm) ReduceScatterShards(ts []*model.Tensor, s model.Shard) error {
	if s.World != c.world || s.Rank != c.rank {
		return fmt.Errorf("reduce-scatter shards: the optimizer is rank %d of %d but the communicator rank %d of %d", s.Rank, s.World, c.rank, c.world)
	}
	for i, t := range ts {
		n := t.Numel()
		chunk := (n + c.world - 1) / c.world
		if chunk == 0 {
			continue
		}
		tmp := c.b.Scratch(c.world * chunk)
		flat := t.View(n)
		c.b.Copy(tmp.Rows(0, n), flat)
		if pad := c.world*chunk - n; pad > 0 {
			c.b.Zero(tmp.Rows(n, c.world*chunk))
		}
		block := tmp.Rows(c.rank*chunk, (c.rank+1)*chunk)
		if err := c.ReduceScatter(block, tmp); err != nil {
			c.b.Release(tmp)
			return fmt.Errorf("gradient %d of %d (%d elements): %w", i, len(ts), n, err)
		}
		if lo, hi := s.Range(n); hi > lo {
			c.b.Copy(flat.Rows(lo, hi), block.Rows(0, hi-lo))
		}
		c.b.Release(tmp)
	}
	if err := c.b.Err(); err != nil {
		c.b.ResetErr()
		return fmt.Errorf("reduce-scatter shards (rank %d of %d): %w", c.rank, c.world, err)
	}
	return nil
}

var _ model.ShardReducer = (*Comm)(nil)
