package rng

import (
	"hash/fnv"
	"math"
	"testing"
)

func TestDrawsArePure(t *testing.T) {
	k := Key(1, 2, HashString("uid-7"), 3)
	if Uniform(k, 5) != Uniform(Key(1, 2, HashString("uid-7"), 3), 5) {
		t.Fatal("same key and counter gave different draws")
	}
	if Key(1, 2) == Key(2, 1) || UniformAt(1, 2) == UniformAt(1, 3) {
		t.Fatal("different keys collide")
	}
	a, b := NewStream(1, 2, 3), NewStream(1, 2, 3)
	for i := 0; i < 10; i++ {
		if a.Uint64() != b.Uint64() {
			t.Fatal("streams with one key differ")
		}
	}
	// Stream draw k equals Uniform(key, k): the two views agree.
	s := NewStream(9, 4)
	if s.Float64() != Uniform(Key(9, 4), 1) {
		t.Fatal("stream and Uniform disagree")
	}
	h := fnv.New64a()
	h.Write([]byte("uid-7"))
	if HashString("uid-7") != h.Sum64() {
		t.Fatal("HashString is not FNV-1a")
	}
}

// TestDistributions: moments of 1e5 draws within 5 standard errors.
func TestDistributions(t *testing.T) {
	const n = 100000
	s := NewStream(42)
	var u, u2, z, z2 float64
	counts := make([]float64, 7)
	for i := 0; i < n; i++ {
		x := s.Float64()
		if x < 0 || x >= 1 {
			t.Fatalf("uniform draw %v outside [0,1)", x)
		}
		u += x
		u2 += x * x
		g := s.Normal()
		z += g
		z2 += g * g
		counts[s.IntN(7)]++
	}
	if math.Abs(u/n-0.5) > 5*math.Sqrt(1.0/12/n) || math.Abs(u2/n-(u/n)*(u/n)-1.0/12) > 0.002 {
		t.Errorf("uniform mean %v var %v", u/n, u2/n-(u/n)*(u/n))
	}
	if math.Abs(z/n) > 5/math.Sqrt(n) || math.Abs(z2/n-1) > 0.03 {
		t.Errorf("normal mean %v var %v", z/n, z2/n)
	}
	for k, c := range counts {
		if math.Abs(c/n-1.0/7) > 5*math.Sqrt((1.0/7)*(6.0/7)/n) {
			t.Errorf("IntN(7) bucket %d frequency %v", k, c/n)
		}
	}
}
