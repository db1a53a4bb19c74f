package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestWGMMAAttentionEqualsMMASync: the warpgroup-MMA kernels (attn_wg_*,
// sm_90a) against the mma.sync kernels (attn_flash_*_h) on the same bf16
// activations, forward and backward. Both accumulate every product in the
// same order over the same k-steps of 16 (wgmma.cuh), and the emulator
// computes a wgmma's 8-column blocks as mma.sync computes its fragment, so
// on the emulator every output must be equal, not merely close: a layout
// or descriptor error moves whole rows or columns, a missed tile or mask
// changes sums. The CPU reference of both routes is TestAttentionHalf's.
// Shapes: Qwen3's GQA ratios (H/G = 2 and 4, and 1), packed segments of
// lengths that are not multiples of any tile, one long enough for several
// key and query tiles of every kernel, and a segment with more keys than
// queries (a chunked prefill's: the dk/dv blocks' first query > 0).
func TestWGMMAAttentionEqualsMMASync(t *testing.T) {
	d := testDevice(t)
	if !d.Info.HasWGMMA() {
		t.Skipf("the warpgroup-MMA kernels run on sm_90 only (this device: sm_%d%d)", d.Info.Major, d.Info.Minor)
	}
	const D = 128
	cases := []struct {
		name  string
		H, G  int
		segs  []model.Segment
		n, nk int // rows of q and of k, v
	}{
		{"H/G 2, packed", 4, 2, []model.Segment{{Q0: 0, QLen: 20, K0: 0, KLen: 20}, {Q0: 20, QLen: 203, K0: 20, KLen: 203}}, 223, 223},
		{"H/G 4, one tile", 4, 1, []model.Segment{{Q0: 0, QLen: 64, K0: 0, KLen: 64}}, 64, 64},
		{"H/G 1, three segments", 2, 2, []model.Segment{{Q0: 0, QLen: 33, K0: 0, KLen: 33}, {Q0: 33, QLen: 90, K0: 33, KLen: 90}, {Q0: 123, QLen: 40, K0: 123, KLen: 40}}, 163, 163},
		{"H/G 2, keys before queries", 4, 2, []model.Segment{{Q0: 0, QLen: 50, K0: 100, KLen: 100}}, 50, 200},
	}
	p := newPair(t, BF16)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rounded := func(n int) []float32 {
				v := p.randn(n, 1)
				for i := range v {
					v[i] = bf16Round(v[i])
				}
				return v
			}
			q, k, v := rounded(c.n*c.H*D), rounded(c.nk*c.G*D), rounded(c.nk*c.G*D)
			dout := p.randn(c.n*c.H*D, 1)
			scale := float32(1 / math.Sqrt(D))
			run := func(wg int) ([]float32, map[string]int) {
				b := NewBackend(d, BF16)
				b.attnFlash, b.attnWG = 1, wg
				before := d.Launches()
				Q, K, V := halfTensor(b, q, c.n, c.H, D), halfTensor(b, k, c.nk, c.G, D), halfTensor(b, v, c.nk, c.G, D)
				out, lse := halfTensor(b, nil, c.n, c.H, D), b.New(c.n, c.H)
				b.Attention(out, lse, Q, K, V, c.segs, scale)
				dq, dk, dv := b.New(c.n, c.H, D), b.New(c.nk, c.G, D), b.New(c.nk, c.G, D)
				b.AttentionBackward(dq, dk, dv, model.NewFrom(b, dout, c.n, c.H, D), Q, K, V, out, lse, c.segs, scale)
				res := model.Values(b, out, lse, dq, dk, dv)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				after := d.Launches()
				for name := range after {
					after[name] -= before[name]
				}
				return res, after
			}
			want, l0 := run(-1)
			got, l1 := run(0)
			for _, k := range []string{"attn_wg_fwd_h", "attn_wg_bwd_dq_h", "attn_wg_bwd_dkv_h"} {
				if l1[k] == 0 || l0[k] != 0 {
					t.Fatalf("kernel %s: %d launches on the warpgroup route, %d on the mma.sync route", k, l1[k], l0[k])
				}
			}
			// On a GPU nothing promises that HGMMA and HMMA round a k-step's
			// sum alike: there the routes must agree within the bf16
			// attention tolerance of TestAttentionHalf.
			exact := devKind != "gpu"
			tol := numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}
			names := []string{"out", "lse", "dq", "dk", "dv"}
			sizes := []int{c.n * c.H * D, c.n * c.H, c.n * c.H * D, c.nk * c.G * D, c.nk * c.G * D}
			off, bad := 0, 0
			for i, size := range sizes {
				for j := off; j < off+size; j++ {
					differs := got[j] != want[j]
					if !exact {
						differs = math.Abs(float64(got[j]-want[j])) > tol.Atol+tol.Rtol*math.Abs(float64(want[j]))
					}
					if math.IsNaN(float64(got[j])) || differs {
						if bad < 5 {
							t.Errorf("%s[%d]: warpgroup MMA %v, mma.sync %v", names[i], j-off, got[j], want[j])
						}
						bad++
					}
				}
				off += size
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ", bad, len(want))
			}
		})
	}
}

// TestWGMMATrainingStepEqualsMMASync: a whole forward and backward of a
// model with Qwen3's head dim (2 layers, 4 query heads over 2 key/value
// heads of 128, two packed sequences) under bf16 products, once with the
// warpgroup-MMA attention and once without: the model feeds the kernels
// (bf16 activations, the trainer's segments) as training does, and on the
// emulator the log-probs, entropies and every gradient must be equal.
func TestWGMMATrainingStepEqualsMMASync(t *testing.T) {
	d := testDevice(t)
	if !d.Info.HasWGMMA() || devKind == "gpu" {
		t.Skip("needs the emulator's sm_90 (on a GPU the two routes need not round alike)")
	}
	o := model.RandomOptions{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 128,
		Vocab: 300, RopeTheta: 1e6, MaxPositions: 4096, InitStd: 0.02}
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	seqs, dl := randomSeqs(rand.New(rand.NewPCG(3, 4)), o.Vocab, [][2]int{{150, 30}, {77, 7}})
	run := func(wg int) (logp []float32, grads map[string][]float32, launches map[string]int) {
		b := NewBackend(d, BF16)
		b.attnWG = wg
		m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 17, 0.2, 0.3)}
		before := d.Launches()
		pass, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pass.LogProbs {
			logp = append(logp, pass.LogProbs[i]...)
			logp = append(logp, pass.Entropy[i]...)
		}
		g := model.NewLike(b, cfg, m.Trainable())
		if err := m.Backward(pass, dl, g); err != nil {
			t.Fatal(err)
		}
		grads = snapshot(m, g)
		launches = d.Launches()
		for k := range launches {
			launches[k] -= before[k]
		}
		return logp, grads, launches
	}
	wantLogp, wantGrads, l0 := run(-1)
	gotLogp, gotGrads, l1 := run(0)
	for _, k := range []string{"attn_wg_fwd_h", "attn_wg_bwd_dq_h", "attn_wg_bwd_dkv_h"} {
		if l1[k] == 0 || l0[k] != 0 {
			t.Fatalf("kernel %s: %d launches with the warpgroup route, %d without", k, l1[k], l0[k])
		}
	}
	equal := func(what string, got, want []float32) {
		for i := range want {
			if got[i] != want[i] || got[i] != got[i] {
				t.Errorf("%s[%d]: %v with the warpgroup route, %v without", what, i, got[i], want[i])
				return
			}
		}
	}
	equal("log-probs and entropies", gotLogp, wantLogp)
	for name, w := range wantGrads {
		equal("grad "+name, gotGrads[name], w)
	}
}
