package gdro

import (
	"math"
	"testing"
)

// Tolerance policy: values computed by the same formulas in another order
// (the hand traces, computed in Python with math.exp/math.log) agree to
// atol 1e-12; values docs/algorithm.md prints to 6 or 7 significant digits are
// compared with atol half a unit of the last printed digit.

// approxEq reports |got − want| ≤ atol + rtol·|want|.
func approxEq(got, want, atol, rtol float64) bool {
	if math.IsNaN(got) || math.IsNaN(want) {
		return false
	}
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

func checkClose(t *testing.T, name string, got, want, atol float64) {
	t.Helper()
	if !approxEq(got, want, atol, 0) {
		t.Errorf("%s = %.17g, want %.17g (|diff| %.3g > atol %.3g)", name, got, want, math.Abs(got-want), atol)
	}
}

func checkSlice(t *testing.T, name string, got, want []float64, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s has %d entries, want %d: %v", name, len(got), len(want), got)
	}
	for i := range got {
		if !approxEq(got[i], want[i], atol, 0) {
			t.Errorf("%s[%d] = %.17g, want %.17g (|diff| %.3g > atol %.3g)", name, i, got[i], want[i], math.Abs(got[i]-want[i]), atol)
		}
	}
}

func TestCloseComparator(t *testing.T) {
	for _, c := range []struct {
		got, want, atol, rtol float64
		ok                    bool
	}{
		{0, 0, 0, 0, true},
		{1, 1 + 1e-13, 1e-12, 0, true},
		{1, 1 + 1e-11, 1e-12, 0, false},
		{100, 101, 0, 0.01, true},
		{-1, 1, 1, 0, false},
		{math.NaN(), 0, 1, 1, false},
		{0, math.NaN(), 1, 1, false},
		{math.Inf(1), 1, 1e300, 0, false},
	} {
		if got := approxEq(c.got, c.want, c.atol, c.rtol); got != c.ok {
			t.Errorf("approxEq(%v, %v, %v, %v) = %v, want %v", c.got, c.want, c.atol, c.rtol, got, c.ok)
		}
	}
}
