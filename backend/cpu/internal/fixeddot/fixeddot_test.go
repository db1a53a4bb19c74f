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

// TestKernelsMatch: every kernel this build and machine run (Go, the
// portable C loop, AVX), with b's vectors as rows (Dots) and as columns
// (DotsN), gives DotsGo's bits, on random shapes with every
// tail: K not a multiple of the lanes, rows and columns not multiples of
// the tiles, leading dimensions beyond K, and magnitudes that make the
// order matter.
func TestKernelsMatch(t *testing.T) {
	ks := kernels()
	t.Logf("kernels: %v (Dots uses %v)", ks, best)
	rnd := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 300; trial++ {
		rows, cols, k := 1+rnd.IntN(11), 1+rnd.IntN(21), 1+rnd.IntN(70)
		if trial%10 == 0 {
			k = 8 * (1 + rnd.IntN(40))
		}
		lda, ldb, ldo := k+rnd.IntN(5), k+rnd.IntN(5), cols+rnd.IntN(3)
		a, b := make([]float32, (rows-1)*lda+k), make([]float32, (cols-1)*ldb+k)
		for i := range a {
			a[i] = float32(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(9)-4)))
		}
		for i := range b {
			b[i] = float32(rnd.NormFloat64() * math.Pow(10, float64(rnd.IntN(5)-2)))
		}
		// bt holds b's vectors as columns, for DotsN's layout.
		ldbt := cols + rnd.IntN(4)
		bt := make([]float32, (k-1)*ldbt+cols)
		for j := 0; j < cols; j++ {
			for p := 0; p < k; p++ {
				bt[p*ldbt+j] = b[j*ldb+p]
			}
		}
		want := make([]float32, (rows-1)*ldo+cols)
		DotsGo(want, ldo, a, lda, rows, b, ldb, cols, k)
		for _, kn := range ks {
			for _, colB := range []bool{false, true} {
				got := make([]float32, len(want))
				for i := range got {
					got[i] = -7 // cells between the columns stay untouched
				}
				if colB {
					dotsWith(kn, true, got, ldo, a, lda, rows, bt, ldbt, cols, k)
				} else {
					dotsWith(kn, false, got, ldo, a, lda, rows, b, ldb, cols, k)
				}
				for i := 0; i < rows; i++ {
					for j := 0; j < ldo && i*ldo+j < len(got); j++ {
						g, w := got[i*ldo+j], want[i*ldo+j]
						if j >= cols {
							w = -7
						}
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%v (b as columns %v), %d×%d, k = %d (lda %d, ldb %d, ldo %d): [%d,%d] = %v, Go %v",
								kn, colB, rows, cols, k, lda, ldb, ldo, i, j, g, w)
						}
					}
				}
			}
		}
	}
}

// BenchmarkKernels measures each kernel on one block of exact.go's
// products at K = 1024 (64 rows by 48 columns), reported as MFLOP/s in the
// "MB/s" column.
func BenchmarkKernels(bm *testing.B) {
	const rows, cols, k = 64, 48, 1024
	rnd := rand.New(rand.NewPCG(7, 8))
	a, b, out := make([]float32, rows*k), make([]float32, cols*k), make([]float32, rows*cols)
	for i := range a {
		a[i] = float32(rnd.NormFloat64())
	}
	for i := range b {
		b[i] = float32(rnd.NormFloat64())
	}
	for _, kn := range kernels() {
		bm.Run(kn.String(), func(bm *testing.B) {
			bm.SetBytes(2 * rows * cols * k)
			for bm.Loop() {
				dotsWith(kn, false, out, cols, a, k, rows, b, k, cols, k)
			}
		})
	}
}
