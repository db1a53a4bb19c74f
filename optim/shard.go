package optim

// Shards: how ZeRO splits every parameter over the data-parallel ranks, and
// the collectives over those splits. Each rank owns, of a parameter of n
// elements, the consecutive range of ⌈n/W⌉ elements at rank·⌈n/W⌉ (the last
// ranks fewer, or none for tiny tensors).
//
// Why per parameter rather than one flat range over the concatenation of
// all parameters: a view of one tensor is all a backend's AdamW needs, the
// all-gather is one collective per parameter of a size every rank knows,
// and a checkpoint shard maps to parameter names, so resharding to another
// world size is a per-name slice of the assembled moments.

import "github.com/gdrotrain/gdrotrain/model"

// Shard is this rank's part of the optimizer state: rank Rank of World
// (model.Shard, defined there so that the CUDA backend's collectives take
// it without importing this package).
type Shard = model.Shard

// ShardViews returns the part of each tensor s owns, as a flat view (nil
// where the part is empty).
func ShardViews(ts []*model.Tensor, s Shard) []*model.Tensor {
	out := make([]*model.Tensor, len(ts))
	for i, t := range ts {
		if lo, hi := s.Range(t.Numel()); hi > lo {
			out[i] = t.View(t.Numel()).Rows(lo, hi)
		}
	}
	return out
}

// AllReducer sums tensors over the data-parallel ranks (the replicated
// strategy's gradient all-reduce).
type AllReducer interface {
	// AllReduceSum replaces every tensor by its element-wise sum over the
	// ranks; every rank ends with the same values.
	AllReduceSum(ts []*model.Tensor) error
}

// ShardReducer sums gradients over the data-parallel ranks for a sharded
// optimizer (ZeRO-1's reduce-scatter): afterwards each ts[i] holds, in its
// Range under s, the sum over the ranks; elsewhere its contents are
// undefined. Half the traffic of an all-reduce, since each rank needs only
// the part its optimizer updates.
type ShardReducer interface {
	ReduceScatterShards(ts []*model.Tensor, s Shard) error
}

// ShardAccumulator is ZeRO-2's reduce-scatter: for each i, acc[i] += the
// sum over the ranks of ts[i] within s.Range (acc[i] holds that range
// only; nil where the range is empty). ts are left with undefined
// contents (the caller zeroes them).
type ShardAccumulator interface {
	ReduceScatterAdd(ts, acc []*model.Tensor, s Shard) error
}

// ShardGatherer completes a sharded update: after it returns, every rank's
// tensors hold, in each rank r's Range, the values rank r wrote there (an
// all-gather over the data-parallel ranks). The tensors are listed in
// Params.Named order and are the same on every rank.
type ShardGatherer interface {
	GatherShards(ts []*model.Tensor, s Shard) error
}

// BlockGatherer all-gathers in place: buf (float32, or bf16 storage) holds
// World blocks of equal size, and afterwards every rank's block r holds
// what rank r's block r held. With blocks of ⌈n/W⌉ elements, block r
// starts with rank r's Range of a parameter of n elements, so a buffer
// padded to W·⌈n/W⌉ gathers a sharded parameter without another copy.
type BlockGatherer interface {
	GatherBlocks(buf *model.Tensor, s Shard) error
}

// ShardComm is every collective ZeRO needs: the NCCL communicator on CUDA
// (cuda.Comm) and the control plane (HostComm) implement it.
type ShardComm interface {
	ShardReducer
	ShardAccumulator
	ShardGatherer
	BlockGatherer
}

// Summer sums float64 values over the ranks in a fixed order, the same
// total on every rank (the control plane, dist.Group): the gradient norm's
// sums of squares.
type Summer interface {
	SumFloat64(name string, x []float64) error
}
