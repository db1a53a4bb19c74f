package model

// Random initialisation and writing a Hugging Face model folder, for tests,
// benchmarks, the tiny CPU demo and `gdrotrain init-tiny`.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

// RandomOptions size a random-initialised Qwen3 model, from the tiny test
// models (DefaultTiny) to the real shapes the benchmarks use.
type RandomOptions struct {
	Layers, Hidden, Intermediate, Heads, KVHeads, HeadDim, Vocab int
	Tied                                                         bool
	RopeTheta                                                    float64
	MaxPositions                                                 int
	EOS                                                          []int
	InitStd                                                      float64
	// NormJitter perturbs RMSNorm weights around 1 (N(1, jitter²)); 0 keeps
	// them at exactly 1 as transformers initialises them. Tests use jitter so
	// a bug that ignores a norm weight cannot hide.
	NormJitter float64
}

// DefaultTiny is a 2-layer GQA model small enough for unit tests.
func DefaultTiny() RandomOptions {
	return RandomOptions{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 256, RopeTheta: 1e6, MaxPositions: 4096, InitStd: 0.02}
}

// Config returns the Hugging Face configuration for these options.
func (o RandomOptions) Config() (*Config, error) {
	eos := o.EOS
	if len(eos) == 0 {
		eos = []int{o.Vocab - 1}
	}
	cfg := &Config{
		ModelType: "qwen3", Architectures: []string{"Qwen3ForCausalLM"},
		HiddenSize: o.Hidden, IntermediateSize: o.Intermediate, NumHiddenLayers: o.Layers,
		NumAttentionHeads: o.Heads, NumKeyValueHeads: o.KVHeads, HeadDim: o.HeadDim,
		RMSNormEps: 1e-6, RopeTheta: o.RopeTheta, TieWordEmbeddings: o.Tied, VocabSize: o.Vocab,
		MaxPositionEmbeddings: o.MaxPositions, HiddenAct: "silu", TorchDtype: "float32",
		EOSTokenIDs: eos, InitializerRange: o.InitStd,
	}
	cfg.fillDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tiny model options: %w", err)
	}
	return cfg, nil
}

// RandomParams draws parameters as transformers' Qwen3 initialiser does
// (normal(0, std) for matrices and embeddings, ones for norms), from seed.
func RandomParams(b Backend, cfg *Config, seed uint64, std, normJitter float64) *Params {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	p := NewParams(b, cfg)
	for _, np := range p.Named(cfg) {
		host := make([]float32, numel(np.Shape))
		isNorm := len(np.Shape) == 1
		for i := range host {
			if isNorm {
				host[i] = float32(1 + normJitter*rng.NormFloat64())
			} else {
				host[i] = float32(std * rng.NormFloat64())
			}
		}
		b.Upload(*np.Ptr, host)
	}
	return p
}

// RandomParamsParallel draws parameters as RandomParams does (normal(0,
// std) for matrices and embeddings, N(1, normJitter²) for norms) on workers
// goroutines (0: GOMAXPROCS), each chunk of randomChunk values of each
// tensor from a generator seeded by seed, the tensor's index and the
// chunk's, so the values do not depend on workers. They are not
// RandomParams' (one stream through every tensor, which the tests, the demo
// and init-tiny keep): the benchmarks draw a Qwen3-1.7B's 2 billion values
// with this, in a fraction of the time.
func RandomParamsParallel(b Backend, cfg *Config, seed uint64, std, normJitter float64, workers int) *Params {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := NewParams(b, cfg)
	for ti, np := range p.Named(cfg) {
		host := make([]float32, numel(np.Shape))
		mean, scale := 0.0, std
		if len(np.Shape) == 1 {
			mean, scale = 1, normJitter
		}
		chunks := (len(host) + randomChunk - 1) / randomChunk
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(workers, chunks) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
					rng := rand.New(rand.NewPCG(seed, uint64(ti)<<32|uint64(c)))
					for i := c * randomChunk; i < min((c+1)*randomChunk, len(host)); i++ {
						host[i] = float32(mean + scale*rng.NormFloat64())
					}
				}
			}()
		}
		wg.Wait()
		b.Upload(*np.Ptr, host)
	}
	return p
}

// randomChunk is how many values of a tensor one generator draws.
const randomChunk = 1 << 20

// WriteFolder writes config.json, generation_config.json and
// model.safetensors (in dtype) to dir, creating it if needed.
func WriteFolder(dir string, cfg *Config, b Backend, p *Params, dtype DType) error {
	return WriteFolderSharded(dir, cfg, b, p, dtype, 0)
}

// WriteFolderSharded is WriteFolder with weights split into shards of at
// most maxShardBytes (0: one file).
func WriteFolderSharded(dir string, cfg *Config, b Backend, p *Params, dtype DType, maxShardBytes int64) error {
	return WriteFolderWith(dir, cfg, b, p, dtype, maxShardBytes, nil)
}

// WriteFolderWith is WriteFolderSharded taking the parameters named in
// given from there rather than from the backend: the fp32 masters of a
// policy whose matrices are bf16 only (optim.ShardedAdamW.GatherMasters).
func WriteFolderWith(dir string, cfg *Config, b Backend, p *Params, dtype DType, maxShardBytes int64, given map[string][]float32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	out := *cfg
	out.TorchDtype = dtype.TorchName()
	out.NewDtype = ""
	if err := writeJSON(filepath.Join(dir, "config.json"), &out); err != nil {
		return err
	}
	gen := map[string]any{"eos_token_id": cfg.EOSTokenIDs, "do_sample": true}
	if cfg.BosTokenID != nil {
		gen["bos_token_id"] = *cfg.BosTokenID
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), gen); err != nil {
		return err
	}
	return saveParams(b, cfg, p, dir, dtype, maxShardBytes, given)
}

func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return WriteFileAtomic(path, append(raw, '\n'))
}
