package backendtest

// The KV cache formats (model.KVFormats), on backends that have them: a
// bf16 cache and an fp8 (e4m3) one with a scale per (token, KV head).
//
// ScatterRows into a cache then Download must give, bit for bit, what the
// host reference below computes: round to nearest even (bf16), and
// amax/448 scales with codes of x·(448/amax) rounded to nearest even and
// saturated at ±448 (fp8). The reference finds the nearest representable
// value by comparing the neighbours' values in float64 (bf16) or every
// code's (e4m3), not by the bit tricks model.F32ToBF16, model.F32ToE4M3
// and the CUDA kernels use, so it checks them rather than repeating them.
// A NaN is compared as a NaN: its payload after arithmetic is the
// hardware's (x86 and GPUs differ), not the format's. So must a Copy of
// cache rows into another cache of the format; an accumulating scatter,
// another op on a cache tensor, a copy across formats and the use of a
// released cache are errors.
//
// Attention over a cache must match float64 attention over the values the
// reference says the cache holds, within the backend's tolerance for
// Attention (Options.Ops "KVCacheAttention", else Tol).

import (
	"math"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// refBF16 is f rounded to the nearest bf16 value, ties to the even
// mantissa, as float32 bits: ±Inf beyond the largest finite bf16 (a value
// halfway to 2^128 and above rounds to Inf), NaN quieted with its upper
// payload kept ((bits>>16) | 0x40).
func refBF16(f float32) uint32 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return (u>>16 | 0x40) << 16
	}
	sign, mag := u&0x80000000, u&0x7fffffff
	lo := mag >> 16 // truncated bf16 magnitude; lo+1 is the next one up
	if mag == lo<<16 {
		return u
	}
	x := float64(math.Float32frombits(mag))
	dlo, dhi := x-bf16Value(lo), bf16Value(lo+1)-x
	pick := lo
	if dhi < dlo || (dhi == dlo && lo&1 == 1) {
		pick = lo + 1
	}
	return sign | pick<<16
}

// bf16Value is the value of a bf16 magnitude m (sign bit clear) in
// float64, 0x7f80 (Inf) counted as 2^128, the next step up.
func bf16Value(m uint32) float64 {
	e, f := int(m>>7), float64(m&0x7f)
	if e == 0 {
		return math.Ldexp(f, -133)
	}
	return math.Ldexp(1+f/128, e-127)
}

// e4m3Value is the value of an e4m3 magnitude code c < 0x7f.
func e4m3Value(c uint8) float64 {
	e, m := int(c>>3), float64(c&7)
	if e == 0 {
		return math.Ldexp(m, -9)
	}
	return math.Ldexp(1+m/8, e-7)
}

// refE4M3 is the e4m3 code nearest f among every finite code, ties to the
// even code (the one whose last mantissa bit is 0); beyond ±448 (Inf
// included) it saturates to ±448, and NaN gives a NaN code.
func refE4M3(f float32) uint8 {
	sign := uint8(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	x := math.Abs(float64(f))
	switch {
	case math.IsNaN(x):
		return sign | 0x7f
	case x >= model.E4M3Max:
		return sign | 0x7e
	}
	best := uint8(0)
	for c := uint8(1); c < 0x7f; c++ {
		d, db := math.Abs(e4m3Value(c)-x), math.Abs(e4m3Value(best)-x)
		if d < db || (d == db && c&1 == 0) {
			best = c
		}
	}
	return sign | best
}

// refFP8Row is what an fp8 cache row of one head holds after writing x,
// read back: scale = amax/448 over the finite |x| (float32 division),
// codes of x·(448/amax) (float32 product; 0 for an all-zero row), each
// code's value times the scale (float32 product).
func refFP8Row(x []float32) []float32 {
	var amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); !math.IsNaN(float64(v)) && a > amax {
			amax = a
		}
	}
	var inv float32
	if amax > 0 {
		inv = float32(model.E4M3Max) / amax
	}
	scale := amax / float32(model.E4M3Max)
	out := make([]float32, len(x))
	for i, v := range x {
		c := refE4M3(v * inv)
		val := float32(math.NaN())
		if c&0x7f != 0x7f {
			val = float32(e4m3Value(c & 0x7f))
			if c&0x80 != 0 {
				val = -val
			}
		}
		out[i] = val * scale
	}
	return out
}

// kvCase is a cache of rows (rows, G, D) and the values written to it.
type kvCase struct {
	name    string
	G, D    int
	rows    int
	idx     []int32   // cache rows written, in order (a repeat keeps the last)
	src     []float32 // (len(idx), G, D)
	viewRow int       // the write goes through the view of rows [viewRow, rows)
}

// kvCases covers ties, subnormals, saturation, zeros, NaN and Inf rows and
// random rows across magnitudes, written through a view, with a repeated
// row and rows never written (which stay 0).
func (s *suite) kvCases() []kvCase {
	G, D := 2, 16
	w := G * D
	// Ties: with a head's amax 448 its fp8 scale is 1, so e4m3 ties land
	// exactly (1.0625 → 1, 1.1875 → 1.25, 1.3125 → 1.25, 3·2^-10 → 2^-8,
	// 5·2^-10 → 2^-8, 9·2^-10 → 2^-7, 1.5·2^-9 → 2^-8), as do bf16's
	// (1 + 2^-8 → 1, 1 + 3·2^-8 → 1 + 2^-6); then negative zero and
	// values around the e4m3 subnormals.
	ties := []float32{1.0625, 1.1875, 3.0 / 1024, 5.0 / 1024, 448, -448, 1 + 1.0/256, 1 + 3.0/256,
		float32(math.Copysign(0, -1)), 0, 7e-3, -2.5e-3, 1.3125, 9.0 / 1024, 1.5 / 512, -1.1875}
	ties = append(ties, ties...)
	for i := range D {
		ties[D+i] *= -1 // the second head: the same ties, negated
	}
	// bf16's extremes: subnormals, rounding up to the largest finite
	// value and past it to Inf.
	extremes := append([]float32{1e-40, -3e-39, 3.3895e38, -3.4e38, 3.3961e38}, s.randn(w-5, 1)...)
	nan := s.randn(w, 1)
	nan[3] = float32(math.NaN())
	inf := s.randn(w, 1)
	inf[w-1] = float32(math.Inf(1))
	var src []float32
	for _, row := range [][]float32{ties, extremes, make([]float32, w), nan} {
		src = append(src, row...)
	}
	for _, sc := range []float64{1e-3, 1, 1e3, 3e-5} {
		src = append(src, s.randn(w, sc)...)
	}
	// The first head of this row is ~1e4 times the second: each head its
	// own scale.
	mixed := append(s.randn(D, 1e4), s.randn(D, 1)...)
	src = append(src, mixed...)
	finite := append([]float32(nil), src...)
	return []kvCase{
		{"finite", G, D, 16, []int32{0, 2, 3, 4, 5, 6, 7, 8, 9, 3}, append(finite, s.randn(w, 2)...), 2},
		{"inf", G, D, 4, []int32{1}, inf, 0},
	}
}

func (s *suite) kvCache(t *testing.T) {
	kf := model.SamplerCapsOf(s.b).KV
	if kf == nil {
		t.Skip("no narrow KV cache formats: the cache is fp32")
	}
	t.Run("BF16Scatter", func(t *testing.T) {
		for _, c := range s.kvCases() {
			s.kvScatter(t, c, kf.NewHalf, func(x []float32) []float32 {
				out := make([]float32, len(x))
				for i, v := range x {
					out[i] = math.Float32frombits(refBF16(v))
				}
				return out
			})
		}
	})
	t.Run("FP8Scatter", func(t *testing.T) {
		if err := kf.FP8KV(&model.Config{HeadDim: 16, NumAttentionHeads: 4, NumKeyValueHeads: 2}); err != nil {
			t.Skipf("no fp8 cache here: %v", err)
		}
		for _, c := range s.kvCases() {
			s.kvScatter(t, c, kf.NewFP8, func(x []float32) []float32 {
				var out []float32
				for h := 0; h < len(x); h += c.D {
					out = append(out, refFP8Row(x[h:h+c.D])...)
				}
				return out
			})
		}
	})
	t.Run("Attention", func(t *testing.T) { s.kvAttention(t, kf) })
	t.Run("Refusals", func(t *testing.T) { s.kvRefusals(t, kf) })
}

// kvRefusals: a cache tensor is not an fp32 tensor (an op outside the
// cache's takes it as an error), a copy between formats is an error, and
// a released cache refuses use and a second release.
func (s *suite) kvRefusals(t *testing.T, kf model.KVFormats) {
	fails := func(what string, op func()) {
		t.Helper()
		op()
		if s.b.Err() == nil {
			t.Errorf("%s: accepted", what)
		}
		s.b.ResetErr()
	}
	half := kf.NewHalf(4, 2, 16)
	fails("scale of a bf16 cache", func() { s.b.Scale(half, 2) })
	fails("upload into a bf16 cache", func() { s.b.Upload(half, make([]float32, 4*2*16)) })
	if kf.FP8KV(&model.Config{HeadDim: 16, NumAttentionHeads: 4, NumKeyValueHeads: 2}) == nil {
		fp8 := kf.NewFP8(4, 2, 16)
		fails("scale of an fp8 cache", func() { s.b.Scale(fp8, 2) })
		fails("copy of a bf16 cache into an fp8 one", func() { s.b.Copy(fp8, half) })
		model.Release(s.b, fp8)
		s.noErr(t, "release")
	}
	model.Release(s.b, half)
	s.noErr(t, "release")
	if _, ok := s.b.(model.MemoryPool); ok {
		fails("download of a released cache", func() { s.get(half) })
		fails("second release of a cache", func() { model.Release(s.b, half) })
	}
}

// kvScatter writes c into a cache newCache makes (via ScatterRows on a
// view) and checks Download, and a Copy of the written rows into a second
// cache, against ref (the cache's reading of one row's values), bit for
// bit; then that the cache refuses an accumulating scatter.
func (s *suite) kvScatter(t *testing.T, c kvCase, newCache func(shape ...int) *model.Tensor, ref func([]float32) []float32) {
	t.Helper()
	cache := newCache(c.rows, c.G, c.D)
	w := c.G * c.D
	want := make([]float32, c.rows*w)
	for i, r := range c.idx {
		copy(want[(c.viewRow+int(r))*w:], ref(c.src[i*w:(i+1)*w]))
	}
	src := s.tensor(c.src, len(c.idx), w)
	s.b.ScatterRows(cache.Rows(c.viewRow, c.rows).View(c.rows-c.viewRow, w), src, c.idx, false)
	s.noErr(t, c.name+": scatter rows")
	s.sameBits(t, c.name+": download", s.get(cache), want)
	// A prefix copied into another cache of the format (CopyPrefix).
	other := newCache(c.rows, c.G, c.D)
	s.b.Copy(other.Rows(0, c.rows-1), cache.Rows(1, c.rows))
	s.noErr(t, c.name+": copy")
	s.sameBits(t, c.name+": copy", s.get(other)[:(c.rows-1)*w], want[w:])
	s.b.ScatterRows(cache, s.tensor(c.src[:w], 1, c.G, c.D), []int32{0}, true)
	if s.b.Err() == nil {
		t.Errorf("%s: an accumulating scatter into a cache was accepted", c.name)
	}
	s.b.ResetErr()
	model.Release(s.b, cache, other, src)
	s.noErr(t, c.name+": release")
}

// sameBits fails unless got and want are equal bit for bit, NaN as NaN.
func (s *suite) sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		g, w := got[i], want[i]
		if g != g && w != w || math.Float32bits(g) == math.Float32bits(w) {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%s: element %d is %g (%#08x), the host reference %g (%#08x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ in all", what, bad)
	}
}

// kvAttention runs attention over bf16 and fp8 caches (decode and chunked
// prefill layouts) against float64 attention over the reference's values.
func (s *suite) kvAttention(t *testing.T, kf model.KVFormats) {
	H, G, D := 4, 2, 16
	tol, ok := s.o.Ops["KVCacheAttention"]
	if !ok {
		tol = s.o.Tol
	}
	layouts := []struct {
		name   string
		nq, nk int
		segs   []model.Segment
	}{
		{"decode", 2, 40, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 7}, {Q0: 1, QLen: 1, K0: 20, KLen: 19}}},
		{"chunked prefill", 5, 24, []model.Segment{{Q0: 0, QLen: 5, K0: 3, KLen: 17}}},
	}
	formats := []struct {
		name  string
		new   func(shape ...int) *model.Tensor
		round func([]float32) []float32
	}{
		{"bf16", kf.NewHalf, func(x []float32) []float32 {
			out := make([]float32, len(x))
			for i, v := range x {
				out[i] = math.Float32frombits(refBF16(v))
			}
			return out
		}},
		{"fp8", kf.NewFP8, func(x []float32) []float32 {
			var out []float32
			for h := 0; h < len(x); h += D {
				out = append(out, refFP8Row(x[h:h+D])...)
			}
			return out
		}},
	}
	fp8Err := kf.FP8KV(&model.Config{HeadDim: D, NumAttentionHeads: H, NumKeyValueHeads: G})
	scale := 1 / math.Sqrt(float64(D))
	for _, f := range formats {
		if f.name == "fp8" && fp8Err != nil {
			t.Logf("fp8 skipped: %v", fp8Err)
			continue
		}
		for _, l := range layouts {
			qv, kv, vv := s.randn(l.nq*H*D, 1), s.randn(l.nk*G*D, 1), s.randn(l.nk*G*D, 1)
			kc, vc := f.new(l.nk, G, D), f.new(l.nk, G, D)
			idx := make([]int32, l.nk)
			for i := range idx {
				idx[i] = int32(i)
			}
			ks, vs := s.tensor(kv, l.nk, G, D), s.tensor(vv, l.nk, G, D)
			s.b.ScatterRows(kc, ks, idx, false)
			s.b.ScatterRows(vc, vs, idx, false)
			qt := s.tensor(qv, l.nq, H, D)
			out, lse := s.b.New(l.nq, H, D), s.b.New(l.nq, H)
			s.b.Attention(out, lse, qt, kc, vc, l.segs, float32(scale))
			s.noErr(t, f.name+" "+l.name)
			want := refAttention(qv, f.round(kv), f.round(vv), H, G, D, l.segs, scale, l.nq)
			s.expect(t, f.name+" "+l.name, s.get(out), want, tol)
			// The fp32 cache the format replaces, for scale: the format's
			// own error against exact keys and values (logged).
			exact := refAttention(qv, kv, vv, H, G, D, l.segs, scale, l.nq)
			if st, err := numcheck.Compare(s.get(out), exact, numcheck.Tol{Atol: 1, Rtol: 1}); err == nil {
				t.Logf("%s %s: max abs difference from attention over the fp32 keys and values %.2g", f.name, l.name, st.MaxAbs)
			}
			model.Release(s.b, kc, vc, ks, vs, qt, out, lse)
		}
	}
}
