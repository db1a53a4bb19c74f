package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// Staleness of bf16 copies by element range (spans.go), on a fused weight:
// one fp32 buffer with a bf16 copy and two row views, as Layer.QKV's q and
// k or the MLP's gate and up. Mutations seen to fail these tests: AdamW
// and AdamWAll writing no copy for row views (p16 = 0 unless the view is
// the whole buffer: conversions after every step), AdamW marking the whole
// buffer fresh instead of its view, a write through a view marking nothing
// stale, halfOf converting only the first stale range, markStale
// marking only the first element, and graph steps never undone.

// fusedCols is the fused weight's row length (odd: views start at odd
// elements); each view has at least 3·fusedCols rows, so a product with
// fusedCols rows reads the copy.
const fusedCols = 7

type fusedCopy struct {
	t     *testing.T
	b     *Backend
	rng   *rand.Rand
	w     *model.Tensor
	views [2]*model.Tensor
	gmv   [2][3]*model.Tensor // each view's gradient and AdamW moments
	// extra is another weight (no copy) that AdamWAll updates with the
	// views, so that it takes its multi-tensor launch with one view too.
	extra [4]*model.Tensor
	step  int
}

func newFusedCopy(t *testing.T) *fusedCopy {
	t.Helper()
	b := NewBackend(testDevice(t), BF16)
	f := &fusedCopy{t: t, b: b, rng: rand.New(rand.NewPCG(11, 3))}
	rows := [2]int{32, 40}
	f.w = b.New(rows[0]+rows[1], fusedCols)
	b.Upload(f.w, f.randn(f.w.Numel()))
	f.views = [2]*model.Tensor{f.w.Rows(0, rows[0]), f.w.Rows(rows[0], rows[0]+rows[1])}
	for i, v := range f.views {
		if ok, err := b.Shadow(v); err != nil || !ok {
			t.Fatalf("shadow of view %d: %v, %v", i, ok, err)
		}
		for j := range f.gmv[i] {
			f.gmv[i][j] = b.New(v.Shape...)
		}
	}
	for j := range f.extra {
		f.extra[j] = b.New(5, 3)
	}
	b.Upload(f.extra[0], f.randn(15))
	if n, e := f.refresh(); n != 1 || e != f.w.Numel() {
		t.Fatalf("the first product's refresh: %d conversions of %d elements, want 1 of %d", n, e, f.w.Numel())
	}
	t.Cleanup(func() {
		b.Release(f.w)
		for _, ts := range f.gmv {
			b.Release(ts[:]...)
		}
		b.Release(f.extra[:]...)
	})
	return f
}

func (f *fusedCopy) randn(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(f.rng.NormFloat64())
	}
	return x
}

// adamw runs one AdamW step on the given views, view by view (AdamW) or in
// one launch (AdamWAll).
func (f *fusedCopy) adamw(multi bool, which ...int) {
	f.t.Helper()
	b := f.b
	f.step++
	h := model.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: f.step}
	var ps, gs, ms, vs []*model.Tensor
	for _, i := range which {
		b.Upload(f.gmv[i][0], f.randn(f.views[i].Numel()))
		ps, gs, ms, vs = append(ps, f.views[i]), append(gs, f.gmv[i][0]), append(ms, f.gmv[i][1]), append(vs, f.gmv[i][2])
	}
	before := b.d.Launches()["adamw_multi"]
	if multi {
		b.Upload(f.extra[1], f.randn(15))
		ps, gs, ms, vs = append(ps, f.extra[0]), append(gs, f.extra[1]), append(ms, f.extra[2]), append(vs, f.extra[3])
		b.AdamWAll(ps, gs, ms, vs, h)
		if b.d.Launches()["adamw_multi"] != before+1 {
			f.t.Fatal("AdamWAll did not run adamw_multi")
		}
	} else {
		for i := range ps {
			b.AdamW(ps[i], gs[i], ms[i], vs[i], h)
		}
	}
	if err := b.Err(); err != nil {
		f.t.Fatal(err)
	}
}

// refresh brings the copy up to date as a product would (halfOf) and
// returns the f32_to_bf16 launches that took and the elements they
// converted (from the profile's bytes: 6 an element).
func (f *fusedCopy) refresh() (launches, elems int) {
	d := f.b.d
	n0, b0 := d.Launches()["f32_to_bf16"], d.Profile().Bytes[EngineKernel]
	f.b.halfOf(f.views[1])
	return d.Launches()["f32_to_bf16"] - n0, int(math.Round((d.Profile().Bytes[EngineKernel] - b0) / 6))
}

// check holds the copy to the fp32 values: every element of the copy is
// the bf16 rounding of its fp32 value, and a product with each view
// (identity · viewᵀ, which reads the copy) gives exactly those roundings.
func (f *fusedCopy) check(stage string) {
	f.t.Helper()
	b := f.b
	master := model.Values(b, f.w)
	buf := f.w.Store.(*buffer)
	sh := make([]uint16, buf.elems)
	if err := b.d.copyOut(unsafe.Pointer(&sh[0]), buf.shadow.ptr, int64(2*len(sh))); err != nil {
		f.t.Fatal(err)
	}
	bad := 0
	for i, x := range master {
		if want := model.F32ToBF16(x); sh[i] != want {
			if bad < 3 {
				f.t.Errorf("%s: copy [%d] = %#04x, want %#04x (the rounding of %g): a stale copy", stage, i, sh[i], want, x)
			}
			bad++
		}
	}
	id := model.NewFrom(b, identity(fusedCols), fusedCols, fusedCols)
	defer b.Release(id)
	for vi, v := range f.views {
		N := v.Shape[0]
		c := b.New(fusedCols, N)
		b.MatMul(c, id, v, false, true, false)
		got := model.Values(b, c)
		b.Release(c)
		for k := range fusedCols {
			for n := range N {
				want := bf16Round(master[v.Off+n*fusedCols+k])
				if g := got[k*N+n]; math.Float32bits(g) != math.Float32bits(want) {
					if bad < 6 {
						f.t.Errorf("%s: product with view %d [%d, %d] = %g, want %g (the rounding of the fp32 weight)", stage, vi, k, n, g, want)
					}
					bad++
				}
			}
		}
	}
	if err := b.Err(); err != nil {
		f.t.Fatal(err)
	}
}

// expect refreshes the copy and checks it, wanting launches conversions
// of elems elements.
func (f *fusedCopy) expect(stage string, launches, elems int) {
	f.t.Helper()
	if n, e := f.refresh(); n != launches || e != elems {
		f.t.Errorf("%s: the refresh ran %d conversions of %d elements, want %d of %d", stage, n, e, launches, elems)
	}
	f.check(stage)
}

// TestFusedCopyAdamW: AdamW and AdamWAll on the row views of a fused
// weight write the views' parts of its bf16 copy in their pass, so no
// conversion follows, and products read exactly the rounding of the new
// weights.
func TestFusedCopyAdamW(t *testing.T) {
	f := newFusedCopy(t)
	f.check("made")
	for round := range 2 {
		f.adamw(false, 0, 1)
		f.expect(fmt.Sprintf("round %d: AdamW on both views", round), 0, 0)
		f.adamw(true, 0, 1)
		f.expect(fmt.Sprintf("round %d: AdamWAll on both views", round), 0, 0)
		f.adamw(false, 1)
		f.expect(fmt.Sprintf("round %d: AdamW on the second view", round), 0, 0)
		f.adamw(true, 1, 0)
		f.expect(fmt.Sprintf("round %d: AdamWAll on both views, the second first", round), 0, 0)
	}
}

// TestFusedCopyOtherWrite: a view updated by AdamW while an op writes the
// other view (before or after), or the same view after it: the refresh
// converts exactly the written view, and products see both new values.
func TestFusedCopyOtherWrite(t *testing.T) {
	f := newFusedCopy(t)
	b := f.b
	writes := []struct {
		name  string
		write func(v *model.Tensor)
	}{
		{"copy", func(v *model.Tensor) {
			src := model.NewFrom(b, f.randn(v.Numel()), v.Shape...)
			b.Copy(v, src)
			b.Release(src)
		}},
		{"scatter rows", func(v *model.Tensor) {
			src := model.NewFrom(b, f.randn(2*fusedCols), 2, fusedCols)
			b.ScatterRows(v, src, []int32{3, int32(v.Shape[0] - 1)}, false)
			b.Release(src)
		}},
		{"scale", func(v *model.Tensor) { b.Scale(v, 0.75) }},
		{"accumulated product", func(v *model.Tensor) {
			x, y := model.NewFrom(b, f.randn(v.Shape[0]*4), v.Shape[0], 4), model.NewFrom(b, f.randn(4*fusedCols), 4, fusedCols)
			b.MatMul(v, x, y, false, false, true)
			b.Release(x, y)
		}},
	}
	for _, w := range writes {
		for _, multi := range []bool{false, true} {
			name := "AdamW"
			if multi {
				name = "AdamWAll"
			}
			// The first view updated, the second written before it.
			w.write(f.views[1])
			f.adamw(multi, 0)
			f.expect(fmt.Sprintf("%s into the second view, then %s on the first", w.name, name), 1, f.views[1].Numel())
			// … and after it.
			f.adamw(multi, 0)
			w.write(f.views[1])
			f.expect(fmt.Sprintf("%s on the first view, then %s into the second", name, w.name), 1, f.views[1].Numel())
			// The first view written after its update.
			f.adamw(multi, 0, 1)
			w.write(f.views[0])
			f.expect(fmt.Sprintf("%s on both views, then %s into the first", name, w.name), 1, f.views[0].Numel())
			// Both written, the first updated last: the second's range
			// alone is stale.
			w.write(f.views[0])
			w.write(f.views[1])
			f.adamw(multi, 0)
			f.expect(fmt.Sprintf("%s into both views, then %s on the first", w.name, name), 1, f.views[1].Numel())
		}
	}
	// Two stale ranges apart, at odd elements, around a view's AdamW: one
	// conversion each.
	for _, multi := range []bool{false, true} {
		a, c := f.w.Rows(3, 5), f.w.Rows(50, 61)
		b.Scale(a, 2)
		f.adamw(multi, 1)
		b.Scale(c, 0.5)
		f.expect(fmt.Sprintf("two rows of the first view and eleven of the second written, AdamW on the second between (multi %v)", multi),
			2, a.Numel()+c.Numel())
	}
}

// TestFusedCopyWholeWrite: a write to the whole buffer after the views'
// AdamW makes the whole copy stale again, converted in one pass.
func TestFusedCopyWholeWrite(t *testing.T) {
	f := newFusedCopy(t)
	b := f.b
	for _, multi := range []bool{false, true} {
		f.adamw(multi, 0, 1)
		b.Upload(f.w, f.randn(f.w.Numel()))
		f.expect(fmt.Sprintf("upload of the whole buffer after AdamW (multi %v)", multi), 1, f.w.Numel())
		f.adamw(multi, 0)
		b.Scale(f.w, 1.5)
		f.expect(fmt.Sprintf("scale of the whole buffer after AdamW on one view (multi %v)", multi), 1, f.w.Numel())
		// A write of one view, then of the whole: still one pass.
		b.Scale(f.views[1], 0.5)
		f.adamw(multi, 0)
		b.Scale(f.w, 0.25)
		f.expect(fmt.Sprintf("scale of a view, AdamW on the other, scale of the whole (multi %v)", multi), 1, f.w.Numel())
	}
}

// TestFusedCopyGraphUndo: a graph step's ops run only if its graph is
// launched; a step replayed on the host whose graph is then not launched
// (a fingerprint mismatch) leaves stale what its conversions and AdamW
// marked fresh (graphRun.undo), so the eager rerun converts it.
func TestFusedCopyGraphUndo(t *testing.T) {
	f := newFusedCopy(t)
	b := f.b
	unlaunched := func(stage string, step func()) {
		t.Helper()
		gr := &graphRun{mode: graphReplay}
		n0 := b.d.Launches()["f32_to_bf16"]
		b.d.rec, b.gr = newRecorder(true), gr
		step()
		b.d.rec, b.gr = nil, nil
		if n := b.d.Launches()["f32_to_bf16"]; n != n0 {
			t.Fatalf("%s: a replay issued %d conversions", stage, n-n0)
		}
		if len(gr.fresh) == 0 {
			t.Fatalf("%s: the replay marked nothing fresh", stage)
		}
		gr.undo()
	}
	b.Scale(f.views[1], 0.5)
	unlaunched("halfOf", func() { b.halfOf(f.views[0]) })
	f.expect("a conversion replayed, not launched", 1, f.views[1].Numel())

	b.Upload(f.gmv[0][0], f.randn(f.views[0].Numel()))
	b.Scale(f.w, 0.5)
	f.step++
	h := model.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: f.step}
	unlaunched("AdamW", func() { b.AdamW(f.views[0], f.gmv[0][0], f.gmv[0][1], f.gmv[0][2], h) })
	f.expect("AdamW replayed, not launched", 1, f.w.Numel())
}

// TestSpans: spans.add and remove against a set of indices, keeping their
// ranges sorted, disjoint, non-adjacent and non-empty.
func TestSpans(t *testing.T) {
	const n = 48
	rng := rand.New(rand.NewPCG(2, 9))
	for trial := range 200 {
		var s spans
		var set [n]bool
		for op := range 20 {
			lo := rng.IntN(n + 1)
			hi := lo + rng.IntN(n+1-lo)
			add := rng.IntN(2) == 0
			if add {
				s = s.add(lo, hi)
			} else {
				s = s.remove(lo, hi)
			}
			for i := lo; i < hi; i++ {
				set[i] = add
			}
			var want spans
			for i := 0; i < n; i++ {
				if set[i] && (i == 0 || !set[i-1]) {
					want = append(want, span{i, i})
				}
				if set[i] {
					want[len(want)-1].hi = i + 1
				}
			}
			if !slices.Equal(s, want) {
				t.Fatalf("trial %d, op %d (add %v [%d, %d)): %v, want %v", trial, op, add, lo, hi, s, want)
			}
			count := 0
			for _, in := range set {
				if in {
					count++
				}
			}
			if e := s.elems(); e != count {
				t.Fatalf("trial %d, op %d: %d elements, want %d", trial, op, e, count)
			}
		}
	}
}
