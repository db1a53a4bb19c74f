package fastexp

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpf measures Expf against math.Exp over the whole range it returns
// normal numbers for, and checks the edges.
func TestExpf(t *testing.T) {
	worst, at := 0.0, float32(0)
	for x := float32(Lo); x < Hi; x += 0.0137 {
		want := math.Exp(float64(x))
		got := float64(Expf(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst, at = rel, x
		}
	}
	// 2 ulp of float32 is 2·2⁻²³ ≈ 2.4e−7 relative.
	if worst > 2.4e-7 {
		t.Errorf("Expf worst relative error %.3g at x=%v", worst, at)
	}
	t.Logf("Expf worst relative error %.3g at x=%v", worst, at)
	inf := float32(math.Inf(1))
	for _, c := range []struct{ x, want float32 }{{0, 1}, {-87, 0}, {-1e30, 0}, {-inf, 0}, {89, inf}, {inf, inf}} {
		if got := Expf(c.x); got != c.want {
			t.Errorf("Expf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if v := Expf(float32(math.NaN())); v == v {
		t.Errorf("Expf(NaN) = %v", v)
	}
	x := float32(88.7) // n = 128: the top of the range stays finite
	if v, want := Expf(x), math.Exp(float64(x)); math.Abs(float64(v)-want)/want > 2.4e-7 {
		t.Errorf("Expf(%v) = %v, want %v", x, v, want)
	}
}

// sameBits fails unless x and y hold the same bits (any NaN matches NaN).
func sameBits(t *testing.T, what string, x, y []float32) {
	t.Helper()
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) && !(x[i] != x[i] && y[i] != y[i]) {
			t.Fatalf("%s: element %d is %v, want %v", what, i, x[i], y[i])
		}
	}
}

// testInputs are random values (scale 40, so every range is hit) led by
// the range edges, infinities and NaN.
func testInputs(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 40)
	}
	copy(x, []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), Lo + 0.5, Lo + 0.49,
		Hi + 0.5, Hi + 0.51, 0.5, -1e30, 1e30, float32(math.Copysign(0, -1))})
	return x
}

// testLengths are on both sides of the cgo threshold and of the 8 lanes.
var testLengths = []int{1, 7, cgoMin - 1, cgoMin, 129, 100003}

// TestSameBits: each function (the C loop where cgo is on) gives the bits
// of its Go version, and the exponentials those of Expf.
func TestSameBits(t *testing.T) {
	all := testInputs(2 * 100003)
	for _, n := range testLengths {
		x := all[:n]
		got, want := make([]float32, n), make([]float32, n)
		Shift(got, x, 0.5)
		ShiftScaleGo(want, x, 0.5, 1)
		sameBits(t, "Shift", got, want)
		for i := range x {
			if e := Expf(x[i] - 0.5); math.Float32bits(e) != math.Float32bits(want[i]) && !(e != e && want[i] != want[i]) {
				t.Fatalf("e^(%v−0.5): ShiftScaleGo %v, Expf %v", x[i], want[i], e)
			}
		}
		inPlace := append([]float32(nil), x...)
		ShiftScale(inPlace, inPlace, 0.5, -0.3)
		ShiftScaleGo(want, x, 0.5, -0.3)
		sameBits(t, "ShiftScale in place", inPlace, want)

		s, p := SumExp(x, 0.5)
		sg, pg := SumExpGo(x, 0.5)
		if math.Float64bits(s) != math.Float64bits(sg) || math.Float64bits(p) != math.Float64bits(pg) && !(p != p && pg != pg) {
			t.Fatalf("n=%d: SumExp %v, %v; SumExpGo %v, %v", n, s, p, sg, pg)
		}

		g := all[len(all)-n:]
		u := testInputs(n + 3)[3:]
		d := all[n/2 : n/2+n]
		SiLUMul(got, g, u)
		SiLUMulGo(want, g, u)
		sameBits(t, "SiLUMul", got, want)
		dg, du, dgw, duw := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		SiLUMulBackward(dg, du, d, g, u)
		SiLUMulBackwardGo(dgw, duw, d, g, u)
		sameBits(t, "SiLUMulBackward dg", dg, dgw)
		sameBits(t, "SiLUMulBackward du", du, duw)
	}
}

// TestSumExp: the sums against float64 math on finite inputs, and a −Inf
// entry adds nothing to either sum.
func TestSumExp(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := make([]float32, 50001)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
	}
	x[7] = float32(math.Inf(-1))
	mx := Max(x)
	var ws, wp float64
	for _, v := range x {
		if math.IsInf(float64(v), -1) {
			continue
		}
		d := float64(v) - float64(mx)
		ws += math.Exp(d)
		wp += math.Exp(d) * d
	}
	s, p := SumExp(x, mx)
	if math.Abs(s-ws) > 1e-6*ws || math.Abs(p-wp) > 1e-6*math.Abs(wp) {
		t.Errorf("SumExp = %v, %v; want %v, %v", s, p, ws, wp)
	}
}

// TestMax: Max and MaxGo agree, NaN anywhere wins, −Inf rows stay −Inf.
func TestMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{0, 1, 5, cgoMin, 100, 1000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		cases := [][]float32{x}
		if n > 0 {
			withNaN := append([]float32(nil), x...)
			withNaN[n/2] = nan
			withInf := append([]float32(nil), x...)
			withInf[n-1] = inf
			negInf := make([]float32, n)
			for i := range negInf {
				negInf[i] = -inf
			}
			cases = append(cases, withNaN, withInf, negInf)
		}
		for _, c := range cases {
			want := float32(math.Inf(-1))
			for _, v := range c {
				want = max(want, v)
			}
			got, gotGo := Max(c), MaxGo(c)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) || math.Float32bits(gotGo) != math.Float32bits(got) && !(got != got && gotGo != gotGo) {
				t.Errorf("n=%d: Max %v, MaxGo %v, want %v", n, got, gotGo, want)
			}
		}
	}
}

// TestRows: the block versions agree with the Go ones bit for bit and
// leave the entries past each row's count untouched.
func TestRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const rows, ld, n0 = 70, 90, 15
	s := make([]float32, rows*ld)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * 5)
	}
	shift := make([]float32, rows)
	for i := range shift {
		shift[i] = float32(rng.NormFloat64())
	}
	a, b := append([]float32(nil), s...), append([]float32(nil), s...)
	ma, mb := make([]float32, rows), make([]float32, rows)
	MaxExpRows(a, rows, ld, n0, ma)
	MaxExpRowsGo(b, rows, ld, n0, mb)
	sameBits(t, "MaxExpRows", a, b)
	sameBits(t, "MaxExpRows maxima", ma, mb)
	for r := 0; r < rows; r++ {
		if n := n0 + r; n < ld && a[r*ld+n] != s[r*ld+n] {
			t.Fatalf("row %d: entry %d past the row's count changed", r, n)
		}
	}
	a, b = append([]float32(nil), s...), append([]float32(nil), s...)
	ExpRows(a, rows, ld, n0, shift)
	ExpRowsGo(b, rows, ld, n0, shift)
	sameBits(t, "ExpRows", a, b)
}

func BenchmarkShift(b *testing.B) {
	x := make([]float32, 2048)
	for i := range x {
		x[i] = -float32(i%2000) / 100 // a softmax row: e^(x−max) over [−20, 0]
	}
	d := make([]float32, len(x))
	b.Run("Shift", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Shift(d, x, 0)
		}
	})
	b.Run("ShiftGo", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ShiftScaleGo(d, x, 0, 1)
		}
	})
	b.Run("SumExp", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			SumExp(x, 0)
		}
	})
	b.Run("SumExpGo", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			SumExpGo(x, 0)
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range x {
				d[j] = float32(math.Exp(float64(v)))
			}
		}
	})
}
