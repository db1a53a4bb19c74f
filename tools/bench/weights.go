package bench

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/gdrotrain/gdrotrain/model"
)

// Weights makes the random parameters of a bench run once per model shape
// and hands the same ones to every row of that shape: a Qwen3-1.7B's 2
// billion values took some 15 s to draw on one thread, once per row. They
// are drawn on every core (model.RandomParamsParallel). Rows only read
// them, but for the optimizer-step rows, whose AdamW updates at a learning
// rate of 1e-6 change no throughput.
type Weights struct {
	b    model.Backend
	sets map[string]*model.Params
	// Made counts the parameter sets drawn, Seconds the time spent drawing
	// and uploading them; Served counts the rows handed one.
	Made, Served int
	Seconds      float64
}

// NewWeights returns an empty cache for backend b.
func NewWeights(b model.Backend) *Weights {
	return &Weights{b: b, sets: map[string]*model.Params{}}
}

// Params returns the parameters of cfg's shape, drawn (seed 1, cfg's
// initializer range) the first time that shape is asked for.
func (w *Weights) Params(cfg *model.Config) (*model.Params, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench weights: %w", err)
	}
	w.Served++
	if p, ok := w.sets[string(raw)]; ok {
		return p, nil
	}
	start := time.Now()
	p := model.RandomParamsParallel(w.b, cfg, 1, cfg.InitializerRange, 0, 0)
	if err := w.b.Err(); err != nil {
		w.b.ResetErr()
		return nil, fmt.Errorf("bench weights: %w", err)
	}
	w.Made++
	w.Seconds += time.Since(start).Seconds()
	w.sets[string(raw)] = p
	return p, nil
}

// randomParams is w's parameters for cfg, or without a cache (w nil) fresh
// ones from RandomParams, on b.
func randomParams(b model.Backend, cfg *model.Config, w *Weights) (*model.Params, error) {
	if w == nil {
		return model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0), nil
	}
	return w.Params(cfg)
}
