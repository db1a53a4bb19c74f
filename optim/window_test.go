package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestWindowGradsMatchBackward: a backward into ZeRO-2's window whose
// flush adds each completed part into whole-size gradients gives the
// gradients of a plain backward: bitwise after one micro-batch, and after
// a second within float reassociation (1e-6 of the tensor's largest
// element: a tied embedding's head and lookup gradients are summed per
// micro-batch first), for tied and untied heads (the untied head shares
// the embedding's storage), with and without recomputation; and every
// parameter is flushed exactly once per backward.
func TestWindowGradsMatchBackward(t *testing.T) {
	for _, tc := range []struct {
		tied, recompute bool
	}{{false, false}, {true, false}, {false, true}} {
		m := tinyModel(t, tc.tied, 5)
		m.Recompute = tc.recompute
		rng := rand.New(rand.NewPCG(9, 10))
		var batches [][]model.Sequence
		var ws [][][]float32
		for range 2 {
			seqs := []model.Sequence{{Tokens: randomTokens(rng, 11, m.Cfg.VocabSize), Start: 4}, {Tokens: randomTokens(rng, 6, m.Cfg.VocabSize), Start: 2}}
			batches, ws = append(batches, seqs), append(ws, randomWeights(rng, seqs))
		}
		b := m.B
		want := model.NewParams(b, m.Cfg)
		win := NewWindowGrads(b, m.Cfg)
		got := model.NewParams(b, m.Cfg)
		wn, gn := win.Named(m.Cfg), got.Named(m.Cfg)
		flushed := make([]int, len(wn))
		flush := func(named []int) error {
			for _, i := range named {
				b.Add(*gn[i].Ptr, *wn[i].Ptr)
				b.Zero(*wn[i].Ptr)
				flushed[i]++
			}
			return nil
		}
		for k := range batches {
			for _, dst := range []struct {
				g *model.Params
				f model.GradFlush
			}{{want, nil}, {win, flush}} {
				p, err := m.Forward(batches[k])
				if err != nil {
					t.Fatal(err)
				}
				if err := m.BackwardFlush(p, ws[k], dst.g, dst.f); err != nil {
					t.Fatal(err)
				}
			}
			for i, np := range want.Named(m.Cfg) {
				if flushed[i] != k+1 {
					t.Errorf("tied %v: %s flushed %d times in %d backwards", tc.tied, np.Name, flushed[i], k+1)
				}
				a, c := make([]float32, (*np.Ptr).Numel()), make([]float32, (*np.Ptr).Numel())
				b.Download(*np.Ptr, a)
				b.Download(*gn[i].Ptr, c)
				var big float64
				for _, x := range a {
					big = max(big, math.Abs(float64(x)))
				}
				tol := 0.0
				if k > 0 {
					tol = 1e-6 * big
				}
				for j := range a {
					if math.Abs(float64(a[j]-c[j])) > tol {
						t.Errorf("tied %v recompute %v, micro-batch %d: %s[%d] = %v through the window, %v directly", tc.tied, tc.recompute, k, np.Name, j, c[j], a[j])
						break
					}
				}
			}
		}
	}
}

// TestWindowBytes: the window holds one layer, the embedding and the final
// norm (an untied head shares the embedding's storage).
func TestWindowBytes(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := tinyModel(t, tied, 1)
		c := m.Cfg
		C, F, HD, GD := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim
		layer := 2*C + 2*c.HeadDim + (HD+2*GD)*C + C*HD + 3*F*C
		want := int64(4 * (layer + c.VocabSize*C + C))
		if got := WindowBytes(c); got != want {
			t.Errorf("tied %v: WindowBytes = %d, want %d", tied, got, want)
		}
	}
}

// tinyModel is the tiny random Qwen3 on the CPU backend.
func tinyModel(t testing.TB, tied bool, seed uint64) *model.Model {
	t.Helper()
	o := model.DefaultTiny()
	o.Tied = tied
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	return &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, seed, 0.2, 0.3)}
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

// randomWeights draws a weight per response token (∂J/∂log π).
func randomWeights(rng *rand.Rand, seqs []model.Sequence) [][]float32 {
	var w [][]float32
	for _, s := range seqs {
		row := make([]float32, len(s.Tokens)-s.Start)
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		w = append(w, row)
	}
	return w
}
