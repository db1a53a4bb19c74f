package model

// ZeRO-1: the AdamW moments sharded over data-parallel ranks. Every rank
// holds the whole fp32 policy and, after the gradient all-reduce, the whole
// gradient; each owns 1/W of every parameter's elements and keeps the two
// moments of those elements only, runs AdamW on them, and the ranks then
// all-gather the updated parts so every rank holds the whole updated policy
// again. AdamW is element-wise, so the result is bitwise the unsharded
// update; the moments, 8 bytes per parameter, become 8/W per rank (for
// Qwen3-4B 32 GB → 4 GB at W = 8).
//
// Why per parameter rather than one flat range over the concatenation of
// all parameters: a view of one tensor is all a backend's AdamW needs, the
// all-gather is one collective per parameter of a size every rank knows,
// and a checkpoint shard maps to parameter names, so resharding to another
// world size is a per-name slice of the assembled moments.

import (
	"fmt"
	"math"
)

// Shard is this rank's part of the optimizer state: rank Rank of World.
// World ≤ 1 means unsharded.
type Shard struct{ Rank, World int }

// Sharded reports whether the state is split over several ranks.
func (s Shard) Sharded() bool { return s.World > 1 }

// Range is the owned part [lo, hi) of a parameter of n elements: ranks own
// consecutive chunks of ⌈n/W⌉ elements, the last ones possibly fewer or none.
func (s Shard) Range(n int) (lo, hi int) {
	if !s.Sharded() {
		return 0, n
	}
	chunk := (n + s.World - 1) / s.World
	lo = min(n, s.Rank*chunk)
	return lo, min(n, lo+chunk)
}

// Validate checks the rank against the world size.
func (s Shard) Validate() error {
	if s.World > 1 && (s.Rank < 0 || s.Rank >= s.World) {
		return fmt.Errorf("optimizer shard: rank %d is not in 0…%d", s.Rank, s.World-1)
	}
	return nil
}

// ShardGatherer completes a sharded update: after it returns, every rank's
// tensors hold, in each rank r's Range, the values rank r wrote there (an
// all-gather over the data-parallel ranks). The tensors are listed in
// Params.Named order and are the same on every rank.
type ShardGatherer interface {
	GatherShards(ts []*Tensor, s Shard) error
}

// ShardMoments are a sharded optimizer's moments: per parameter in
// Params.Named order, the first and second moments of the owned range
// (nil where the range is empty).
type ShardMoments struct {
	Names []string
	Numel []int // the whole parameter's element count
	M, V  []*Tensor
	Shard Shard
	// With sharded fp32 masters (ShardMasters, masters.go): HalfOnly says
	// which parameters are bf16-only weights, and Master holds the fp32
	// master of the owned range of each of them (nil where the range is
	// empty). Both nil otherwise: the weights are whole fp32 tensors.
	HalfOnly []bool
	Master   []*Tensor
	// G, under ZeRO-2, are the gradients of the owned ranges (the
	// trainer's accumulators, zero2.go), read instead of the gradient
	// tensors' ranges; nil under ZeRO-1.
	G []*Tensor
}

// NewShardedOptimizer allocates the moments of rank s.Rank's ranges only.
func NewShardedOptimizer(b Backend, mc *Config, p *Params, cfg AdamWConfig, s Shard) (*Optimizer, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.Sharded() {
		return NewOptimizer(b, mc, cfg), nil
	}
	sm := &ShardMoments{Shard: s}
	for _, np := range p.Named(mc) {
		n := numel(np.Shape)
		lo, hi := s.Range(n)
		var m, v *Tensor
		if hi > lo {
			m, v = b.New(hi-lo), b.New(hi-lo)
		}
		sm.Names, sm.Numel = append(sm.Names, np.Name), append(sm.Numel, n)
		sm.M, sm.V = append(sm.M, m), append(sm.V, v)
	}
	return &Optimizer{Cfg: cfg, Sharded: sm}, nil
}

// updateSharded runs AdamW on the owned range of every parameter, then
// gathers the ranges from every rank.
func (o *Optimizer) updateSharded(b Backend, mc *Config, p, grads *Params, h AdamWParams, g ShardGatherer) error {
	sm := o.Sharded
	pn, gn := p.Named(mc), grads.Named(mc)
	if len(pn) != len(sm.Names) {
		return fmt.Errorf("adamw step %d: %d parameters but moments for %d", o.Step, len(pn), len(sm.Names))
	}
	ts := make([]*Tensor, len(pn))
	for i := range pn {
		pt, gt := *pn[i].Ptr, *gn[i].Ptr
		ts[i] = pt
		if sm.M[i] == nil {
			continue
		}
		lo, hi := sm.Shard.Range(pt.Numel())
		part, grad := pt.View(pt.Numel()).Rows(lo, hi), gt.View(gt.Numel()).Rows(lo, hi)
		if sm.G != nil {
			grad = sm.G[i]
		}
		if sm.HalfOnly != nil && sm.HalfOnly[i] {
			hw, ok := b.(HalfWeights)
			if !ok {
				return fmt.Errorf("adamw step %d: %s is a bf16-only weight but backend %s has none", o.Step, sm.Names[i], b.Name())
			}
			hw.AdamWHalf(sm.Master[i], part, grad, sm.M[i], sm.V[i], h)
			continue
		}
		b.AdamW(part, grad, sm.M[i], sm.V[i], h)
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("adamw step %d (rank %d's shard): %w", o.Step, sm.Shard.Rank, err)
	}
	if g == nil {
		return fmt.Errorf("adamw step %d: the moments are sharded over %d ranks but no gatherer was given", o.Step, sm.Shard.World)
	}
	if err := g.GatherShards(ts, sm.Shard); err != nil {
		return fmt.Errorf("adamw step %d: gathering the updated shards: %w", o.Step, err)
	}
	return nil
}

// MomentSlices returns this rank's moments on the host, per parameter
// name: m and v of the owned range, and the range. For an unsharded
// optimizer the range is the whole parameter.
func (o *Optimizer) MomentSlices(b Backend, mc *Config) MomentSlices {
	var out MomentSlices
	if sm := o.Sharded; sm != nil {
		for i, name := range sm.Names {
			lo, hi := sm.Shard.Range(sm.Numel[i])
			s := MomentSlice{Name: name, Numel: sm.Numel[i], Lo: lo, Hi: hi, M: make([]float32, hi-lo), V: make([]float32, hi-lo)}
			if hi > lo {
				b.Download(sm.M[i], s.M)
				b.Download(sm.V[i], s.V)
			}
			out = append(out, s)
		}
		return out
	}
	mn, vn := o.M.Named(mc), o.V.Named(mc)
	for i := range mn {
		n := (*mn[i].Ptr).Numel()
		s := MomentSlice{Name: mn[i].Name, Numel: n, Hi: n, M: make([]float32, n), V: make([]float32, n)}
		b.Download(*mn[i].Ptr, s.M)
		b.Download(*vn[i].Ptr, s.V)
		out = append(out, s)
	}
	return out
}

// MomentSlice is the part [Lo, Hi) of one parameter's two moments.
type MomentSlice struct {
	Name   string
	Numel  int
	Lo, Hi int
	M, V   []float32
}

// MomentSource gives parts of whole-parameter moments: m and v of
// elements [lo, hi) of the parameter name of numel elements, from however
// many slices they were saved in.
type MomentSource interface {
	Moments(name string, numel, lo, hi int) (m, v []float32, err error)
}

// LoadMoments sets this rank's moments from src: resharding a checkpoint
// written at another world size is reading this rank's range of each
// parameter, whatever ranges the checkpoint's shards hold.
func (o *Optimizer) LoadMoments(b Backend, mc *Config, src MomentSource) error {
	if sm := o.Sharded; sm != nil {
		for i, name := range sm.Names {
			lo, hi := sm.Shard.Range(sm.Numel[i])
			if hi == lo {
				continue
			}
			m, v, err := src.Moments(name, sm.Numel[i], lo, hi)
			if err != nil {
				return err
			}
			b.Upload(sm.M[i], m)
			b.Upload(sm.V[i], v)
		}
		return b.Err()
	}
	mn, vn := o.M.Named(mc), o.V.Named(mc)
	for i := range mn {
		n := (*mn[i].Ptr).Numel()
		m, v, err := src.Moments(mn[i].Name, n, 0, n)
		if err != nil {
			return err
		}
		b.Upload(*mn[i].Ptr, m)
		b.Upload(*vn[i].Ptr, v)
	}
	return b.Err()
}

// MomentSlices, as a MomentSource: the requested range is assembled from
// the slices of that name, which must cover it.
type MomentSlices []MomentSlice

// Moments implements MomentSource.
func (ss MomentSlices) Moments(name string, numel, lo, hi int) (m, v []float32, err error) {
	m, v = make([]float32, hi-lo), make([]float32, hi-lo)
	covered := 0
	for _, s := range ss {
		if s.Name != name {
			continue
		}
		if s.Numel != numel || s.Lo < 0 || s.Hi > numel || s.Lo > s.Hi || len(s.M) != s.Hi-s.Lo || len(s.V) != s.Hi-s.Lo {
			return nil, nil, fmt.Errorf("moments of %s: slice [%d, %d) of %d elements does not fit a parameter of %d", name, s.Lo, s.Hi, s.Numel, numel)
		}
		a, z := max(lo, s.Lo), min(hi, s.Hi)
		if a < z {
			copy(m[a-lo:z-lo], s.M[a-s.Lo:z-s.Lo])
			copy(v[a-lo:z-lo], s.V[a-s.Lo:z-s.Lo])
			covered += z - a
		}
	}
	if covered != hi-lo {
		return nil, nil, fmt.Errorf("moments of %s: the saved slices cover %d of elements [%d, %d)", name, covered, lo, hi)
	}
	return m, v, nil
}

// ParamShapes lists cfg's parameters (names and shapes, Params.Named
// order) without allocating them, for plans.
func ParamShapes(cfg *Config) []NamedParam {
	return (&Params{Layers: make([]Layer, cfg.NumHiddenLayers), Tied: cfg.TieWordEmbeddings}).Named(cfg)
}

// ShardReducer sums gradients over the data-parallel ranks for a sharded
// optimizer (ZeRO-2's reduce-scatter): afterwards each ts[i] holds, in its
// Range under s, the sum over the ranks; elsewhere its contents are
// undefined. Half the traffic of an all-reduce, since each rank needs only
// the part its optimizer updates.
type ShardReducer interface {
	ReduceScatterShards(ts []*Tensor, s Shard) error
}

// ShardViews returns the part of each tensor s owns, as a flat view (nil
// where the part is empty).
func ShardViews(ts []*Tensor, s Shard) []*Tensor {
	out := make([]*Tensor, len(ts))
	for i, t := range ts {
		if lo, hi := s.Range(t.Numel()); hi > lo {
			out[i] = t.View(t.Numel()).Rows(lo, hi)
		}
	}
	return out
}

// ClipShardGradNorm is ClipGradNorm over gradients reduce-scattered to the
// ranks: each rank sums the squares of its parts (views), across sums them
// over the ranks (the same total on every rank, in a fixed order), and each
// rank scales its parts by the same coefficient. It returns the global norm
// before clipping; a non-finite norm is an error.
func ClipShardGradNorm(b Backend, views []*Tensor, across func(local float64) (float64, error), maxNorm float64) (float64, error) {
	var mine []*Tensor
	for _, v := range views {
		if v != nil {
			mine = append(mine, v)
		}
	}
	var local float64
	if ss, ok := b.(SquareSummer); ok {
		local = ss.SumSquaresAll(mine)
	} else {
		for _, v := range mine {
			local += b.SumSquares(v)
		}
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return 0, fmt.Errorf("gradient norm: %w", err)
	}
	total, err := across(local)
	if err != nil {
		return 0, fmt.Errorf("gradient norm across the ranks: %w", err)
	}
	norm := math.Sqrt(total)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("gradient norm is %v", norm)
	}
	if maxNorm > 0 {
		if coef := maxNorm / (norm + 1e-6); coef < 1 {
			for _, v := range mine {
				b.Scale(v, float32(coef))
			}
		}
	}
	return norm, b.Err()
}
