// Package numcheck compares numeric results against references with an
// explicit tolerance policy, shared by every numerical test in the project.
//
// Policy: an element passes when |got − want| ≤ Atol + Rtol·|want|. Rtol
// follows the storage dtype of the computation under test (FP32 for the CPU
// reference, BF16 for bf16 storage); Atol covers values near zero. NaN
// matches only NaN, ±Inf only the same infinity. A failure reports the worst
// element (index, both values), the max absolute and relative errors, the
// first mismatches and, for large arrays, the normalised mean squared error.
// Any test using a tolerance looser than the defaults says why next to it.
package numcheck

import (
	"fmt"
	"math"
	"strings"
)

// Tol is an absolute plus relative tolerance.
type Tol struct{ Atol, Rtol float64 }

// Default tolerances by storage dtype.
var (
	FP32 = Tol{Atol: 1e-6, Rtol: 1e-5}
	BF16 = Tol{Atol: 1e-3, Rtol: 1.6e-2} // 2^-7 mantissa step plus accumulation slack
)

// Stats summarises a comparison.
type Stats struct {
	MaxAbs, MaxRel float64
	Worst          int
	NMSE           float64
	Bad            int
	// Used is the share of the tolerance the worst element takes: the
	// largest |got − want| / (atol + rtol·|want|) over finite elements (≤ 1
	// when all pass). Tests log it to say how much margin a tolerance has.
	Used float64
}

// Compare checks got against want element by element.
func Compare[T, U float32 | float64](got []T, want []U, tol Tol) (Stats, error) {
	var st Stats
	if len(got) != len(want) {
		return st, fmt.Errorf("length %d, want %d", len(got), len(want))
	}
	var sqErr, sqRef float64
	var first []string
	st.Worst = -1
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		ok, abs := match(g, w, tol)
		if !math.IsNaN(abs) && !math.IsInf(abs, 0) {
			if bound := tol.Atol + tol.Rtol*math.Abs(w); bound > 0 {
				st.Used = math.Max(st.Used, abs/bound)
			} else if abs > 0 {
				st.Used = math.Inf(1)
			}
			sqErr += abs * abs
			sqRef += w * w
			if abs > st.MaxAbs {
				st.MaxAbs = abs
			}
			if rel := abs / math.Max(math.Abs(w), 1e-30); abs > 0 && rel > st.MaxRel {
				st.MaxRel = rel
			}
		}
		if !ok {
			st.Bad++
			if st.Worst < 0 || abs > math.Abs(float64(got[st.Worst])-float64(want[st.Worst])) || math.IsNaN(abs) {
				st.Worst = i
			}
			if len(first) < 5 {
				first = append(first, fmt.Sprintf("[%d] got %.8g want %.8g", i, g, w))
			}
		}
	}
	if sqRef > 0 {
		st.NMSE = sqErr / sqRef
	}
	if st.Bad == 0 {
		return st, nil
	}
	return st, fmt.Errorf("%d of %d elements outside atol %g + rtol %g: worst [%d] got %.8g want %.8g; max abs %.3g, max rel %.3g, nmse %.3g; first: %s",
		st.Bad, len(want), tol.Atol, tol.Rtol, st.Worst, float64(got[st.Worst]), float64(want[st.Worst]),
		st.MaxAbs, st.MaxRel, st.NMSE, strings.Join(first, ", "))
}

// match applies the policy to one pair and returns the absolute error.
func match(g, w float64, tol Tol) (bool, float64) {
	switch {
	case math.IsNaN(w) || math.IsNaN(g):
		return math.IsNaN(w) && math.IsNaN(g), math.NaN()
	case math.IsInf(w, 0) || math.IsInf(g, 0):
		return g == w, math.Inf(1)
	}
	abs := math.Abs(g - w)
	return abs <= tol.Atol+tol.Rtol*math.Abs(w), abs
}
