package optim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestShardRange: the ranks' ranges tile every size exactly, in order,
// including sizes smaller than the world (some ranks own nothing).
func TestShardRange(t *testing.T) {
	for _, tc := range []struct{ n, world int }{{10, 1}, {10, 2}, {10, 3}, {10, 4}, {2, 4}, {0, 3}, {7, 8}, {4096, 8}, {4097, 8}} {
		next := 0
		for r := 0; r < max(tc.world, 1); r++ {
			lo, hi := Shard{Rank: r, World: tc.world}.Range(tc.n)
			if lo != next || hi < lo || hi-lo > (tc.n+max(tc.world, 1)-1)/max(tc.world, 1) {
				t.Fatalf("n=%d world=%d rank %d: range [%d, %d), want it to start at %d", tc.n, tc.world, r, lo, hi, next)
			}
			next = hi
		}
		if next != tc.n {
			t.Fatalf("n=%d world=%d: ranges end at %d", tc.n, tc.world, next)
		}
	}
	if err := (Shard{Rank: 3, World: 3}).Validate(); err == nil {
		t.Fatal("rank 3 of 3 accepted")
	}
}

// memGather is an in-process all-gather between goroutine ranks, each with
// its own CPU backend: every rank copies the other ranks' ranges out of
// their tensors, between two barriers.
type memGather struct {
	world   int
	mu      sync.Mutex
	arrived int
	round   int
	cond    *sync.Cond
	ranks   []rankTensors
	calls   int
}

type rankTensors struct {
	b  model.Backend
	ts []*model.Tensor
}

func newMemGather(world int) *memGather {
	g := &memGather{world: world, ranks: make([]rankTensors, world)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *memGather) barrier() {
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.arrived++
	if g.arrived == g.world {
		g.arrived, g.round = 0, g.round+1
		g.cond.Broadcast()
		return
	}
	for round == g.round {
		g.cond.Wait()
	}
}

// rankGather is one rank's view of the in-process all-gather.
type rankGather struct {
	g *memGather
	b model.Backend
}

func (r rankGather) GatherShards(ts []*model.Tensor, s Shard) error {
	g := r.g
	g.mu.Lock()
	g.ranks[s.Rank] = rankTensors{b: r.b, ts: ts}
	if s.Rank == 0 {
		g.calls++
	}
	g.mu.Unlock()
	g.barrier()
	for q := 0; q < g.world; q++ {
		if q == s.Rank {
			continue
		}
		for i, t := range ts {
			lo, hi := Shard{Rank: q, World: g.world}.Range(t.Numel())
			if hi == lo {
				continue
			}
			host := make([]float32, t.Numel())
			g.ranks[q].b.Download(g.ranks[q].ts[i], host)
			whole := make([]float32, t.Numel())
			r.b.Download(t, whole)
			copy(whole[lo:hi], host[lo:hi])
			r.b.Upload(t, whole)
		}
	}
	g.barrier()
	return nil
}

// TestShardedAdamWMatchesUnsharded: W ranks with ZeRO-1 moments, fed the
// same gradients, end with weights bitwise equal to one unsharded
// optimizer's after several steps, and their moment slices assemble into
// the unsharded moments bitwise; moments written at one world size and
// loaded at another continue bitwise too (resharding).
func TestShardedAdamWMatchesUnsharded(t *testing.T) {
	cfg := AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	o := model.DefaultTiny()
	mc, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	const steps = 3
	grads := func(b model.Backend, step int) *model.Params {
		return model.RandomParams(b, mc, uint64(100+step), 0.5, 0.5)
	}
	// The reference: one unsharded optimizer.
	rb := cpu.NewBackend()
	rp := model.RandomParams(rb, mc, 3, 0.2, 0.3)
	ro := NewAdamW(rb, mc, cfg)
	refAt := []map[string][]float32{hostParams(rb, mc, rp)} // weights after s steps
	for s := 0; s < steps; s++ {
		if err := ro.Update(rb, mc, rp, grads(rb, s), 1e-2); err != nil {
			t.Fatal(err)
		}
		refAt = append(refAt, hostParams(rb, mc, rp))
	}
	want := refAt[steps]

	run := func(world int, from MomentSource, first, last int) ([]map[string][]float32, []MomentSlices) {
		g := newMemGather(world)
		out, slices := make([]map[string][]float32, world), make([]MomentSlices, world)
		var wg sync.WaitGroup
		errs := make([]error, world)
		for r := 0; r < world; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				b := cpu.NewBackend()
				p := model.RandomParams(b, mc, 3, 0.2, 0.3)
				opt, err := NewShardedAdamW(b, mc, p, cfg, Shard{Rank: r, World: world})
				if err != nil {
					errs[r] = err
					return
				}
				opt.Gather = rankGather{g: g, b: b}
				if from != nil { // resume: weights after `first` steps, moments resharded
					p.Each(mc, func(name string, t *model.Tensor) { b.Upload(t, refAt[first][name]) })
					opt.Step = first
					if err := opt.LoadMoments(b, from); err != nil {
						errs[r] = err
						return
					}
				}
				for s := first; s < last; s++ {
					if err := opt.Update(b, mc, p, grads(b, s), 1e-2); err != nil {
						errs[r] = err
						return
					}
				}
				out[r], slices[r] = hostParams(b, mc, p), opt.MomentSlices(b)
			}(r)
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("world %d rank %d: %v", world, r, err)
			}
		}
		return out, slices
	}
	refSlices := ro.MomentSlices(rb, mc)
	for _, world := range []int{2, 3, 4} {
		got, slices := run(world, nil, 0, steps)
		for r := range got {
			equalParams(t, fmt.Sprintf("world %d rank %d", world, r), got[r], want)
		}
		var all MomentSlices
		for _, s := range slices {
			all = append(all, s...)
		}
		equalMoments(t, fmt.Sprintf("world %d", world), all, refSlices)
	}
	// Resharding: 4 ranks' moments after 2 steps, continued by 2 and 3 ranks
	// for the last step.
	_, four := run(4, nil, 0, 2)
	var all MomentSlices
	for _, s := range four {
		all = append(all, s...)
	}
	// The same through files: each of the 4 ranks writes its shard file; a
	// one-process file (optimizer.safetensors) is read as well.
	sharded, single := t.TempDir(), t.TempDir()
	for r, sl := range four {
		if err := WriteMomentShard(sharded, sl, Shard{Rank: r, World: 4}); err != nil {
			t.Fatal(err)
		}
	}
	var ts []model.NamedTensor
	for _, sl := range all.sorted() {
		if sl.Lo == 0 {
			m, v, err := all.Moments(sl.Name, sl.Numel, 0, sl.Numel)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, model.NamedTensor{Name: "m/" + sl.Name, Shape: []int{sl.Numel}, Data: m}, model.NamedTensor{Name: "v/" + sl.Name, Shape: []int{sl.Numel}, Data: v})
		}
	}
	if err := model.WriteSafetensors(filepath.Join(single, MomentsFile), ts, model.F32, nil); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{sharded, single} {
		files, err := OpenMoments(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, world := range []int{1, 2, 3} {
			got, _ := run(world, files, 2, steps)
			for r := range got {
				equalParams(t, fmt.Sprintf("resharded 4→%d rank %d (%s)", world, r, filepath.Base(dir)), got[r], want)
			}
		}
		files.Close()
	}
	// A missing shard file is named.
	os.Remove(filepath.Join(sharded, MomentShardFile(2, 4)))
	if _, err := OpenMoments(sharded); err == nil || !strings.Contains(err.Error(), "rank 2 of 4") {
		t.Errorf("a checkpoint without rank 2's moments: %v", err)
	}
}

// sorted returns the slices ordered by name and start.
func (ss MomentSlices) sorted() MomentSlices {
	out := append(MomentSlices(nil), ss...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Lo < out[j].Lo
	})
	return out
}

func hostParams(b model.Backend, mc *model.Config, p *model.Params) map[string][]float32 {
	out := map[string][]float32{}
	p.Each(mc, func(name string, t *model.Tensor) {
		h := make([]float32, t.Numel())
		b.Download(t, h)
		out[name] = h
	})
	return out
}

func equalParams(t *testing.T, what string, got, want map[string][]float32) {
	t.Helper()
	for name, w := range want {
		g := got[name]
		for i := range w {
			if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
				t.Fatalf("%s: %s[%d] = %v, unsharded %v", what, name, i, g[i], w[i])
			}
		}
	}
}

func equalMoments(t *testing.T, what string, got, want MomentSlices) {
	t.Helper()
	for _, w := range want {
		m, v, err := got.Moments(w.Name, w.Numel, 0, w.Numel)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i := range w.M {
			if math.Float32bits(m[i]) != math.Float32bits(w.M[i]) || math.Float32bits(v[i]) != math.Float32bits(w.V[i]) {
				t.Fatalf("%s: moments of %s[%d] = %v, %v; unsharded %v, %v", what, w.Name, i, m[i], v[i], w.M[i], w.V[i])
			}
		}
	}
}

// TestClipShardGradNorm: W ranks' parts, each clipped with the norm summed
// across the ranks, give the whole gradient's norm and clipped values
// (the norm within float64 rounding of another summation order; values
// bitwise where the coefficients agree, within 1 ulp otherwise).
func TestClipShardGradNorm(t *testing.T) {
	mc, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, world := range []int{2, 3} {
		for _, maxNorm := range []float64{0, 1e9, 0.5} {
			b := cpu.NewBackend()
			whole := model.RandomParams(b, mc, 7, 0.5, 0.5)
			want, err := ClipGradNorm(b, mc, whole, maxNorm)
			if err != nil {
				t.Fatal(err)
			}
			var ts []*model.Tensor
			whole.Each(mc, func(_ string, x *model.Tensor) { ts = append(ts, x) })
			wantVals := hostParams(b, mc, whole)
			// Every rank starts from the unclipped gradient.
			parts := make([]map[string][]float32, world)
			for r := 0; r < world; r++ {
				g := model.RandomParams(b, mc, 7, 0.5, 0.5)
				var gs []*model.Tensor
				g.Each(mc, func(_ string, x *model.Tensor) { gs = append(gs, x) })
				across := func(local float64) (float64, error) { // the control plane's sum, in rank order
					var s float64
					for q := 0; q < world; q++ {
						if q == r {
							s += local
						} else {
							s += sumSquaresOf(b, mc, q, world)
						}
					}
					return s, nil
				}
				norm, err := ClipShardGradNorm(b, ShardViews(gs, Shard{Rank: r, World: world}), across, maxNorm)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(norm-want) > 1e-9*want {
					t.Fatalf("world %d rank %d max %g: norm %v, whole %v", world, r, maxNorm, norm, want)
				}
				parts[r] = hostParams(b, mc, g)
			}
			for name, w := range wantVals {
				for r := 0; r < world; r++ {
					lo, hi := Shard{Rank: r, World: world}.Range(len(w))
					for i := lo; i < hi; i++ {
						if d := math.Abs(float64(parts[r][name][i] - w[i])); d > 1e-7*math.Abs(float64(w[i])) {
							t.Fatalf("world %d max %g: %s[%d] = %v on rank %d, whole %v", world, maxNorm, name, i, parts[r][name][i], r, w[i])
						}
					}
				}
			}
		}
	}
}

// sumSquaresOf is rank q's sum of squares of the seed-7 gradient's parts.
func sumSquaresOf(b model.Backend, mc *model.Config, q, world int) float64 {
	g := model.RandomParams(b, mc, 7, 0.5, 0.5)
	var gs []*model.Tensor
	g.Each(mc, func(_ string, x *model.Tensor) { gs = append(gs, x) })
	var s float64
	for _, v := range ShardViews(gs, Shard{Rank: q, World: world}) {
		if v != nil {
			s += b.SumSquares(v)
		}
	}
	return s
}
