package optim

// ZeRO-1: the AdamW moments sharded over data-parallel ranks. Every rank
// holds the whole fp32 policy and, after the gradient reduce-scatter, the
// summed gradient of its ranges; each owns 1/W of every parameter's
// elements (Shard.Range) and keeps the two moments of those elements only,
// runs AdamW on them, and the ranks then all-gather the updated parts so
// every rank holds the whole updated policy again. AdamW is element-wise,
// so the result is bitwise the unsharded update; the moments, 8 bytes per
// parameter, become 8/W per rank (for Qwen3-4B 32 GB → 4 GB at W = 8).

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// ShardedAdamW is AdamW holding the moments of this rank's ranges only:
// per parameter in Params.Named order, the first and second moments of the
// owned range (nil where the range is empty). Step counts completed
// updates; Gather joins the ranks' updated parts after each.
type ShardedAdamW struct {
	Cfg   AdamWConfig
	Step  int
	Shard Shard
	Names []string
	Numel []int // the whole parameter's element count
	M, V  []*model.Tensor
	// With sharded fp32 masters (ShardMasters, masters.go): HalfOnly says
	// which parameters are bf16-only weights, and Master holds the fp32
	// master of the owned range of each of them (nil where the range is
	// empty). Both nil otherwise: the weights are whole fp32 tensors.
	HalfOnly []bool
	Master   []*model.Tensor
	// G, under ZeRO-2, are the gradients of the owned ranges (the
	// strategy's accumulators, zero2.go), read instead of the gradient
	// tensors' ranges; nil under ZeRO-1.
	G      []*model.Tensor
	Gather ShardGatherer
	// GradScale is the next Update's gradient coefficient (a deferred
	// clip, clip.go; 0 means 1), reset by Update.
	GradScale float32
}

// NewShardedAdamW allocates the moments of rank s.Rank's ranges only (of
// every element where s is not sharded).
func NewShardedAdamW(b model.Backend, mc *model.Config, p *model.Params, cfg AdamWConfig, s Shard) (*ShardedAdamW, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	o := &ShardedAdamW{Cfg: cfg, Shard: s}
	for _, np := range p.Named(mc) {
		n := numel(np.Shape)
		lo, hi := s.Range(n)
		var m, v *model.Tensor
		if hi > lo {
			m, v = b.New(hi-lo), b.New(hi-lo)
		}
		o.Names, o.Numel = append(o.Names, np.Name), append(o.Numel, n)
		o.M, o.V = append(o.M, m), append(o.V, v)
	}
	return o, nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Update runs AdamW with learning rate lr on the owned range of every
// parameter, then gathers the ranges from every rank.
func (o *ShardedAdamW) Update(b model.Backend, mc *model.Config, p, grads *model.Params, lr float64) error {
	o.Step++
	h := o.Cfg.step(lr, o.Step)
	h.GradScale, o.GradScale = o.GradScale, 0
	pn, gn := p.Named(mc), grads.Named(mc)
	if len(pn) != len(o.Names) {
		return fmt.Errorf("adamw step %d: %d parameters but moments for %d", o.Step, len(pn), len(o.Names))
	}
	ts := make([]*model.Tensor, len(pn))
	for i := range pn {
		pt, gt := *pn[i].Ptr, *gn[i].Ptr
		ts[i] = pt
		if o.M[i] == nil {
			continue
		}
		lo, hi := o.Shard.Range(pt.Numel())
		part, grad := pt.View(pt.Numel()).Rows(lo, hi), gt.View(gt.Numel()).Rows(lo, hi)
		if o.G != nil {
			grad = o.G[i]
		}
		if o.HalfOnly != nil && o.HalfOnly[i] {
			hw := model.TrainerCapsOf(b).Half
			if hw == nil {
				return fmt.Errorf("adamw step %d: %s is a bf16-only weight but backend %s has none", o.Step, o.Names[i], b.Name())
			}
			hw.AdamWHalf(o.Master[i], part, grad, o.M[i], o.V[i], h)
			continue
		}
		b.AdamW(part, grad, o.M[i], o.V[i], h)
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("adamw step %d (rank %d's shard): %w", o.Step, o.Shard.Rank, err)
	}
	if o.Gather == nil {
		return fmt.Errorf("adamw step %d: the moments are sharded over %d ranks but no gatherer was given", o.Step, o.Shard.World)
	}
	if err := o.Gather.GatherShards(ts, o.Shard); err != nil {
		return fmt.Errorf("adamw step %d: gathering the updated shards: %w", o.Step, err)
	}
	return nil
}

// MomentSlices returns this rank's moments on the host, per parameter
// name: m and v of the owned range, and the range.
func (o *ShardedAdamW) MomentSlices(b model.Backend) MomentSlices {
	var out MomentSlices
	for i, name := range o.Names {
		lo, hi := o.Shard.Range(o.Numel[i])
		s := MomentSlice{Name: name, Numel: o.Numel[i], Lo: lo, Hi: hi, M: make([]float32, hi-lo), V: make([]float32, hi-lo)}
		if hi > lo {
			b.Download(o.M[i], s.M)
			b.Download(o.V[i], s.V)
		}
		out = append(out, s)
	}
	return out
}

// LoadMoments sets this rank's moments from src: resharding a checkpoint
// written at another world size is reading this rank's range of each
// parameter, whatever ranges the checkpoint's shards hold.
func (o *ShardedAdamW) LoadMoments(b model.Backend, src MomentSource) error {
	for i, name := range o.Names {
		lo, hi := o.Shard.Range(o.Numel[i])
		if hi == lo {
			continue
		}
		m, v, err := src.Moments(name, o.Numel[i], lo, hi)
		if err != nil {
			return err
		}
		b.Upload(o.M[i], m)
		b.Upload(o.V[i], v)
	}
	return b.Err()
}
