package fixeddot

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotsMatchGo: the cgo kernel (when built) gives DotsGo's bits, for
// lengths around the lanes and with magnitudes that make order matter.
func TestDotsMatchGo(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 7, 8, 9, 17, 64, 131} {
		const rows, cols = 5, 6
		a, b := make([]float32, rows*k), make([]float32, cols*k)
		for i := range a {
			a[i] = float32(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(7)-3)))
		}
		for i := range b {
			b[i] = float32(rnd.NormFloat64())
		}
		got, want := make([]float32, rows*cols), make([]float32, rows*cols)
		Dots(got, cols, a, k, rows, b, k, cols, k)
		DotsGo(want, cols, a, k, rows, b, k, cols, k)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("k = %d, element %d: %v, Go %v", k, i, got[i], want[i])
			}
		}
	}
}

// TestDotTrailingZeros: zero terms after the last (attention's cleared
// probabilities in a training block) leave the sum's bits alone.
func TestDotTrailingZeros(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for n := 1; n < 40; n++ {
		a, v := make([]float32, n+13), make([]float32, n+13)
		for i := range a {
			v[i] = float32(rnd.NormFloat64())
			if i < n {
				a[i] = float32(rnd.Float64())
			}
		}
		if got, want := Dot(a, v), Dot(a[:n], v[:n]); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n = %d: %v padded, %v alone", n, got, want)
		}
	}
}
