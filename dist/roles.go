package dist

import "fmt"

// Roles splits a world of W ranks (dist.rollout_ranks R, docs/data-parallel.md
// "Generation ranks"): ranks 0 … W−R−1 train (log-probs and the update,
// ZeRO over them alone), ranks W−R … W−1 generate (the sampler and the
// verifier). The whole world's group carries the rollout exchange (plans
// and weights out, rows back); the training ranks also form a group of
// their own, on the next port, for everything else a data-parallel step
// sends, so the generation ranks never wait in a training collective.
type Roles struct {
	World   World
	Rollout int // R
}

// NewRoles checks that the world leaves at least one rank of each role.
func NewRoles(w World, rollout int) (Roles, error) {
	r := Roles{World: w, Rollout: rollout}
	if rollout < 0 || (rollout > 0 && rollout >= w.Size) {
		return r, fmt.Errorf("dist.rollout_ranks = %d needs a world of at least %d ranks (one training rank and the generation ranks); this one has %d",
			rollout, rollout+1, w.Size)
	}
	return r, nil
}

// Trainers is the number of training ranks, W−R.
func (r Roles) Trainers() int { return r.World.Size - r.Rollout }

// Generator reports whether this rank generates.
func (r Roles) Generator() bool { return r.Rollout > 0 && r.World.Rank >= r.Trainers() }

// IsGenerator reports whether world rank rank generates.
func (r Roles) IsGenerator(rank int) bool { return r.Rollout > 0 && rank >= r.Trainers() }

// Name is how errors and logs name world rank rank: "training rank 1",
// "generation rank 3".
func (r Roles) Name(rank int) string {
	if r.IsGenerator(rank) {
		return fmt.Sprintf("generation rank %d", rank)
	}
	return fmt.Sprintf("training rank %d", rank)
}

// TrainingWorld is this training rank's place among the training ranks:
// the same rank, W−R ranks, rank 0's host, the next port.
func (r Roles) TrainingWorld() World {
	w := r.World
	w.Size = r.Trainers()
	w.Port++
	return w
}
