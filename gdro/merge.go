package gdro

// merge.go: a step made of several generation rounds (the trainer's
// dynamic sampling, docs/algorithm.md §5.12) plans each round with
// Controller.Plan and is observed once, as one plan over every prompt it
// generated; the advantage multipliers apply to the prompts it kept.

import "fmt"

// MergePlans joins the plans of one step's generation rounds, in round
// order, into the plan Observe takes: every generated prompt, so the
// classifier sees all of them and Rollout-GDRO's budget counts every
// rollout. One plan is returned as it is. With Rollout-GDRO the merged
// allocation keeps the first round's arm probabilities and μ (all rounds
// of a step decide with the same state), concatenates the counts, sums the
// class counts and the budget, takes each class's arm from the first round
// that saw the class, and averages the rounds' violations, so the step
// makes one dual update of the usual size.
func MergePlans(plans []*Plan) (*Plan, error) {
	switch len(plans) {
	case 0:
		return nil, fmt.Errorf("gdro: no plans to merge")
	case 1:
		return plans[0], nil
	}
	out := &Plan{Step: plans[0].Step}
	for k, p := range plans {
		if p.Step != out.Step {
			return nil, fmt.Errorf("gdro: round %d's plan is for step %d, round 0's for step %d", k, p.Step, out.Step)
		}
		if (p.Alloc == nil) != (plans[0].Alloc == nil) {
			return nil, fmt.Errorf("gdro: step %d: round %d's plan has an allocation and round 0's does not (or the reverse)", out.Step, k)
		}
		out.UIDs = append(out.UIDs, p.UIDs...)
		out.Classes = append(out.Classes, p.Classes...)
		out.N = append(out.N, p.N...)
	}
	if plans[0].Alloc != nil {
		out.Alloc = mergeAllocations(plans)
	}
	return out, nil
}

func mergeAllocations(plans []*Plan) *Allocation {
	first := plans[0].Alloc
	C := len(first.BinN)
	al := &Allocation{BinN: make([]int, C), BinCount: make([]int, C), Unconstrained: make([]float64, C),
		ArmProb: first.ArmProb, Mu: first.Mu, Exact: true, UsingPrev: first.UsingPrev, Order: []int{}}
	seen := make([]bool, C)
	for _, p := range plans {
		a := p.Alloc
		al.N = append(al.N, a.N...)
		al.Target += a.Target
		al.Total += a.Total
		al.Exact = al.Exact && a.Exact
		al.Violation += a.Violation / float64(len(plans))
		for b := 0; b < C; b++ {
			al.BinCount[b] += a.BinCount[b]
		}
		for _, b := range a.Order {
			if !seen[b] {
				seen[b] = true
				al.Order = append(al.Order, b)
				al.BinN[b], al.Unconstrained[b] = a.BinN[b], a.Unconstrained[b]
			}
		}
	}
	return al
}

// Subset returns the plan restricted to the prompts keep (indices into p,
// increasing): what Controller.Weights takes for the prompts a step trains
// on when it dropped others. The allocation is shared, not copied.
func (p *Plan) Subset(keep []int) (*Plan, error) {
	out := &Plan{Step: p.Step, Alloc: p.Alloc}
	last := -1
	for _, i := range keep {
		if i <= last || i >= len(p.UIDs) {
			return nil, fmt.Errorf("gdro: step %d: subset index %d out of order or outside [0, %d)", p.Step, i, len(p.UIDs))
		}
		last = i
		out.UIDs = append(out.UIDs, p.UIDs[i])
		out.Classes = append(out.Classes, p.Classes[i])
		out.N = append(out.N, p.N[i])
	}
	return out, nil
}
