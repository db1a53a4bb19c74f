package model

// A rank's share of a parameter under ZeRO (optim's sharded strategies):
// the optimizer splits every parameter, and the backends' collectives
// (the CUDA backend's NCCL communicator) move the same ranges. The type
// lives here, below both, so the CUDA backend does not import optim
// (docs/architecture.md, the layers); optim.Shard is this type.

import "fmt"

// Shard is this rank's part of the optimizer state: rank Rank of World.
// World ≤ 1 means unsharded.
type Shard struct{ Rank, World int }

// Sharded reports whether the state is split over several ranks.
func (s Shard) Sharded() bool { return s.World > 1 }

// Range is the owned part [lo, hi) of a parameter of n elements: ranks own
// consecutive chunks of ⌈n/W⌉ elements, the last ones possibly fewer or none.
func (s Shard) Range(n int) (lo, hi int) {
	if !s.Sharded() {
		return 0, n
	}
	chunk := (n + s.World - 1) / s.World
	lo = min(n, s.Rank*chunk)
	return lo, min(n, lo+chunk)
}

// PaddedLen is W·⌈n/W⌉: the elements of a padded buffer whose block r
// holds rank r's Range of a parameter of n elements.
func (s Shard) PaddedLen(n int) int {
	if !s.Sharded() {
		return n
	}
	return s.World * ((n + s.World - 1) / s.World)
}

// Validate checks the rank against the world size.
func (s Shard) Validate() error {
	if s.World > 1 && (s.Rank < 0 || s.Rank >= s.World) {
		return fmt.Errorf("optimizer shard: rank %d is not in 0…%d", s.Rank, s.World-1)
	}
	return nil
}
