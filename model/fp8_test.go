package model

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// e4m3Value is the float64 value of code c from the format's definition
// (NaN for S.1111.111), independent of E4M3ToF32.
func e4m3Value(c uint8) float64 {
	s, e, m := c>>7, int(c>>3)&0xf, float64(c&7)
	if e == 0xf && m == 7 {
		return math.NaN()
	}
	v := m / 8 * math.Pow(2, -6)
	if e > 0 {
		v = (1 + m/8) * math.Pow(2, float64(e-7))
	}
	if s == 1 {
		return -v
	}
	return v
}

// e4m3Ref rounds f to e4m3 in float64: the nearest finite code (ties to the
// even code), ±448 beyond the range, NaN to 0x7f with its sign.
func e4m3Ref(f float32) uint8 {
	sign := uint8(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	x := math.Abs(float64(f))
	switch {
	case math.IsNaN(x):
		return sign | 0x7f
	case x >= E4M3Max:
		return sign | 0x7e
	}
	best := uint8(0)
	for c := uint8(1); c <= 0x7e; c++ {
		d, db := math.Abs(e4m3Value(c)-x), math.Abs(e4m3Value(best)-x)
		if d < db || (d == db && c&1 == 0) {
			best = c
		}
	}
	return sign | best
}

// TestE4M3Codes: every one of the 256 codes widens to its defined value and
// rounds back to itself (NaN to NaN); 0x7e is 448.
func TestE4M3Codes(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := uint8(i)
		want, got := e4m3Value(c), float64(E4M3ToF32(c))
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Errorf("code %#02x: %g, want NaN", c, got)
			}
			if back := F32ToE4M3(float32(got)); back&0x7f != 0x7f {
				t.Errorf("NaN rounds to %#02x, want a NaN code", back)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("code %#02x: %g, want %g", c, got, want)
		}
		if back := F32ToE4M3(float32(got)); back != c {
			t.Errorf("code %#02x = %g rounds back to %#02x", c, got, back)
		}
	}
	if E4M3ToF32(0x7e) != 448 || E4M3ToF32(0x01) != float32(math.Pow(2, -9)) {
		t.Errorf("largest %g, smallest subnormal %g", E4M3ToF32(0x7e), E4M3ToF32(0x01))
	}
}

// TestE4M3Rounding: round to nearest even against the float64 reference on
// every midpoint between neighbouring codes (the ties), a float32 step
// either side of each, and random floats over the whole range, subnormals,
// saturation and the special values included.
func TestE4M3Rounding(t *testing.T) {
	check := func(f float32) {
		t.Helper()
		if got, want := F32ToE4M3(f), e4m3Ref(f); got != want {
			t.Fatalf("F32ToE4M3(%g [%#08x]) = %#02x (%g), want %#02x (%g)", f, math.Float32bits(f), got,
				E4M3ToF32(got), want, E4M3ToF32(want))
		}
	}
	var vals []float64
	for c := 0; c <= 0x7e; c++ {
		vals = append(vals, e4m3Value(uint8(c)))
	}
	sort.Float64s(vals)
	for i := 0; i+1 < len(vals); i++ {
		mid := float32((vals[i] + vals[i+1]) / 2) // exact: a few bits more than e4m3
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	for _, f := range []float32{0, float32(math.Copysign(0, -1)), 448, 449, 463.99, 464, 480, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, 1e-45, float32(math.Pow(2, -10)),
		float32(math.Pow(2, -10)) * 1.0001, float32(math.Pow(2, -6)), float32(math.Pow(2, -6)) * (1 - 1.0/32)} {
		check(f)
		check(-f)
	}
	rng := rand.New(rand.NewPCG(8, 9))
	for i := 0; i < 200000; i++ {
		// log-uniform magnitudes from 2^-14 (under the subnormals) to 2^10
		// (past saturation), either sign.
		f := float32(math.Exp2(rng.Float64()*24-14) * float64(1-2*rng.IntN(2)))
		check(f)
	}
	for i := 0; i < 100000; i++ {
		check(math.Float32frombits(rng.Uint32())) // any bit pattern
	}
}

// TestQuantizeE4M3: a row's scale is amax/448, its largest element reads
// back exactly, every element within half a code step of the float64
// value (relative 2^-4 for normal codes, 2^-10·scale for subnormal ones),
// NaN stays NaN without spoiling the others, and a zero row is zeros.
func TestQuantizeE4M3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := 1 + rng.IntN(256)
		x := make([]float32, n)
		mag := math.Exp2(rng.Float64()*40 - 20)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * mag)
		}
		if trial%7 == 0 {
			x[rng.IntN(n)] = float32(math.NaN())
		}
		q := make([]uint8, n)
		s := QuantizeE4M3(q, x)
		var amax float64
		for _, v := range x {
			if !math.IsNaN(float64(v)) {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
		}
		if want := float32(amax) / 448; s != want {
			t.Fatalf("trial %d: scale %g, want amax/448 = %g", trial, s, want)
		}
		back := make([]float32, n)
		DequantizeE4M3(back, q, s)
		for i, v := range x {
			if math.IsNaN(float64(v)) {
				if !math.IsNaN(float64(back[i])) {
					t.Fatalf("trial %d: NaN element %d reads back %g", trial, i, back[i])
				}
				continue
			}
			err := math.Abs(float64(back[i]) - float64(v))
			bound := math.Max(math.Abs(float64(v))/16, float64(s)/1024) * (1 + 1e-6)
			if err > bound {
				t.Fatalf("trial %d element %d: %g reads back %g (error %g > %g, scale %g)", trial, i, v, back[i], err, bound, s)
			}
			if math.Abs(float64(v)) == amax && math.Abs(float64(back[i])-float64(v)) > 1e-6*amax {
				t.Fatalf("trial %d: the largest element %g reads back %g", trial, v, back[i])
			}
		}
	}
	zero := make([]float32, 16)
	q := make([]uint8, 16)
	if s := QuantizeE4M3(q, zero); s != 0 || q[3] != 0 {
		t.Errorf("zero row: scale %g, code %#02x", s, q[3])
	}
	if got := FP8KVRowBytes(8, 128); got != 1056 {
		t.Errorf("row bytes at g=8, d=128: %d, want 1056", got)
	}
}
