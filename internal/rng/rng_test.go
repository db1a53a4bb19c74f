package rng

import (
	"math"
	"testing"
)

func TestUniformIsPureAndSpread(t *testing.T) {
	k := Key(1, 2, HashString("uid-7"), 3)
	if Uniform(k, 5) != Uniform(Key(1, 2, HashString("uid-7"), 3), 5) {
		t.Fatal("same key and counter gave different draws")
	}
	if Key(1, 2) == Key(2, 1) {
		t.Fatal("key is symmetric in its words")
	}
	// Mean and variance of 1e5 draws match U(0,1) within 5 standard errors.
	const n = 100000
	var s, s2 float64
	for i := uint64(0); i < n; i++ {
		u := Uniform(k, i)
		if u < 0 || u >= 1 {
			t.Fatalf("draw %v outside [0,1)", u)
		}
		s += u
		s2 += u * u
	}
	mean, variance := s/n, s2/n-(s/n)*(s/n)
	if math.Abs(mean-0.5) > 5*math.Sqrt(1.0/12/n) || math.Abs(variance-1.0/12) > 0.002 {
		t.Fatalf("mean %v variance %v", mean, variance)
	}
}
