package grpo

import (
	"math"
	"testing"
)

// The test vectors of docs/algorithm.md §5.2 (ε = 1e−6), groups of varying
// size in one batch, the single-rollout rule and the clip.
func TestAdvantages(t *testing.T) {
	one12 := append([]float64{1}, fill(-1, 11)...)
	for _, c := range []struct {
		name    string
		rewards []float64
		group   []int
		clip    float64
		want    []float64
		tol     float64
	}{
		{"1 of 4", []float64{1, -1, -1, -1}, nil, 0, []float64{1.4999985, -0.4999995, -0.4999995, -0.4999995}, 5e-8},
		{"2 of 4", []float64{1, 1, -1, -1}, nil, 0, []float64{0.8660247, 0.8660247, -0.8660247, -0.8660247}, 5e-8},
		{"1 of 2", []float64{1, -1}, nil, 0, []float64{0.7071063, -0.7071063}, 5e-8},
		{"1 of 12", one12, nil, 0, append([]float64{3.1754210}, fill(-0.2886746, 11)...), 5e-8},
		{"all equal", []float64{1, 1, 1}, nil, 0, []float64{0, 0, 0}, 0},
		// 0/1 rewards halve σ, so ε weighs twice: within 2e-6 of the ±1 values
		{"0/1 rewards", []float64{1, 0, 0, 0}, nil, 0, []float64{1.4999985, -0.4999995, -0.4999995, -0.4999995}, 2e-6},
		// a single row: μ = 0, σ = 1, so it keeps its raw reward / (1 + ε)
		{"single +1", []float64{1}, nil, 0, []float64{1 / (1 + 1e-6)}, 1e-15},
		{"single −1", []float64{-1}, nil, 0, []float64{-1 / (1 + 1e-6)}, 1e-15},
		{"mixed groups, interleaved ids", []float64{1, 5, -1, 0.5}, []int{7, 9, 7, 3}, 0,
			[]float64{0.7071063, 5 / (1 + 1e-6), -0.7071063, 0.5 / (1 + 1e-6)}, 5e-8},
		{"clip", []float64{1, -1, -1, -1}, nil, 1, []float64{1, -0.4999995, -0.4999995, -0.4999995}, 5e-8},
	} {
		g := c.group
		if g == nil {
			g = make([]int, len(c.rewards))
		}
		got := Advantages(c.rewards, g, 1e-6, c.clip)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d advantages, want %d", c.name, len(got), len(c.want))
		}
		for i := range c.want {
			if d := math.Abs(got[i] - c.want[i]); !(d <= c.tol) {
				t.Errorf("%s [%d]: %.9f, want %.9f (|Δ| %.2g > %.2g)", c.name, i, got[i], c.want[i], d, c.tol)
			}
		}
	}
	// Group is Advantages with one id
	a, b := Group([]float64{1, -1, 1}, 1e-6, 0), Advantages([]float64{1, -1, 1}, []int{4, 4, 4}, 1e-6, 0)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("Group [%d] = %v, Advantages %v", i, a[i], b[i])
		}
	}
}

func fill(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
