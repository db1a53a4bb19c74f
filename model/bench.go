package model

// Throughput measurement shared by `gdrotrain bench` and the Go benchmarks.

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// BenchShape is a model size and batch to measure.
type BenchShape struct {
	Name           string
	Opts           TinyOptions
	Batch, SeqLen  int
	Iters          int
	ResponseTokens int // log-probs are taken over the last ResponseTokens of each sequence
}

// BenchShapes are the sizes `make bench` reports: the unit-test model and a
// ≈50M-parameter model.
func BenchShapes() []BenchShape {
	tiny := DefaultTiny()
	small := TinyOptions{Layers: 8, Hidden: 512, Intermediate: 1536, Heads: 8, KVHeads: 4, HeadDim: 64,
		Vocab: 50000, Tied: true, RopeTheta: 1e6, MaxPositions: 4096, InitStd: 0.02}
	return []BenchShape{
		{Name: "tiny", Opts: tiny, Batch: 8, SeqLen: 128, Iters: 5, ResponseTokens: 96},
		{Name: "small-50M", Opts: small, Batch: 2, SeqLen: 128, Iters: 1, ResponseTokens: 96},
	}
}

// BenchResult holds tokens per second for a forward and a forward+backward.
type BenchResult struct {
	Params       int64
	FwdTokPerS   float64
	TrainTokPerS float64
}

// Measure times the training forward and forward+backward on backend b.
func Measure(b Backend, s BenchShape) (BenchResult, error) {
	cfg, err := s.Opts.Config()
	if err != nil {
		return BenchResult{}, err
	}
	m := &Model{Cfg: cfg, B: b, P: RandomParams(b, cfg, 1, cfg.InitializerRange, 0)}
	rng := rand.New(rand.NewPCG(1, 1))
	var seqs []Sequence
	var w [][]float32
	for i := 0; i < s.Batch; i++ {
		toks := make([]int32, s.SeqLen)
		for j := range toks {
			toks[j] = int32(rng.IntN(cfg.VocabSize))
		}
		seqs = append(seqs, Sequence{Tokens: toks, Start: s.SeqLen - s.ResponseTokens})
		w = append(w, make([]float32, s.ResponseTokens))
		for j := range w[i] {
			w[i][j] = 1 / float32(s.ResponseTokens)
		}
	}
	grads := NewParams(b, cfg)
	tokens := float64(s.Batch * s.SeqLen * s.Iters)
	start := time.Now()
	for i := 0; i < s.Iters; i++ {
		if _, err := m.Forward(seqs); err != nil {
			return BenchResult{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
	}
	fwd := time.Since(start).Seconds()
	start = time.Now()
	for i := 0; i < s.Iters; i++ {
		p, err := m.Forward(seqs)
		if err != nil {
			return BenchResult{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
		if err := m.Backward(p, w, grads); err != nil {
			return BenchResult{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
	}
	train := time.Since(start).Seconds()
	return BenchResult{Params: cfg.NumParams(), FwdTokPerS: tokens / fwd, TrainTokPerS: tokens / train}, nil
}
