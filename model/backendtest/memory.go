package backendtest

// The memory group's capabilities (model/capabilities.go).
//
// The memory pool (model.MemoryPool), on backends that have it: a
// released tensor refuses use and a second release, and each op the model
// lets come first on a Scratch tensor (one that overwrites its output
// whole) gives, on storage just released full of NaN, the same bits as on
// a zero-filled New tensor: the fallback's result.
//
// A ConfigChecker must admit every head dim attentionHeadDims computes:
// what a backend refuses at load time is what it cannot run, not what it
// was never asked to (the fallback, no checker, admits every config).

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

func (s *suite) memoryPool(t *testing.T) {
	mp, ok := s.b.(model.MemoryPool)
	if !ok {
		t.Skip("no memory pool: every tensor is zero-filled and left to the garbage collector")
	}
	t.Run("Errors", func(t *testing.T) {
		x := s.tensor(nil, 4)
		mp.Release(x)
		s.b.Scale(x, 2)
		if err := s.b.Err(); err == nil || !strings.Contains(err.Error(), "scale: tensor argument 0 [4] was released") {
			t.Errorf("use after release: got %v", err)
		}
		s.b.ResetErr()
		mp.Release(x)
		if err := s.b.Err(); err == nil || !strings.Contains(err.Error(), "already released") {
			t.Errorf("double release: got %v", err)
		}
		s.b.ResetErr()
	})
	for _, c := range s.overwriters() {
		t.Run("Scratch"+c.name, func(t *testing.T) {
			want := s.tensor(nil, c.shape...)
			c.op(want)
			// A NaN-filled tensor of the same size, released just before,
			// is what a pool hands out next (not promised: logged).
			nan := make([]float32, want.Numel())
			for i := range nan {
				nan[i] = float32(math.NaN())
			}
			mp.Release(s.tensor(nan, c.shape...))
			got := mp.Scratch(c.shape...)
			recycled := slices.ContainsFunc(s.get(got), func(v float32) bool { return v != v })
			c.op(got)
			s.noErr(t, c.name)
			if g, w := s.get(got), s.get(want); !slices.Equal(g, w) {
				s.same(t, c.name+" on Scratch", g, w)
				t.Errorf("%s on a Scratch tensor (recycled storage: %v) differs from on a New one", c.name, recycled)
			}
			t.Logf("recycled NaN storage: %v", recycled)
			mp.Release(got, want)
			s.noErr(t, "release")
		})
	}
}

// overwriter is an op that writes every element of its output.
type overwriter struct {
	name  string
	shape []int
	op    func(out *model.Tensor)
}

// overwriters are ops the model runs first on Scratch tensors, each with
// its inputs fixed here.
func (s *suite) overwriters() []overwriter {
	const R, C, N, V = 5, 32, 24, 50
	x, w := s.tensor(s.randn(R*C, 1), R, C), s.tensor(s.randn(C, 1), C)
	a, bm := s.tensor(s.randn(R*C, 1), R, C), s.tensor(s.randn(C*N, 1), C, N)
	table := s.tensor(s.randn(V*C, 1), V, C)
	ids := []int32{3, 0, 49, 3, 17}
	const H, G, D = 2, 1, 8 // two query heads over one key head
	q, k, v := s.tensor(s.randn(R*H*D, 1), R, H, D), s.tensor(s.randn(R*G*D, 1), R, G, D), s.tensor(s.randn(R*G*D, 1), R, G, D)
	segs := []model.Segment{{Q0: 0, QLen: R, K0: 0, KLen: R}}
	return []overwriter{
		{"MatMul", []int{R, N}, func(out *model.Tensor) { s.b.MatMul(out, a, bm, false, false, false) }},
		{"RMSNorm", []int{R, C}, func(out *model.Tensor) { s.b.RMSNorm(out, nil, x, w, 1e-6) }},
		{"SwiGLU", []int{R, C}, func(out *model.Tensor) { s.b.SwiGLU(out, x, a) }},
		{"Embedding", []int{R, C}, func(out *model.Tensor) { s.b.Embedding(out, table, ids) }},
		{"GatherRows", []int{R, C}, func(out *model.Tensor) { s.b.GatherRows(out, table, ids) }},
		{"Copy", []int{R, C}, func(out *model.Tensor) { s.b.Copy(out, x) }},
		{"Attention", []int{R, H, D}, func(out *model.Tensor) { s.b.Attention(out, nil, q, k, v, segs, 0.35) }},
	}
}

func (s *suite) configChecker(t *testing.T) {
	cc := model.MemoryCapsOf(s.b).Checker
	if cc == nil {
		t.Skip("no config checker: the backend runs every config Config.Validate admits")
	}
	cfg, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	for D := 2; D <= MaxHeadDim; D += 2 {
		c := *cfg
		c.HeadDim = D
		if err := cc.CheckConfig(&c); err != nil {
			t.Errorf("head_dim %d, which the suite's attention runs: refused: %v", D, err)
		}
	}
}
