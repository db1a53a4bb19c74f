package backendtest

// The multi-tensor ops (model.MultiTensorOptimizer, model.MultiTensorOptimizer), on
// backends that have them: bitwise against the per-tensor ops over tensors
// of sizes around the kernels' block and grid boundaries, row views of a
// larger tensor among them.

import (
	"math"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// multiSizes are the tensors' sizes: 1, around one block of 256 threads,
// and one past sumsq's 1024-block grid (so its grid-stride loop wraps).
var multiSizes = []int{1, 255, 256, 257, 1031, 4096, 1024*256 + 77}

// multiSet returns the tensors (the last two rows of a (3, 300) matrix
// among them, as the fused q/k/v weight's row views are) and their values.
func (s *suite) multiSet(scale float64) (ts []*model.Tensor, vals [][]float32, whole *model.Tensor) {
	for _, n := range multiSizes {
		v := s.randn(n, scale)
		ts, vals = append(ts, s.tensor(v, n)), append(vals, v)
	}
	wv := s.randn(3*300, scale)
	whole = s.tensor(wv, 3, 300)
	ts, vals = append(ts, whole.Rows(1, 3)), append(vals, wv[300:])
	return ts, vals, whole
}

func (s *suite) multiTensor(t *testing.T) {
	mt := model.TrainerCapsOf(s.b).Multi
	if mt == nil {
		t.Skip("no multi-tensor ops on this backend")
	}
	t.Run("AdamWAll", func(t *testing.T) {
		ps, pv, _ := s.multiSet(1)
		gs, gv, _ := s.multiSet(3)
		ms, mv, _ := s.multiSet(0.1)
		vs, vv, _ := s.multiSet(0.1)
		for i := range vv {
			for j := range vv[i] {
				vv[i][j] *= vv[i][j] // second moments are ≥ 0
			}
			s.b.Upload(vs[i], vv[i])
		}
		h := model.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 3, GradScale: 0.37}
		mt.AdamWAll(ps, gs, ms, vs, h)
		for i := range ps {
			n := ps[i].Numel()
			up, ug, um, uv := s.tensor(pv[i], n), s.tensor(gv[i], n), s.tensor(mv[i], n), s.tensor(vv[i], n)
			s.b.AdamW(up, ug, um, uv, h)
			for _, c := range []struct {
				name      string
				got, want *model.Tensor
			}{{"p", ps[i], up}, {"m", ms[i], um}, {"v", vs[i], uv}} {
				if got, want := s.get(c.got), s.get(c.want); !slices.Equal(got, want) {
					s.same(t, "AdamWAll "+c.name, got, want)
					t.Errorf("AdamWAll %s of tensor %d (%d elements) differs from AdamW", c.name, i, n)
				}
			}
		}
		s.noErr(t, "adamw all")
	})
	t.Run("ZeroAll", func(t *testing.T) {
		ts, _, whole := s.multiSet(1)
		first := s.get(whole)[:300]
		mt.ZeroAll(ts)
		for i, x := range ts {
			if got := s.get(x); slices.ContainsFunc(got, func(v float32) bool { return math.Float32bits(v) != 0 }) {
				t.Errorf("ZeroAll left tensor %d (%d elements) non-zero", i, x.Numel())
			}
		}
		if got := s.get(whole)[:300]; !slices.Equal(got, first) {
			t.Errorf("ZeroAll of rows 1…2 changed row 0")
		}
		s.noErr(t, "zero all")
	})
	t.Run("SumSquaresAll", func(t *testing.T) {
		ss := model.TrainerCapsOf(s.b).Multi
		if ss == nil {
			t.Skip("no SumSquaresAll")
		}
		ts, _, _ := s.multiSet(2)
		var want float64
		for _, x := range ts {
			want += s.b.SumSquares(x)
		}
		if got := ss.SumSquaresAll(ts); got != want {
			t.Errorf("SumSquaresAll = %v, Σ SumSquares = %v", got, want)
		}
		s.noErr(t, "sum squares all")
	})
}
