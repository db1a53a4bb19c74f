package numcheck

import (
	"math"
	"testing"
)

func TestCompare(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	tol := Tol{Atol: 1e-6, Rtol: 1e-3}
	cases := []struct {
		name      string
		got, want []float64
		ok        bool
	}{
		{"equal", []float64{1, 2, 3}, []float64{1, 2, 3}, true},
		{"zero vs tiny within atol", []float64{0}, []float64{5e-7}, true},
		{"zero vs small beyond atol", []float64{0}, []float64{1e-5}, false},
		{"relative ok", []float64{1000.9}, []float64{1000}, true},
		{"relative too far", []float64{1002}, []float64{1000}, false},
		{"sign flip", []float64{-1}, []float64{1}, false},
		{"nan matches nan", []float64{nan}, []float64{nan}, true},
		{"nan vs number", []float64{nan}, []float64{1}, false},
		{"number vs nan", []float64{1}, []float64{nan}, false},
		{"inf equal", []float64{inf}, []float64{inf}, true},
		{"inf sign", []float64{-inf}, []float64{inf}, false},
		{"inf vs large", []float64{1e300}, []float64{inf}, false},
		{"length", []float64{1}, []float64{1, 2}, false},
	}
	for _, c := range cases {
		_, err := Compare(c.got, c.want, tol)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestCompareStats(t *testing.T) {
	st, err := Compare([]float32{1, 2.5, 3}, []float64{1, 2, 3}, Tol{Rtol: 1e-3})
	if err == nil || st.Worst != 1 || st.Bad != 1 || math.Abs(st.MaxAbs-0.5) > 1e-12 || math.Abs(st.MaxRel-0.25) > 1e-12 {
		t.Fatalf("stats %+v err %v", st, err)
	}
}

// TestCompareUsed: Used is the worst element's share of its own tolerance.
func TestCompareUsed(t *testing.T) {
	st, err := Compare([]float32{1.5, 10.5, 0}, []float64{1, 10, 0}, Tol{Atol: 1, Rtol: 0.1})
	// Shares: 0.5/1.1, 0.5/2, 0/1.
	if err != nil || math.Abs(st.Used-0.5/1.1) > 1e-7 {
		t.Errorf("used %v, err %v", st.Used, err)
	}
	if st, _ := Compare([]float32{1}, []float64{2}, Tol{}); !math.IsInf(st.Used, 1) {
		t.Errorf("exact tolerance, wrong value: used %v", st.Used)
	}
	if st, _ := Compare([]float32{2}, []float64{2}, Tol{}); st.Used != 0 {
		t.Errorf("exact tolerance, right value: used %v", st.Used)
	}
}
