package optim

// AdamW over a Params set, and global gradient-norm clipping.

import (
	"fmt"
	"math"

	"github.com/gdrotrain/gdrotrain/model"
)

// AdamWConfig holds the optimizer hyperparameters (torch.optim.AdamW names).
type AdamWConfig struct {
	LR          float64 `yaml:"lr" json:"lr"`                     // peak learning rate (after optim.warmup_steps)
	Beta1       float64 `yaml:"beta1" json:"beta1"`               // first-moment decay β₁
	Beta2       float64 `yaml:"beta2" json:"beta2"`               // second-moment decay β₂
	Eps         float64 `yaml:"eps" json:"eps"`                   // ε added to √v̂
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"` // decoupled weight decay λ (θ ← θ − lr·λ·θ)
}

// step is the backend's AdamW arguments of update number step (from 1)
// with learning rate lr.
func (c AdamWConfig) step(lr float64, step int) model.AdamWParams {
	return model.AdamWParams{LR: lr, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Step: step}
}

// AdamW is AdamW with first and second moments laid out like the
// parameters. Step counts completed updates.
type AdamW struct {
	Cfg  AdamWConfig
	M, V *model.Params
	Step int
	// GradScale is the next Update's gradient coefficient (a deferred
	// clip, clip.go; 0 means 1), reset by Update.
	GradScale float32
}

// NewAdamW allocates zero moments for mc's parameters on b.
func NewAdamW(b model.Backend, mc *model.Config, cfg AdamWConfig) *AdamW {
	return &AdamW{Cfg: cfg, M: model.NewParams(b, mc), V: model.NewParams(b, mc)}
}

// NewAdamWFor allocates zero moments laid out like p (a model's weights or
// its LoRA adapters: model.NewLike).
func NewAdamWFor(b model.Backend, mc *model.Config, p *model.Params, cfg AdamWConfig) *AdamW {
	return &AdamW{Cfg: cfg, M: model.NewLike(b, mc, p), V: model.NewLike(b, mc, p)}
}

// Update applies one AdamW step to every parameter with learning rate lr
// (the schedule's value for this step).
func (o *AdamW) Update(b model.Backend, mc *model.Config, p, grads *model.Params, lr float64) error {
	o.Step++
	h := o.Cfg.step(lr, o.Step)
	h.GradScale, o.GradScale = o.GradScale, 0
	pn, gn, mn, vn := p.Named(mc), grads.Named(mc), o.M.Named(mc), o.V.Named(mc)
	if mt := model.TrainerCapsOf(b).Multi; mt != nil {
		ps, gs, ms, vs := make([]*model.Tensor, len(pn)), make([]*model.Tensor, len(pn)), make([]*model.Tensor, len(pn)), make([]*model.Tensor, len(pn))
		for i := range pn {
			ps[i], gs[i], ms[i], vs[i] = *pn[i].Ptr, *gn[i].Ptr, *mn[i].Ptr, *vn[i].Ptr
		}
		mt.AdamWAll(ps, gs, ms, vs, h)
	} else {
		for i := range pn {
			b.AdamW(*pn[i].Ptr, *gn[i].Ptr, *mn[i].Ptr, *vn[i].Ptr, h)
		}
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("adamw step %d: %w", o.Step, err)
	}
	return nil
}

// MomentSlices returns the moments on the host, per parameter name, each
// slice the whole parameter.
func (o *AdamW) MomentSlices(b model.Backend, mc *model.Config) MomentSlices {
	var out MomentSlices
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

// LoadMoments sets the moments from src (a checkpoint written by one
// process or by any number of ranks).
func (o *AdamW) LoadMoments(b model.Backend, mc *model.Config, src MomentSource) error {
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

// GradNorm returns the global L2 norm of grads.
func GradNorm(b model.Backend, mc *model.Config, grads *model.Params) float64 {
	if ss := model.TrainerCapsOf(b).Multi; ss != nil {
		var ts []*model.Tensor
		grads.Each(mc, func(_ string, t *model.Tensor) { ts = append(ts, t) })
		return math.Sqrt(ss.SumSquaresAll(ts))
	}
	var s float64
	grads.Each(mc, func(_ string, t *model.Tensor) { s += b.SumSquares(t) })
	return math.Sqrt(s)
}

// ClipGradNorm scales grads so their global norm is at most maxNorm (as
// torch.nn.utils.clip_grad_norm_ does, with its 1e-6 guard) and returns the
// norm before clipping. A non-finite norm is an error: the step must not be
// applied.
func ClipGradNorm(b model.Backend, mc *model.Config, grads *model.Params, maxNorm float64) (float64, error) {
	norm := GradNorm(b, mc, grads)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("gradient norm is %v", norm)
	}
	if maxNorm > 0 {
		if coef := maxNorm / (norm + 1e-6); coef < 1 {
			grads.Each(mc, func(_ string, t *model.Tensor) { b.Scale(t, float32(coef)) })
		}
	}
	return norm, b.Err()
}

// ClipShardGradNorm is ClipGradNorm over gradients reduce-scattered to the
// ranks: each rank sums the squares of its parts (views), across sums them
// over the ranks (the same total on every rank, in a fixed order), and each
// rank scales its parts by the same coefficient. It returns the global norm
// before clipping; a non-finite norm is an error.
func ClipShardGradNorm(b model.Backend, views []*model.Tensor, across func(local float64) (float64, error), maxNorm float64) (float64, error) {
	var mine []*model.Tensor
	for _, v := range views {
		if v != nil {
			mine = append(mine, v)
		}
	}
	var local float64
	if ss := model.TrainerCapsOf(b).Multi; ss != nil {
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

// ZeroGrads sets every gradient to zero.
func ZeroGrads(b model.Backend, mc *model.Config, grads *model.Params) {
	if mt := model.TrainerCapsOf(b).Multi; mt != nil {
		var ts []*model.Tensor
		grads.Each(mc, func(_ string, t *model.Tensor) { ts = append(ts, t) })
		mt.ZeroAll(ts)
		return
	}
	grads.Each(mc, func(_ string, t *model.Tensor) { b.Zero(t) })
}
