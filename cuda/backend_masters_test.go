package cuda

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// TestHalfOnlyWeights: a bf16-only weight (sharded fp32 masters) behaves
// in products exactly as an fp32 weight with a bf16 copy does, bit for
// bit, for a few-row product (which reads the copy) and a training-sized
// one (which rounds in cuBLAS's tile loads); AdamWHalf updates the master
// and writes the same bf16 rounding AdamW writes into a copy; views of a
// fused storage follow it; Download refuses the weight by name of the
// cause. Mutations seen to fail it: AdamWHalf without its bf16 output
// (p16 = 0), and HalfOnly rounding by truncation instead of to nearest.
func TestHalfOnlyWeights(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	rng := rand.New(rand.NewSource(7))
	host := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	up := func(x []float32, shape ...int) *model.Tensor {
		tt := b.New(shape...)
		b.Upload(tt, x)
		return tt
	}
	down := func(tt *model.Tensor) []float32 {
		out := make([]float32, tt.Numel())
		b.Download(tt, out)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
		}
		bad := 0
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				if bad < 3 {
					t.Errorf("%s [%d]: %g, want %g (bitwise)", what, i, got[i], want[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", what, bad, len(got))
		}
	}

	const O, C = 6, 37 // a weight (O, C): 222 elements, padded to 224 for W = 4
	wv := host(O * C)
	copied, half := up(wv, O, C), up(wv, O, C)
	if ok, err := b.Shadow(copied); err != nil || !ok {
		t.Fatalf("Shadow: %v, %v", ok, err)
	}
	if err := b.HalfOnly(half, 2); err != nil {
		t.Fatal(err)
	}
	if !b.IsHalfOnly(half) || b.IsHalfOnly(copied) {
		t.Fatal("IsHalfOnly does not tell the bf16-only weight from the fp32 one")
	}
	for _, rows := range []int{1, 3, 80} { // 80 rows: 3·x > w, the fp32 tile-load path for the copy
		x := up(host(rows*C), rows, C)
		want, got := b.New(rows, O), b.New(rows, O)
		b.MatMul(want, x, copied, false, true, false)
		b.MatMul(got, x, half, false, true, false)
		same(fmt.Sprintf("x·wᵀ of %d rows", rows), down(got), down(want))
	}
	rounded := make([]float32, O*C)
	for i, v := range wv {
		rounded[i] = bf16Round(v)
	}
	read := make([]float32, O*C)
	b.ReadHalf(half, read)
	same("ReadHalf", read, rounded)

	b.Download(half, make([]float32, O*C))
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "bf16-only weight") {
		t.Fatalf("Download of a bf16-only weight: %v, want an error naming it", err)
	}
	b.ResetErr()

	// One AdamW step on rank 1's range of 4: the master and the bf16 part.
	lo, hi := optim.Shard{Rank: 1, World: 4}.Range(O * C)
	g, m, v := host(O*C), make([]float32, O*C), make([]float32, O*C)
	for i := range v {
		m[i], v[i] = 0.1*float32(i%7), 0.01*float32(i%5)
	}
	h := model.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, Step: 3}
	b.AdamW(copied, up(g, O, C), up(m, O*C), up(v, O*C), h)
	master, mm, vv := up(wv[lo:hi], hi-lo), up(m[lo:hi], hi-lo), up(v[lo:hi], hi-lo)
	b.AdamWHalf(master, half.View(O*C).Rows(lo, hi), up(g[lo:hi], hi-lo), mm, vv, h)
	after := down(copied)
	same("updated master", down(master), after[lo:hi])
	b.ReadHalf(half, read)
	for i := range rounded {
		if i >= lo && i < hi {
			rounded[i] = bf16Round(after[i])
		}
	}
	same("bf16 weight after AdamWHalf (owned range updated, the rest as it was)", read, rounded)

	// WriteHalf rounds; the views of a fused storage follow it.
	fused := up(host(10*C), 10, C)
	top, bottom := fused.Rows(0, 4), fused.Rows(4, 10)
	for _, tt := range []*model.Tensor{fused, top, bottom} {
		if err := b.HalfOnly(tt, 3); err != nil {
			t.Fatal(err)
		}
	}
	vals := host(6 * C)
	b.WriteHalf(bottom, vals)
	got := make([]float32, 6*C)
	b.ReadHalf(bottom, got)
	for i := range vals {
		vals[i] = bf16Round(vals[i])
	}
	same("WriteHalf then ReadHalf of a view", got, vals)
	if buf := bottom.Store.(*buffer); buf != fused.Store.(*buffer) || buf.elems != 10*C+3 {
		t.Errorf("views do not share the padded bf16 storage (%d elements, want %d)", buf.elems, 10*C+3)
	}
	b.AdamW(top, b.New(4, C), b.New(4*C), b.New(4*C), h)
	if err := b.Err(); err == nil {
		t.Error("AdamW wrote a bf16-only weight as if it were fp32")
	}
	b.ResetErr()
}

// TestShardedMastersMemory measures what a rank holds for the policy's
// matrices once its optimizer shards the fp32 masters (rank 1 of 4, the
// tiny model, untied head): the device bytes in use drop by exactly the
// fp32 storages and bf16 copies of every matrix but the embedding, and
// grow by their padded bf16 storages and this rank's fp32 master ranges
// (each allocation rounded as the pool rounds it). That is the per-rank
// accounting docs/data-parallel.md gives: 2 + 4/W bytes per element
// instead of 4 + 2.
func TestShardedMastersMemory(t *testing.T) {
	d := testDevice(t)
	b := NewBackend(d, BF16)
	o := model.DefaultTiny()
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Model{Cfg: mc, B: b, P: model.RandomParams(b, mc, 1, 0.02, 0)}
	if _, err := m.ShadowWeights(); err != nil {
		t.Fatal(err)
	}
	s := optim.Shard{Rank: 1, World: 4}
	opt, err := optim.NewShardedAdamW(b, mc, m.P, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	d.alloc.release() // idle blocks out of the way: InUse counts tensors only
	before := d.MemStats().InUse
	// The storages that go bf16 only: each layer's fused q/k/v and
	// gate/up (padded for their last view), o_proj, down_proj, lm_head.
	var freed, held, sharded, step int64
	storage := func(n, pad int) {
		freed += roundSize(4*int64(n)) + roundSize(2*int64(n))
		held += roundSize(2 * int64(n+pad))
		sharded += int64(n)
		step = max(step, roundSize(2*int64(n+pad))+roundSize(4*int64((n+3)/4)))
	}
	pad := func(n int) int { return s.PaddedLen(n) - n }
	for _, l := range m.P.Layers {
		storage(l.QKV.Numel(), pad(l.V.Numel()))
		storage(l.GateUp.Numel(), pad(l.Up.Numel()))
		storage(l.O.Numel(), pad(l.O.Numel()))
		storage(l.Down.Numel(), pad(l.Down.Numel()))
	}
	storage(m.P.LMHead.Numel(), pad(m.P.LMHead.Numel()))
	for _, np := range m.P.Named(mc) {
		if len(np.Shape) < 2 || np.Name == "model.embed_tokens.weight" {
			continue
		}
		if lo, hi := s.Range((*np.Ptr).Numel()); hi > lo {
			held += roundSize(4 * int64(hi-lo))
		}
	}
	d.ResetPeak()
	done, err := opt.ShardMasters(b, mc, m.P)
	if err != nil || !done {
		t.Fatalf("ShardMasters: %v, %v", done, err)
	}
	d.alloc.release()
	after := d.MemStats().InUse
	// Storage by storage: the peak is one storage's bf16 and masters over
	// the start (a storage's masters: at most ⌈n/4⌉ elements in all, here
	// bounded by one allocation of them).
	if peak := d.MemStats().Peak; peak > before+step {
		t.Errorf("peak during ShardMasters %d bytes over the start, want at most one storage's bf16 and masters (%d)", peak-before, step)
	}
	if want := before - freed + held; after != want {
		t.Errorf("bytes in use after ShardMasters: %d, want %d (before %d, fp32 + bf16 copies freed %d, bf16 + masters held %d)",
			after, want, before, freed, held)
	}
	t.Logf("rank 1 of 4, %d elements in bf16-only matrices: %d bytes freed, %d held (%.2f bytes an element, against 6; 2 + 4/W = 3)",
		sharded, freed, held, float64(held)/float64(sharded))
}
