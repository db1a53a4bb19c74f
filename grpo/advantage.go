package grpo

// The GRPO advantage of docs/algorithm.md §5.2: the one implementation the
// trainer and gdro-sim share, so the simulator's training pressure and the
// trainer's agree on every group, single-rollout groups included.
//
// For the rows G of one group with rewards s_j: if |G| = 1, μ = 0 and σ = 1
// (the reference's rule: a lone row keeps its raw reward, divided by 1 + ε);
// otherwise μ is the mean and σ the unbiased standard deviation (÷ |G| − 1).
// A_j = (s_j − μ)/(σ + ε), then clipped to [−clip, clip] when clip > 0.

import "math"

// Advantages returns the advantage of every row, rows grouped by group[i]
// (any ids, in any order; groups may differ in size). rewards and group
// have one entry per row.
func Advantages(rewards []float64, group []int, eps, clip float64) []float64 {
	type stat struct {
		n        int
		sum, sq  float64
		mu, sd   float64
		resolved bool
	}
	st := make(map[int]*stat)
	for i, r := range rewards {
		s := st[group[i]]
		if s == nil {
			s = &stat{}
			st[group[i]] = s
		}
		s.n++
		s.sum += r
	}
	for _, s := range st {
		s.mu = s.sum / float64(s.n)
	}
	for i, r := range rewards {
		s := st[group[i]]
		d := r - s.mu
		s.sq += d * d
	}
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		s := st[group[i]]
		if !s.resolved {
			if s.n == 1 {
				s.mu, s.sd = 0, 1
			} else {
				s.sd = math.Sqrt(s.sq / float64(s.n-1))
			}
			s.resolved = true
		}
		a := (r - s.mu) / (s.sd + eps)
		if clip > 0 {
			a = math.Max(-clip, math.Min(clip, a))
		}
		out[i] = a
	}
	return out
}

// Group returns the advantages of one group (every row in the same group).
func Group(rewards []float64, eps, clip float64) []float64 {
	return Advantages(rewards, make([]int, len(rewards)), eps, clip)
}
