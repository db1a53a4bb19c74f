package gdro

import (
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"strconv"
	"testing"
)

// benchCounts is an uneven, heavy-tailed bin composition of 512 prompts
// (uneven counts make the most DP states).
var benchCounts = []int{153, 97, 71, 53, 41, 31, 23, 19, 13, 11}

// benchController returns a controller with Prompt-GDRO and Rollout-GDRO
// (paper mode) on 10 bins and 11 arms, and 512 UIDs whose histories put
// benchCounts[b] of them in bin b.
func benchController(b *testing.B) (*Controller, []string, ClassifierState) {
	cfg, _ := Preset("rollout-10bins")
	cfg.Prompt.Enabled = true
	c, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var uids []string
	st := ClassifierState{UIDs: map[string]UIDHistory{}}
	for bin, n := range benchCounts {
		for k := 0; k < n; k++ {
			u := "open-r1/DAPO-Math-17k-Processed:train:" + strconv.Itoa(len(uids)*7)
			ones := 4*bin + 2 // acc 0.05 + 0.1·bin, mid-bin
			st.UIDs[u] = UIDHistory{Seen: 40, Correct: ones, Window: windowWith(ones, 40), Last: bin}
			uids = append(uids, u)
		}
	}
	if err := c.cls.Restore(st); err != nil {
		b.Fatal(err)
	}
	return c, uids, st
}

// benchRows is a pool of row outcomes sliced to each step's R.
func benchRows() Rows {
	const maxR = 512 * 12
	r := Rows{Loss: make([]float64, maxR), Correct: make([]bool, maxR)}
	s := rng.NewStream(1)
	for i := range r.Loss {
		r.Loss[i] = s.Float64() - 0.5
		r.Correct[i] = s.Float64() < 0.4
	}
	return r
}

// BenchmarkControllerStep is one full controller step for 512 prompts × 10
// bins × 11 arms: classify, allocate (DP), weights, observe (goal < 1 ms).
// The classifier history is reset between steps (untimed) so that every step
// sees the same bin composition.
func BenchmarkControllerStep(b *testing.B) {
	c, uids, st := benchController(b)
	pool := benchRows()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := c.cls.Restore(st); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		plan, err := c.Plan(uids)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Weights(plan); err != nil {
			b.Fatal(err)
		}
		R := plan.Rows()
		if _, err := c.Observe(plan, Rows{Loss: pool.Loss[:R], Correct: pool.Correct[:R]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatchBudget is the DP alone at the same size (10 bins with
// uneven counts summing to 512, 11 arms, T = 2048), for comparison with the
// full step.
func BenchmarkMatchBudget(b *testing.B) {
	counts := benchCounts
	cost := make([][]float64, len(counts))
	s := rng.NewStream(2)
	for k := range cost {
		cost[k] = make([]float64, 11)
		for j := range cost[k] {
			cost[k][j] = float64(counts[k]) * (1 + s.Float64())
		}
	}
	var dp dpScratch
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := dp.match(counts, arms2to12, cost, 2048); err != nil {
			b.Fatal(err)
		}
	}
}
