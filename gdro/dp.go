package gdro

// dp.go: budget-exact arm selection by dynamic programming (docs/algorithm.md §7.3),
// reproducing the reference's tie-breaking exactly.
//
// Groups k = 1..m (bins in the caller's order) hold c_k prompts; each group
// gets one arm a_k from the ascending arm list at cost cost[k][a]. The DP
// walks the reachable totals s = Σ c_k·a_k layer by layer. Within a layer,
// states are kept in insertion order (the order in which a total is first
// reached when the previous layer's states are scanned in their insertion
// order and arms in ascending order); a state's path is replaced only by a
// strictly cheaper one. The answer is the state minimizing |s − T|, ties to
// strictly smaller cost, remaining ties to the first in insertion order. With
// equal costs this returns the lexicographically smallest arm vector that
// hits T (docs/algorithm.md §7.7); with costs −ln p it maximizes Σ ln p among exact-budget
// vectors. When no vector hits T exactly, the nearest total is returned with
// Exact = false.
//
// The reference keys a Python dict by total; here each layer is a dense array
// over [minArm·S_k, maxArm·S_k] (S_k = c_1 + … + c_k) plus an explicit
// insertion-order list, and paths are back-pointers — the same answers, no
// maps, no path copies. At most (maxArm − minArm)·N + 1 states per layer.
//
// Pruning: a first pass keeps only totals s whose reachable interval
// [s + minArm·rest, s + maxArm·rest] still contains T (rest = prompts in later
// groups). Every parent of a kept state is kept, so kept states keep their
// costs and their relative insertion order, and the exact answer is the
// unpruned one. Only when that pass finds no exact total is the unpruned DP
// run to find the nearest total.

import (
	"fmt"
	"math"
)

// DPResult is the outcome of MatchBudget.
type DPResult struct {
	Arms   []int   `json:"arms"`   // (m) chosen arm per group
	Total  int     `json:"total"`  // Σ c_k·a_k
	Target int     `json:"target"` // T
	Exact  bool    `json:"exact"`  // Total == Target
	Cost   float64 `json:"cost"`   // Σ cost[k][a_k]
}

// dpScratch holds reusable buffers so that a controller step allocates little.
type dpScratch struct {
	cost  []float64 // (states) cost of the best path to each total in a layer
	seen  []bool    // (states) total reached in this layer
	order [2][]int  // insertion-ordered totals, previous and current layer
	prevC []float64 // (states) previous layer's costs
	from  [][]int32 // (m, states) parent total of each state
	arm   [][]int8  // (m, states) arm index of each state's last group
}

// MatchBudget returns the arm per group that meets the target total
// Σ_k counts[k]·arms[a_k] = target with the least total cost (see file doc).
// arms must be strictly increasing and positive, counts positive, and cost
// (m, len(arms)) finite.
func MatchBudget(counts, arms []int, cost [][]float64, target int) (DPResult, error) {
	var s dpScratch
	return s.match(counts, arms, cost, target)
}

func (s *dpScratch) match(counts, arms []int, cost [][]float64, target int) (DPResult, error) {
	res, err := s.run(counts, arms, cost, target, true)
	if err != nil || res.Exact {
		return res, err
	}
	return s.run(counts, arms, cost, target, false)
}

func (s *dpScratch) run(counts, arms []int, cost [][]float64, target int, prune bool) (DPResult, error) {
	total, err := checkDP(counts, arms, cost)
	if err != nil {
		return DPResult{}, err
	}
	m := len(counts)
	if m == 0 {
		return DPResult{Arms: []int{}, Target: target, Exact: target == 0}, nil
	}
	lo, hi := arms[0], arms[len(arms)-1]
	s.grow(m, (hi-lo)*total+1)
	last, lastLo := s.forward(counts, arms, cost, target, total, prune)
	if len(last) == 0 { // everything pruned: no exact total
		return DPResult{Target: target}, nil
	}
	best, bestC := s.nearest(last, lastLo, target)
	return DPResult{Arms: s.backtrack(best, counts, arms), Total: best, Target: target, Exact: best == target, Cost: bestC}, nil
}

// checkDP checks MatchBudget's arguments and returns the prompts in all
// (Σ counts).
func checkDP(counts, arms []int, cost [][]float64) (int, error) {
	m := len(counts)
	if len(arms) == 0 || len(arms) > 127 {
		return 0, fmt.Errorf("gdro dp: need 1 to 127 arms, got %d", len(arms))
	}
	for j, a := range arms {
		if a < 1 || (j > 0 && a <= arms[j-1]) {
			return 0, fmt.Errorf("gdro dp: arms must be positive and strictly increasing: %v", arms)
		}
	}
	if len(cost) != m {
		return 0, fmt.Errorf("gdro dp: %d groups but %d cost rows", m, len(cost))
	}
	total := 0
	for k, c := range counts {
		if c < 1 {
			return 0, fmt.Errorf("gdro dp: group %d has count %d (need ≥ 1)", k, c)
		}
		if len(cost[k]) != len(arms) {
			return 0, fmt.Errorf("gdro dp: cost row %d has %d entries, want %d", k, len(cost[k]), len(arms))
		}
		for j, v := range cost[k] {
			if !finite(v) {
				return 0, fmt.Errorf("gdro dp: cost[%d][%d] = %v is not finite", k, j, v)
			}
		}
		total += c
	}
	if hi := arms[len(arms)-1]; total*hi > math.MaxInt32 {
		return 0, fmt.Errorf("gdro dp: %d prompts × arm %d is too large", total, hi)
	}
	return total, nil
}

// forward walks the layers (see the file doc) and returns the last one's
// totals in insertion order and its lowest possible total, the offset of
// its states in s.prevC. With prune, only totals that can still reach
// target are kept.
func (s *dpScratch) forward(counts, arms []int, cost [][]float64, target, total int, prune bool) ([]int, int) {
	lo, hi := arms[0], arms[len(arms)-1]
	// layer 0: the single state 0 (offset 0)
	prevOrder := append(s.order[0][:0], 0)
	s.prevC[0] = 0
	prevLo, sum := 0, 0
	for k, c := range counts {
		sum += c
		// with pruning, keep absolute totals in [keepLo, keepHi]
		keepLo, keepHi := math.MinInt, math.MaxInt
		if prune {
			rest := total - sum
			keepLo, keepHi = target-hi*rest, target-lo*rest
		}
		curLo := lo * sum
		curW := (hi-lo)*sum + 1
		cur, seen := s.cost[:curW], s.seen[:curW]
		for i := range seen {
			seen[i] = false
		}
		from, armIdx := s.from[k][:curW], s.arm[k][:curW]
		order := s.order[1][:0]
		ck := cost[k]
		for _, ps := range prevOrder { // ps is an absolute total
			base := s.prevC[ps-prevLo]
			for j, a := range arms {
				abs := ps + a*c
				if abs < keepLo {
					continue
				}
				if abs > keepHi {
					break // arms ascend: every later arm is out too
				}
				t := abs - curLo
				v := base + ck[j]
				if !seen[t] {
					seen[t] = true
					cur[t] = v
					from[t] = int32(ps)
					armIdx[t] = int8(j)
					order = append(order, abs)
				} else if v < cur[t] {
					cur[t] = v
					from[t] = int32(ps)
					armIdx[t] = int8(j)
				}
			}
		}
		// the current layer becomes the previous one
		copy(s.prevC[:curW], cur)
		s.order[0], s.order[1] = order, prevOrder[:0]
		prevOrder = order
		prevLo = curLo
	}
	return prevOrder, prevLo
}

// nearest is the total of order (offset lo in s.prevC) nearest target,
// ties to the strictly cheaper, then to the first inserted, and its cost.
func (s *dpScratch) nearest(order []int, lo, target int) (int, float64) {
	best, bestD, bestC := -1, 0, 0.0
	for _, st := range order {
		d := st - target
		if d < 0 {
			d = -d
		}
		v := s.prevC[st-lo]
		if best < 0 || d < bestD || (d == bestD && v < bestC) {
			best, bestD, bestC = st, d, v
		}
	}
	return best, bestC
}

// backtrack follows the back-pointers from the last layer's total best
// to each group's arm.
func (s *dpScratch) backtrack(best int, counts, arms []int) []int {
	lo := arms[0]
	out := make([]int, len(counts))
	st := best
	for k := len(counts) - 1; k >= 0; k-- {
		curLo := lo * prefix(counts, k+1)
		j := s.arm[k][st-curLo]
		out[k] = arms[j]
		st = int(s.from[k][st-curLo])
	}
	return out
}

func prefix(counts []int, k int) int {
	s := 0
	for _, c := range counts[:k] {
		s += c
	}
	return s
}

// grow sizes the scratch buffers for m layers of up to width states.
func (s *dpScratch) grow(m, width int) {
	if cap(s.cost) < width {
		s.cost = make([]float64, width)
		s.seen = make([]bool, width)
		s.prevC = make([]float64, width)
		s.order[0] = make([]int, 0, width)
		s.order[1] = make([]int, 0, width)
	}
	s.cost, s.seen, s.prevC = s.cost[:width], s.seen[:width], s.prevC[:width]
	for len(s.from) < m {
		s.from = append(s.from, nil)
		s.arm = append(s.arm, nil)
	}
	for k := 0; k < m; k++ {
		if cap(s.from[k]) < width {
			s.from[k] = make([]int32, width)
			s.arm[k] = make([]int8, width)
		}
		s.from[k], s.arm[k] = s.from[k][:width], s.arm[k][:width]
	}
}
