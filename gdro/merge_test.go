package gdro

import (
	"reflect"
	"strings"
	"testing"
)

// TestMergePlans: two rounds of one step become one plan over every
// prompt; one round is returned as it is; plans of different steps or
// with and without an allocation are refused.
func TestMergePlans(t *testing.T) {
	a := &Plan{Step: 3, UIDs: []string{"a", "b"}, Classes: []int{0, 1}, N: []int{2, 6},
		Alloc: &Allocation{N: []int{2, 6}, BinN: []int{2, 6, 0}, BinCount: []int{1, 1, 0}, Order: []int{1, 0},
			Unconstrained: []float64{2.5, 5, 0}, ArmProb: [][]float64{{1}}, Mu: 0.3, Violation: 1, Target: 8, Total: 8, Exact: true}}
	b := &Plan{Step: 3, UIDs: []string{"c", "d"}, Classes: []int{2, 2}, N: []int{4, 4},
		Alloc: &Allocation{N: []int{4, 4}, BinN: []int{0, 0, 4}, BinCount: []int{0, 0, 2}, Order: []int{2},
			Unconstrained: []float64{0, 0, 4.5}, ArmProb: [][]float64{{1}}, Mu: 0.3, Violation: -0.5, Target: 8, Total: 8, Exact: true}}
	m, err := MergePlans([]*Plan{a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{Step: 3, UIDs: []string{"a", "b", "c", "d"}, Classes: []int{0, 1, 2, 2}, N: []int{2, 6, 4, 4},
		Alloc: &Allocation{N: []int{2, 6, 4, 4}, BinN: []int{2, 6, 4}, BinCount: []int{1, 1, 2}, Order: []int{1, 0, 2},
			Unconstrained: []float64{2.5, 5, 4.5}, ArmProb: [][]float64{{1}}, Mu: 0.3, Violation: 0.25, Target: 16, Total: 16, Exact: true}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("merged\n%+v %+v\nwant\n%+v %+v", m, m.Alloc, want, want.Alloc)
	}
	if one, _ := MergePlans([]*Plan{a}); one != a {
		t.Error("one plan must come back as it is")
	}
	c := *b
	c.Step = 4
	if _, err := MergePlans([]*Plan{a, &c}); err == nil || !strings.Contains(err.Error(), "step") {
		t.Errorf("plans of two steps: %v", err)
	}
	d := *b
	d.Alloc = nil
	if _, err := MergePlans([]*Plan{a, &d}); err == nil {
		t.Error("a plan without an allocation was merged with one that has it")
	}
}

// TestPlanSubset keeps the chosen prompts in order and refuses bad indices.
func TestPlanSubset(t *testing.T) {
	p := &Plan{Step: 2, UIDs: []string{"a", "b", "c"}, Classes: []int{0, 1, 2}, N: []int{2, 3, 4}}
	s, err := p.Subset([]int{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, &Plan{Step: 2, UIDs: []string{"a", "c"}, Classes: []int{0, 2}, N: []int{2, 4}}) {
		t.Errorf("subset %+v", s)
	}
	for _, bad := range [][]int{{1, 0}, {3}, {0, 0}} {
		if _, err := p.Subset(bad); err == nil {
			t.Errorf("subset %v accepted", bad)
		}
	}
}
