package gdro

import (
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"math"
	"slices"
	"strings"
	"testing"
)

var arms2to12 = []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// uniformCost is the reference's cost −ln(1/11) for every bin and arm.
func uniformCost(m int) [][]float64 {
	c := make([][]float64, m)
	for k := range c {
		c[k] = repeatF(-math.Log((1-0.01)/11+0.01/11), len(arms2to12))
	}
	return c
}

// docs/algorithm.md §7.7 table (N = 256, T = 1024, uniform probabilities).
func TestDPClosedFormTable(t *testing.T) {
	for _, c := range []struct {
		counts, want []int
	}{
		{[]int{120, 30, 50, 56}, []int{2, 2, 10, 4}},
		{[]int{50, 120, 30, 56}, []int{2, 2, 6, 9}},
		{[]int{256}, []int{4}},
		{[]int{200, 56}, []int{4, 4}},
		{[]int{100, 60, 40, 20, 10, 10, 6, 5, 3, 2}, []int{2, 2, 2, 10, 12, 12, 11, 12, 12, 11}},
	} {
		res, err := MatchBudget(c.counts, arms2to12, uniformCost(len(c.counts)), 1024)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Arms, c.want) || !res.Exact || res.Total != 1024 {
			t.Errorf("counts %v: arms %v (total %d, exact %v), want %v", c.counts, res.Arms, res.Total, res.Exact, c.want)
		}
	}
}

// enumerate calls f for every arm vector (len m) over arms.
func enumerate(m int, arms []int, f func([]int)) {
	v := make([]int, m)
	var rec func(int)
	rec = func(k int) {
		if k == m {
			f(v)
			return
		}
		for _, a := range arms {
			v[k] = a
			rec(k + 1)
		}
	}
	rec(0)
}

func dot(c, a []int) int {
	s := 0
	for i := range c {
		s += c[i] * a[i]
	}
	return s
}

// Random small cases against brute force: with equal costs the DP returns
// the lexicographically smallest exact vector; with random costs the
// cheapest exact vector; the total is exact whenever some vector is exact,
// otherwise the nearest total; arms stay in the arm list.
func TestDPAgainstBruteForce(t *testing.T) {
	s := rng.NewStream(11)
	armSets := [][]int{{2, 3, 4, 5, 6}, {2, 6, 12}, {1, 2}, {3, 5, 8}}
	for trial := 0; trial < 400; trial++ {
		arms := armSets[trial%len(armSets)]
		m := 1 + s.IntN(4)
		counts := make([]int, m)
		N := 0
		for k := range counts {
			counts[k] = 1 + s.IntN(5)
			N += counts[k]
		}
		target := N*arms[0] + s.IntN(N*(arms[len(arms)-1]-arms[0])+3) - 1
		uniform := trial%2 == 0
		cost := make([][]float64, m)
		for k := range cost {
			cost[k] = make([]float64, len(arms))
			for j := range arms {
				if uniform {
					cost[k][j] = -math.Log(0.2)
				} else {
					cost[k][j] = -math.Log(0.01 + s.Float64())
				}
			}
		}
		res, err := MatchBudget(counts, arms, cost, target)
		if err != nil {
			t.Fatal(err)
		}
		// brute force: best distance, then cost, then lexicographic
		bestD, bestC := math.MaxInt, math.Inf(1)
		var best []int
		enumerate(m, arms, func(v []int) {
			d := dot(counts, v) - target
			if d < 0 {
				d = -d
			}
			c := 0.0
			for k, a := range v {
				for j := range arms {
					if arms[j] == a {
						c += cost[k][j]
					}
				}
			}
			if d < bestD || (d == bestD && c < bestC-1e-12) {
				bestD, bestC, best = d, c, append([]int(nil), v...)
			}
		})
		gotD := res.Total - target
		if gotD < 0 {
			gotD = -gotD
		}
		if gotD != bestD || res.Exact != (bestD == 0) || dot(counts, res.Arms) != res.Total {
			t.Fatalf("counts %v arms %v target %d: total %d exact %v, brute-force distance %d", counts, arms, target, res.Total, res.Exact, bestD)
		}
		for _, a := range res.Arms {
			ok := false
			for _, b := range arms {
				ok = ok || a == b
			}
			if !ok {
				t.Fatalf("arm %d not in %v", a, arms)
			}
		}
		if math.Abs(res.Cost-bestC) > 1e-9 {
			t.Fatalf("counts %v target %d: cost %v (arms %v), brute force %v (arms %v)", counts, target, res.Cost, res.Arms, bestC, best)
		}
		// with equal costs and an exact budget: lexicographic minimum
		if uniform && bestD == 0 && !slices.Equal(res.Arms, best) {
			t.Fatalf("uniform costs, counts %v target %d: %v, lexicographic minimum %v", counts, target, res.Arms, best)
		}
	}
}

// Nearest feasible allocation when no exact one exists, reported.
func TestDPNearestWhenInexact(t *testing.T) {
	// 3 prompts, arms {2, 6, 12}, mean 4 → T = 12; reachable totals 6, 18, 36, … → 6 or 18
	res, err := MatchBudget([]int{3}, []int{2, 6, 12}, [][]float64{{1, 1, 1}}, 12)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exact || res.Total != 6 || res.Arms[0] != 2 {
		t.Errorf("got %+v, want total 6 (first of the ties |6−12| = |18−12|), inexact", res)
	}
	// equal distance, strictly cheaper wins
	res, _ = MatchBudget([]int{3}, []int{2, 6, 12}, [][]float64{{2, 1, 1}}, 12)
	if res.Total != 18 || res.Exact {
		t.Errorf("cheaper tie: got %+v, want total 18", res)
	}
}

func TestDPErrors(t *testing.T) {
	for _, c := range []struct {
		counts, arms []int
		cost         [][]float64
		want         string
	}{
		{[]int{1}, []int{3, 2}, [][]float64{{0, 0}}, "strictly increasing"},
		{[]int{1}, []int{}, nil, "arms"},
		{[]int{0}, []int{2}, [][]float64{{0}}, "count 0"},
		{[]int{1}, []int{2}, [][]float64{{math.Inf(1)}}, "not finite"},
		{[]int{1, 1}, []int{2}, [][]float64{{0}}, "cost rows"},
	} {
		if _, err := MatchBudget(c.counts, c.arms, c.cost, 4); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MatchBudget(%v, %v) = %v, want %q", c.counts, c.arms, err, c.want)
		}
	}
	res, err := MatchBudget(nil, []int{2}, nil, 0)
	if err != nil || !res.Exact || len(res.Arms) != 0 {
		t.Errorf("empty: %+v, %v", res, err)
	}
}
