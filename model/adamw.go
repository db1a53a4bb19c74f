package model

// AdamW over a Params set, and global gradient-norm clipping.

import (
	"fmt"
	"math"
)

// AdamWConfig holds the optimizer hyperparameters (torch.optim.AdamW names).
type AdamWConfig struct {
	LR          float64 `yaml:"lr" json:"lr"`                     // peak learning rate (after optim.warmup_steps)
	Beta1       float64 `yaml:"beta1" json:"beta1"`               // first-moment decay β₁
	Beta2       float64 `yaml:"beta2" json:"beta2"`               // second-moment decay β₂
	Eps         float64 `yaml:"eps" json:"eps"`                   // ε added to √v̂
	WeightDecay float64 `yaml:"weight_decay" json:"weight_decay"` // decoupled weight decay λ (θ ← θ − lr·λ·θ)
}

// Optimizer is AdamW with first and second moments laid out like the
// parameters (M, V), or sharded over data-parallel ranks (Sharded, with
// M and V nil; see zero.go). Step counts completed updates.
type Optimizer struct {
	Cfg  AdamWConfig
	M, V *Params
	Step int
	// Sharded holds this rank's moments under ZeRO-1, and Gather joins
	// the ranks' updated parts after each step.
	Sharded *ShardMoments
	Gather  ShardGatherer
}

// NewOptimizer allocates zero moments for cfg's parameters on b.
func NewOptimizer(b Backend, mc *Config, cfg AdamWConfig) *Optimizer {
	return &Optimizer{Cfg: cfg, M: NewParams(b, mc), V: NewParams(b, mc)}
}

// Update applies one AdamW step to every parameter with learning rate lr
// (the schedule's value for this step).
func (o *Optimizer) Update(b Backend, mc *Config, p, grads *Params, lr float64) error {
	o.Step++
	h := AdamWParams{LR: lr, Beta1: o.Cfg.Beta1, Beta2: o.Cfg.Beta2, Eps: o.Cfg.Eps, WeightDecay: o.Cfg.WeightDecay, Step: o.Step}
	if o.Sharded != nil {
		return o.updateSharded(b, mc, p, grads, h, o.Gather)
	}
	pn, gn, mn, vn := p.Named(mc), grads.Named(mc), o.M.Named(mc), o.V.Named(mc)
	for i := range pn {
		b.AdamW(*pn[i].Ptr, *gn[i].Ptr, *mn[i].Ptr, *vn[i].Ptr, h)
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("adamw step %d: %w", o.Step, err)
	}
	return nil
}

// GradNorm returns the global L2 norm of grads.
func GradNorm(b Backend, mc *Config, grads *Params) float64 {
	if ss, ok := b.(SquareSummer); ok {
		var ts []*Tensor
		grads.Each(mc, func(_ string, t *Tensor) { ts = append(ts, t) })
		return math.Sqrt(ss.SumSquaresAll(ts))
	}
	var s float64
	grads.Each(mc, func(_ string, t *Tensor) { s += b.SumSquares(t) })
	return math.Sqrt(s)
}

// SquareSummer is implemented by backends that sum the squares of many
// tensors with one transfer to the host (the CUDA backend: one host
// synchronisation for the gradient norm instead of one per tensor). The
// result must equal Σ_t SumSquares(t), added in order.
type SquareSummer interface {
	SumSquaresAll(ts []*Tensor) float64
}

// ClipGradNorm scales grads so their global norm is at most maxNorm (as
// torch.nn.utils.clip_grad_norm_ does, with its 1e-6 guard) and returns the
// norm before clipping. A non-finite norm is an error: the step must not be
// applied.
func ClipGradNorm(b Backend, mc *Config, grads *Params, maxNorm float64) (float64, error) {
	norm := GradNorm(b, mc, grads)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("gradient norm is %v", norm)
	}
	if maxNorm > 0 {
		if coef := maxNorm / (norm + 1e-6); coef < 1 {
			grads.Each(mc, func(_ string, t *Tensor) { b.Scale(t, float32(coef)) })
		}
	}
	return norm, b.Err()
}

// ZeroGrads sets every gradient to zero.
func ZeroGrads(b Backend, mc *Config, grads *Params) {
	grads.Each(mc, func(_ string, t *Tensor) { b.Zero(t) })
}
