// Package bench measures the throughput of a Qwen3 model's training step and
// cached decoding on any backend: the benchmark shapes, the timing loops and
// the FLOP count a step's MFU is computed from. `gdrotrain bench` (CPU), the
// CUDA benchmark and profiles (cuda) and the Go benchmarks share it; it is
// tooling, not part of the model's definition.
package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gdrotrain/gdrotrain/model"
)

// Shape is a model size and batch to measure.
type Shape struct {
	Name           string
	Opts           model.RandomOptions
	Batch, SeqLen  int
	Iters          int
	ResponseTokens int // log-probs are taken over the last ResponseTokens of each sequence
	// Exact runs with precision.exact_logprobs (the backend's
	// batch-invariant kernels in every forward).
	Exact bool
}

// Shapes are the sizes `make bench` reports: the unit-test model and a
// ≈50M-parameter model.
func Shapes() []Shape {
	tiny := model.DefaultTiny()
	small := model.RandomOptions{Layers: 8, Hidden: 512, Intermediate: 1536, Heads: 8, KVHeads: 4, HeadDim: 64,
		Vocab: 50000, Tied: true, RopeTheta: 1e6, MaxPositions: 4096, InitStd: 0.02}
	return []Shape{
		{Name: "tiny", Opts: tiny, Batch: 8, SeqLen: 128, Iters: 20, ResponseTokens: 96},
		{Name: "small-50M", Opts: small, Batch: 2, SeqLen: 128, Iters: 1, ResponseTokens: 96},
	}
}

// Result holds tokens per second for a forward and a forward+backward.
type Result struct {
	Params       int64
	FwdTokPerS   float64
	TrainTokPerS float64
}

// Bencher holds a model and a batch of one shape, so a benchmark can time
// the same work repeatedly (interleaved with a baseline) without rebuilding
// the model.
type Bencher struct {
	s     Shape
	m     *model.Model
	seqs  []model.Sequence
	w     [][]float32
	grads *model.Params
}

// NewBencher builds a random model of the shape on backend b and its batch.
func NewBencher(b model.Backend, s Shape) (*Bencher, error) { return NewBencherWith(b, s, nil) }

// NewBencherWith is NewBencher taking the weights from w, which makes them
// once per model shape (nil: fresh ones).
func NewBencherWith(b model.Backend, s Shape, w *Weights) (*Bencher, error) {
	cfg, err := s.Opts.Config()
	if err != nil {
		return nil, err
	}
	p, err := randomParams(b, cfg, w)
	if err != nil {
		return nil, err
	}
	x := &Bencher{s: s, m: &model.Model{Cfg: cfg, B: b, P: p}}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < s.Batch; i++ {
		toks := make([]int32, s.SeqLen)
		for j := range toks {
			toks[j] = int32(rng.IntN(cfg.VocabSize))
		}
		x.seqs = append(x.seqs, model.Sequence{Tokens: toks, Start: s.SeqLen - s.ResponseTokens})
		x.w = append(x.w, make([]float32, s.ResponseTokens))
		for j := range x.w[i] {
			x.w[i][j] = 1 / float32(s.ResponseTokens)
		}
	}
	x.grads = model.NewParams(b, cfg)
	return x, nil
}

// Warm runs one untimed forward and forward+backward (first-touch page
// faults, caches, lazily built tables), as the PyTorch baseline does.
func (x *Bencher) Warm() error {
	p, err := x.m.Forward(x.seqs)
	if err != nil {
		return fmt.Errorf("bench %s: %w", x.s.Name, err)
	}
	if err := x.m.Backward(p, x.w, x.grads); err != nil {
		return fmt.Errorf("bench %s: %w", x.s.Name, err)
	}
	return nil
}

// Run times Iters training forwards, then Iters forward+backward passes.
func (x *Bencher) Run() (Result, error) {
	s := x.s
	tokens := float64(s.Batch * s.SeqLen * s.Iters)
	start := time.Now()
	for i := 0; i < s.Iters; i++ {
		if _, err := x.m.Forward(x.seqs); err != nil {
			return Result{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
	}
	fwd := time.Since(start).Seconds()
	start = time.Now()
	for i := 0; i < s.Iters; i++ {
		p, err := x.m.Forward(x.seqs)
		if err != nil {
			return Result{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
		if err := x.m.Backward(p, x.w, x.grads); err != nil {
			return Result{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
	}
	train := time.Since(start).Seconds()
	return Result{Params: x.m.Cfg.NumParams(), FwdTokPerS: tokens / fwd, TrainTokPerS: tokens / train}, nil
}

// Measure times the training forward and forward+backward on backend b
// once, without a warm-up pass.
func Measure(b model.Backend, s Shape) (Result, error) {
	x, err := NewBencher(b, s)
	if err != nil {
		return Result{}, err
	}
	return x.Run()
}

// Qwen3_1_7B are the Qwen/Qwen3-1.7B-Base shapes (random weights) used by
// the GPU benchmark.
func Qwen3_1_7B() model.RandomOptions {
	return model.RandomOptions{Layers: 28, Hidden: 2048, Intermediate: 6144, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Tied: true, RopeTheta: 1e6, MaxPositions: 40960, InitStd: 0.02}
}

// Qwen3_8B are the Qwen/Qwen3-8B-Base shapes (docs/qwen3-shapes/8b/config.json;
// untied embedding and LM head), for estimates scaled from the 1.7B's counts.
func Qwen3_8B() model.RandomOptions {
	return model.RandomOptions{Layers: 36, Hidden: 4096, Intermediate: 12288, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Tied: false, RopeTheta: 1e6, MaxPositions: 32768, InitStd: 0.02}
}

// GPUShapes are the training shapes of the GPU benchmark: one
// sequence per step at 2k and 8k tokens, log-probabilities over all but a
// 256-token prompt (a GRPO response).
func GPUShapes(o model.RandomOptions, name string) []Shape {
	return []Shape{
		{Name: name + "-2k", Opts: o, Batch: 4, SeqLen: 2048, Iters: 3, ResponseTokens: 2048 - 256},
		{Name: name + "-8k", Opts: o, Batch: 1, SeqLen: 8192, Iters: 3, ResponseTokens: 8192 - 256},
	}
}

// TrainFLOPs is the arithmetic of one forward+backward of a shape: 3× the
// forward's 2·params multiply-adds per token in the decoder's matrices, the
// LM head on response tokens, and causal attention (QKᵀ and PV over half
// the sequence on average).
func TrainFLOPs(s Shape) float64 {
	o := s.Opts
	C, F, HD, GD := float64(o.Hidden), float64(o.Intermediate), float64(o.Heads*o.HeadDim), float64(o.KVHeads*o.HeadDim)
	perLayer := C*HD*2 + C*GD*2 + 3*C*F // q, o; k, v; gate, up, down
	tokens := float64(s.Batch * s.SeqLen)
	fwd := 2*perLayer*float64(o.Layers)*tokens + 2*C*float64(o.Vocab)*float64(s.Batch*s.ResponseTokens)
	fwd += float64(o.Layers) * float64(s.Batch) * 2 * float64(s.SeqLen) * float64(s.SeqLen) * HD // 2·(T²/2)·HD for QKᵀ and for PV
	return 3 * fwd
}

// DecodeStep runs one decode step of in and brings back what the sampler
// needs for unfiltered sampling: whole logit rows, or on a DeviceSampler
// backend (as the sampler does there) each row's chunk sums, then one
// chunk of 1024 logits per row in one download, the logits staying on the
// device.
func DecodeStep(m *model.Model, kv *model.KVCache, in []model.StepInput) error {
	return decodeStep(m, kv, in, false)
}

// DecodeStepExact is DecodeStep as the sampler runs it with
// precision.exact_logprobs: the same draw, then each drawn token's
// untempered log-probability and entropy by LogSoftmaxGather on its
// gathered logit row (sampler.exactLogProbs), brought back in one download.
func DecodeStepExact(m *model.Model, kv *model.KVCache, in []model.StepInput) error {
	return decodeStep(m, kv, in, true)
}

func decodeStep(m *model.Model, kv *model.KVCache, in []model.StepInput, exact bool) error {
	b := m.B
	rs := model.SamplerCapsOf(b).Device
	if rs == nil && !exact {
		_, err := m.Step(kv, in)
		return err
	}
	t, err := m.StepLogits(kv, in)
	if err != nil {
		return err
	}
	defer model.Release(b, t)
	rows, chunks := make([]int32, len(in)), make([]int32, len(in))
	for r := range rows {
		rows[r] = int32(r)
	}
	if rs != nil {
		rs.ChunkSums(t, 1, 1024)
		rs.Chunks(t, rows, chunks, 1024)
	} else {
		b.Download(t, make([]float32, t.Numel()))
	}
	if exact {
		gatherLogProbs(b, t, rows)
	}
	if err := b.Err(); err != nil { // as the model's own steps report a backend error
		b.ResetErr()
		return fmt.Errorf("decode step: %w", err)
	}
	return nil
}

// gatherLogProbs is the exact sampler's log-prob of token 0 in each of
// rows (the token does not change the work).
func gatherLogProbs(b model.Backend, t *model.Tensor, rows []int32) {
	_, V := model.Matrix(t)
	n := len(rows)
	g, out := model.Scratch(b, n, V), model.Scratch(b, 3*n)
	defer model.Release(b, g, out)
	b.GatherRows(g, t, rows)
	vec := func(k int) *model.Tensor { return out.View(3*n).Rows(k*n, (k+1)*n) }
	b.LogSoftmaxGather(vec(0), vec(1), vec(2), g, make([]int32, n))
	b.Download(out, make([]float32, 3*n))
}

// DecodeResult is the throughput of cached decoding.
type DecodeResult struct {
	Batch, Context int
	FP8            bool // an fp8 KV cache
	Exact          bool // precision.exact_logprobs
	Graphs         bool // sampling.cuda_graphs
	TokPerS        float64
	StepBytes      float64 // weights + KV cache read per decode step
}

// DecodeOptions are one decode measurement's: Batch slots with Context
// tokens of cache, Steps timed steps; FP8 an fp8 KV cache
// (precision.kv_cache: fp8) instead of bf16; Weights the run's weight
// cache (nil: fresh weights).
type DecodeOptions struct {
	Batch, Context, Steps int
	FP8                   bool
	// Exact decodes as the sampler does with precision.exact_logprobs:
	// the backend in batch-invariant mode, each drawn token's log-prob by
	// LogSoftmaxGather (DecodeStepExact).
	Exact bool
	// Graphs decodes as the sampler does with sampling.cuda_graphs: each
	// step one replayed graph that also draws the tokens (and, with Exact,
	// ends with their exact log-probs), on a backend with graphs.
	Graphs  bool
	Weights *Weights
}

// MeasureDecode fills d.Batch cache slots with d.Context tokens (one prefill,
// copied to every slot as the sampler shares a prompt) and times d.Steps
// decode steps of one token per slot, the logits reaching the host as the
// sampler receives them (whole rows, or device-side reductions on a
// DeviceSampler backend).
func MeasureDecode(b model.Backend, o model.RandomOptions, d DecodeOptions) (DecodeResult, error) {
	batch, context, steps := d.Batch, d.Context, d.Steps
	cfg, err := o.Config()
	if err != nil {
		return DecodeResult{}, err
	}
	p, err := randomParams(b, cfg, d.Weights)
	if err != nil {
		return DecodeResult{}, err
	}
	m := &model.Model{Cfg: cfg, B: b, P: p}
	// As generation runs: bf16 weight copies and a bf16 (or fp8) KV cache
	// where the backend keeps them.
	wBytes, kvBytes := 4.0, 4.0
	if made, err := m.ShadowWeights(); err != nil {
		return DecodeResult{}, err
	} else if made {
		wBytes = 2
	}
	if d.FP8 {
		m.KVCacheFP8 = true
		if err := m.CheckKVCache(); err != nil {
			return DecodeResult{}, err
		}
		kvBytes = float64(model.FP8KVRowBytes(cfg.NumKeyValueHeads, cfg.HeadDim)) / float64(cfg.NumKeyValueHeads*cfg.HeadDim)
	} else if model.SamplerCapsOf(b).Pager != nil {
		// A GPU's cache, bf16 as its runs' auto makes it; the CPU's stays
		// fp32, as there.
		m.KVCacheBF16, kvBytes = true, 2
	}
	// Untimed steps first: one eager, or a graph's eager run and its capture.
	warm := 1
	if d.Graphs {
		warm = 2
	}
	kv := m.NewKVCache(batch+1, context+warm+steps+1) // the last slot: a decode graph's spare
	defer kv.Release()
	rng := rand.New(rand.NewPCG(2, 2))
	prompt := make([]int32, context)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(cfg.VocabSize))
	}
	const chunk = 2048 // prefill in chunks to bound activation memory
	for lo := 0; lo < context; lo += chunk {
		if _, err := m.Step(kv, []model.StepInput{{Slot: 0, Tokens: prompt[lo:min(lo+chunk, context)]}}); err != nil {
			return DecodeResult{}, fmt.Errorf("decode bench prefill: %w", err)
		}
	}
	for s := 1; s < batch; s++ {
		if err := m.CopySlot(kv, s, 0); err != nil {
			return DecodeResult{}, err
		}
	}
	in := make([]model.StepInput, batch)
	for s := range in {
		in[s] = model.StepInput{Slot: s, Tokens: []int32{int32(rng.IntN(cfg.VocabSize))}}
	}
	step := func() error { return DecodeStep(m, kv, in) }
	if bi := model.TrainerCapsOf(b).Exact; d.Exact && bi != nil {
		defer bi.SetBatchInvariant(bi.IsBatchInvariant())
		bi.SetBatchInvariant(true)
		step = func() error { return DecodeStepExact(m, kv, in) }
	} else if d.Exact {
		return DecodeResult{}, fmt.Errorf("decode bench: %s has no exact mode", b.Name())
	}
	if d.Graphs {
		dg, err := m.NewDecodeGraph(kv, model.SampleParams{Temperature: 1, TopP: 1, ExactLogProbs: d.Exact})
		if err != nil {
			return DecodeResult{}, fmt.Errorf("decode bench: %w", err)
		}
		defer dg.Release()
		draws := make([]model.Draw, batch)
		for i := range draws {
			draws[i] = model.Draw{Key: uint64(i)}
		}
		step = func() error { _, _, _, err := dg.Step(in, draws); return err }
	}
	for range warm {
		if err := step(); err != nil {
			return DecodeResult{}, err
		}
	}
	start := time.Now()
	for i := 0; i < steps; i++ {
		if err := step(); err != nil {
			return DecodeResult{}, fmt.Errorf("decode bench: %w", err)
		}
	}
	secs := time.Since(start).Seconds()
	kvRead := float64(batch) * float64(context+steps/2) * float64(cfg.NumHiddenLayers*2*cfg.NumKeyValueHeads*cfg.HeadDim) * kvBytes
	return DecodeResult{Batch: batch, Context: context, FP8: d.FP8, Exact: d.Exact, Graphs: d.Graphs, TokPerS: float64(batch*steps) / secs,
		StepBytes: float64(cfg.NumParams())*wBytes + kvRead}, nil
}
