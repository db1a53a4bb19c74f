package profile

// Profiling one decode step of rollout generation: a token for each of
// batch cache slots holding context tokens, the logits reduced on the
// device as the sampler does for unfiltered sampling (bench.DecodeStep),
// with the policy's bf16 weight copies and a bf16 KV cache, as generation
// runs. Counted at one and two layers and extrapolated, as the training
// step is (step.go). A decode step is bound by what it must read:
// the estimate is set against the bandwidth bound of the bf16 weights plus
// the live keys and values, read once at the full data-sheet bandwidth.
//
// With Graphs the step is the sampler's graphed one (model.DecodeGraph):
// the batch padded to its bucket, the token drawn on the device, and the
// counted step a replay of the captured graph (the third step of a key).
//
// With Paged the cache is the paged one (model.NewPagedKVCache): the same
// kernels on the same addresses, plus the host's page mapping between
// steps (KVCache.Grow before each step, as the sampler does), counted as
// cuMemMap calls. A slot maps a page (one granule in each of the 2·L K and
// V ranges) when its length crosses into it: the counted step shows the
// crossings that happen in it, and the steady-state mean is batch × 2·L /
// tokens per page (at Qwen3-1.7B, 2 MiB pages of 2 KiB rows: 1,024 tokens).
//
// With FP8 the cache is fp8 (e4m3 codes and a scale per token and KV head,
// precision.kv_cache fp8: 1,056 bytes a row at Qwen3-1.7B against 2,048),
// and so is the bound's KV term.

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// DecodeShape is a decode batch and the context every slot holds.
type DecodeShape struct {
	Name           string
	Opts           model.RandomOptions
	Batch, Context int
	Graphs         bool // the step as a CUDA graph replay with the draw on the device
	Paged          bool // a paged KV cache, its pages mapped between steps
	FP8            bool // an fp8 KV cache (codes and scales) instead of bf16
	// LoRA, when set, decodes as a LoRA run does: the base frozen in
	// bf16, these adapters applied on the fly (model/lora_pass.go).
	LoRA *model.LoRAConfig
	// Exact decodes as the sampler does with precision.exact_logprobs: the
	// backend's batch-invariant kernels and each drawn token's log-prob
	// and entropy by LogSoftmaxGather: with Graphs inside the graph, on
	// the tokens drawn there (model.SampleParams.ExactLogProbs), else
	// eagerly on the gathered rows (bench.DecodeStepExact).
	Exact bool
}

// DecodeProfile is the profile of one decode step of a shape.
type DecodeProfile struct {
	Shape         DecodeShape
	CountedLayers [2]int
	Step          cuda.Profile // one steady-state step, extrapolated to the shape's depth
	BoundBytes    float64      // bf16 weights (matrices once) + live keys and values (bf16, or fp8 codes and scales)
	// Paged caches: the pages (each mapped in every range) the counted
	// step mapped at the deeper counted depth, and the tokens a page holds.
	PagesMapped, PageTokens int
}

// DecodeStep counts one decode step of s on b at one and two layers
// and extrapolates to s.Opts.Layers.
func DecodeStep(b *cuda.Backend, s DecodeShape) (DecodeProfile, error) {
	dp := DecodeProfile{Shape: s, CountedLayers: [2]int{1, 2}}
	var at [2]cuda.Profile
	for i, L := range dp.CountedLayers {
		o := s.Opts
		o.Layers = L
		p, pages, err := decodeAt(b, o, s)
		if err != nil {
			return dp, fmt.Errorf("decode profile %s at %d layers: %w", s.Name, L, err)
		}
		at[i], dp.PagesMapped = p, pages
	}
	dp.Step = at[0].Extrapolate(at[1].Sub(at[0]), s.Opts.Layers-dp.CountedLayers[0])
	dp.Step.DeviceAllocs, dp.Step.LiveBuffers, dp.Step.Leaked = at[1].DeviceAllocs, at[1].LiveBuffers, at[1].Leaked
	cfg, err := s.Opts.Config()
	if err != nil {
		return dp, err
	}
	row := kvRowBytes(cfg, s.FP8)
	kv := float64(s.Batch) * float64(s.Context) * float64(cfg.NumHiddenLayers*2) * float64(row)
	dp.BoundBytes = 2*float64(matrixParams(cfg)) + kv
	if s.LoRA != nil {
		for _, np := range model.AdapterShapes(cfg, s.LoRA) { // their bf16 copies, read once
			dp.BoundBytes += 2 * float64(np.Shape[0]*np.Shape[1])
		}
	}
	if s.Paged {
		dp.PageTokens = int(b.KVPageBytes() / row)
	}
	return dp, nil
}

// kvRowBytes is one token's K (or V) row of one layer: bf16, or fp8
// codes and scales.
func kvRowBytes(cfg *model.Config, fp8 bool) int64 {
	if fp8 {
		return model.FP8KVRowBytes(cfg.NumKeyValueHeads, cfg.HeadDim)
	}
	return int64(2 * cfg.NumKeyValueHeads * cfg.HeadDim)
}

// matrixParams counts the weights of the matrices a decode step reads (the
// embedding once: tied, it is the LM head; untied, only a row per token).
func matrixParams(cfg *model.Config) int64 {
	C, F, V := int64(cfg.HiddenSize), int64(cfg.IntermediateSize), int64(cfg.VocabSize)
	HD, GD := int64(cfg.NumAttentionHeads*cfg.HeadDim), int64(cfg.NumKeyValueHeads*cfg.HeadDim)
	return int64(cfg.NumHiddenLayers)*(2*C*HD+2*C*GD+3*C*F) + V*C
}

// decodeAt runs two decode steps of o's model after filling the cache
// (zeros: the counts do not depend on the values) and returns the second's
// counts, and for a paged cache the pages that step mapped.
func decodeAt(b *cuda.Backend, o model.RandomOptions, s DecodeShape) (cuda.Profile, int, error) {
	cfg, err := o.Config()
	if err != nil {
		return cuda.Profile{}, 0, err
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0), KVCacheBF16: !s.FP8, KVCacheFP8: s.FP8}
	if err := m.CheckKVCache(); err != nil {
		return cuda.Profile{}, 0, err
	}
	if s.LoRA != nil {
		if _, err := m.Freeze(); err != nil {
			return cuda.Profile{}, 0, err
		}
		m.A = model.NewAdapters(b, cfg, s.LoRA)
	}
	if _, err := m.ShadowWeights(); err != nil {
		return cuda.Profile{}, 0, err
	}
	const warm = 2 // steps before the counted one: a graph's eager run and its capture
	slots, maxLen := s.Batch+1, s.Context+warm+1
	var kv *model.KVCache
	if s.Paged {
		// A pool with room for every slot at full length (and the pages
		// slots share at their edges): the profile counts mapping, not
		// pre-emption.
		page, rows := b.KVPageBytes(), kvRowBytes(cfg, s.FP8)
		pages := (int64(slots)*int64(maxLen)*rows+page-1)/page + int64(slots)
		if kv, err = m.NewPagedKVCache(slots, maxLen, model.KVPaging{BudgetBytes: pages * page * int64(2*cfg.NumHiddenLayers)}); err != nil {
			return cuda.Profile{}, 0, err
		}
	} else {
		kv = m.NewKVCache(slots, maxLen)
	}
	defer kv.Release()
	in := make([]model.StepInput, s.Batch)
	draws := make([]model.Draw, s.Batch)
	for i := range in {
		if err := kv.Grow(i, s.Context-warm); err != nil {
			return cuda.Profile{}, 0, err
		}
		kv.Len[i] = s.Context - warm
		in[i] = model.StepInput{Slot: i, Tokens: []int32{int32(i % cfg.VocabSize)}}
		draws[i] = model.Draw{Key: uint64(i)}
	}
	run := func() error { return bench.DecodeStep(m, kv, in) }
	if s.Exact {
		defer b.SetBatchInvariant(b.IsBatchInvariant())
		b.SetBatchInvariant(true)
		run = func() error { return bench.DecodeStepExact(m, kv, in) }
	}
	if s.Graphs {
		dg, err := m.NewDecodeGraph(kv, model.SampleParams{Temperature: 1, TopP: 1, ExactLogProbs: s.Exact})
		if err != nil {
			return cuda.Profile{}, 0, err
		}
		defer dg.Release()
		run = func() error { _, _, _, err := dg.Step(in, draws); return err }
	}
	// Each step first backs its new rows, as the sampler does.
	step := func() error {
		for i := range in {
			if err := kv.Grow(i, kv.Len[i]+1); err != nil {
				return err
			}
		}
		return run()
	}
	for range warm {
		if err := step(); err != nil {
			return cuda.Profile{}, 0, err
		}
	}
	before, maps := b.Device().Profile(), pageMaps(kv)
	if err := step(); err != nil {
		return cuda.Profile{}, 0, err
	}
	return b.Device().Profile().Sub(before), pageMaps(kv) - maps, b.Err()
}

// pageMaps is the pages a cache has mapped so far (0: not paged).
func pageMaps(kv *model.KVCache) int {
	if kv.Pages == nil {
		return 0
	}
	return kv.Pages.Maps
}

// JSON returns the profile as one flat object with the estimate on r.
func (dp DecodeProfile) JSON(r cuda.Roofline) map[string]any {
	p := dp.Step
	est := p.EstSeconds(r)
	bound := dp.BoundBytes / (r.BandwidthGBs * 1e9)
	bytes := 0.0
	for _, x := range p.Bytes {
		bytes += x
	}
	j := map[string]any{
		"shape": dp.Shape.Name, "decode_batch": dp.Shape.Batch, "context": dp.Shape.Context, "layers": dp.Shape.Opts.Layers,
		"counted_layers":          dp.CountedLayers,
		"cuda_graphs":             dp.Shape.Graphs,
		"lora_rank":               loraRank(dp.Shape.LoRA),
		"graph_launches_per_step": p.GraphLaunches,
		"graph_nodes_per_step":    p.GraphNodes,
		"other_launches_per_step": p.Launches + p.GEMMs + p.Memsets,
		"launches_per_step":       p.GraphLaunches + p.Launches + p.GEMMs + p.Memsets,
		"kernel_launches":         p.Launches,
		"gemm_calls":              p.GEMMs,
		"host_syncs_per_step":     p.HostSyncs,
		"device_allocs":           p.DeviceAllocs,
		"kv_paged":                dp.Shape.Paged,
		"page_maps_per_step":      p.PageMaps,
		"bytes_per_step":          bytes,
		"bound_bytes_per_step":    dp.BoundBytes,
		"est_ms_per_step":         1e3 * est,
		"est_tok_s":               float64(dp.Shape.Batch) / est,
		"bound_tok_s":             float64(dp.Shape.Batch) / bound,
		"est_fraction_of_bound":   bound / est,
		"est_h100_ms_by_engine":   msByEngine(p),
		"kv_cache":                map[bool]string{false: "bf16", true: "fp8"}[dp.Shape.FP8],
		"estimate":                "roofline over the counts, not a measurement; bound: bf16 weights + live KV (bf16, or fp8 codes and scales) at the full bandwidth: " + r.String(),
		"extrapolated":            fmt.Sprintf("counted at %d and %d layers, extrapolated linearly to %d", dp.CountedLayers[0], dp.CountedLayers[1], dp.Shape.Opts.Layers),
	}
	if dp.Shape.Paged && dp.PageTokens > 0 {
		// Each slot crosses into a new page once per PageTokens steps and
		// then maps it in every K and V range.
		j["kv_page_tokens"] = dp.PageTokens
		j["page_maps_per_step_mean"] = float64(dp.Shape.Batch*2*dp.Shape.Opts.Layers) / float64(dp.PageTokens)
	}
	return j
}

// DecodeShapes are the decode shapes `gdrotrain bench --profile` counts:
// Qwen3-1.7B at batch 1, 64 and 256, with 1k and 4k tokens in every slot,
// each step issued eagerly and as a graph replay.
func DecodeShapes() []DecodeShape {
	var out []DecodeShape
	for _, graphs := range []bool{false, true} {
		for _, ctx := range []int{1024, 4096} {
			for _, batch := range []int{1, 64, 256} {
				name := fmt.Sprintf("qwen3-1.7b-decode-%dx%dk", batch, ctx/1024)
				if graphs {
					name += "-graph"
				}
				out = append(out, DecodeShape{Name: name, Opts: bench.Qwen3_1_7B(), Batch: batch, Context: ctx, Graphs: graphs})
			}
		}
	}
	// The paged cache at batch 256: the same graph, plus the host's page
	// mapping between steps.
	for _, ctx := range []int{1024, 4096} {
		out = append(out, DecodeShape{Name: fmt.Sprintf("qwen3-1.7b-decode-256x%dk-graph-paged", ctx/1024), Opts: bench.Qwen3_1_7B(),
			Batch: 256, Context: ctx, Graphs: true, Paged: true})
	}
	// The fp8 cache (precision.kv_cache fp8) as the sampler runs it at
	// batch 256: graphed, plain and paged.
	for _, ctx := range []int{1024, 4096} {
		out = append(out, DecodeShape{Name: fmt.Sprintf("qwen3-1.7b-decode-256x%dk-graph-fp8", ctx/1024), Opts: bench.Qwen3_1_7B(),
			Batch: 256, Context: ctx, Graphs: true, FP8: true})
	}
	out = append(out, DecodeShape{Name: "qwen3-1.7b-decode-256x4k-graph-paged-fp8", Opts: bench.Qwen3_1_7B(),
		Batch: 256, Context: 4096, Graphs: true, Paged: true, FP8: true})
	// A LoRA run's decode (rank 32 on every projection, applied on the
	// fly): against the same graph steps without adapters, what decoding
	// with them costs (docs/algorithm.md §5.14 chooses it over merging).
	lc := &model.LoRAConfig{Rank: 32, Alpha: 32, Targets: model.LoRAModules}
	for _, batch := range []int{1, 256} {
		out = append(out, DecodeShape{Name: fmt.Sprintf("qwen3-1.7b-decode-%dx4k-graph-lora32", batch), Opts: bench.Qwen3_1_7B(),
			Batch: batch, Context: 4096, Graphs: true, LoRA: lc})
	}
	// Exact mode (precision.exact_logprobs) at the -graph rows' batches
	// above: graphed as the sampler runs them, the graph ending with
	// LogSoftmaxGather on the drawn tokens. The same batches as today's
	// rows, so the pipeline estimate interpolates both modes between the
	// same corners (at 32 slots, batch 1 and 64): between 1 and 256 the
	// exact step would be read off a line through batch 256, where its
	// products are bound by the tensor cores, not by the weights' bytes
	// as at 32, and its generation overstated.
	for _, batch := range []int{1, 64, 256} {
		for _, ctx := range []int{1024, 4096} {
			out = append(out, DecodeShape{Name: fmt.Sprintf("qwen3-1.7b-decode-%dx%dk-graph-exact", batch, ctx/1024), Opts: bench.Qwen3_1_7B(),
				Batch: batch, Context: ctx, Graphs: true, Exact: true})
		}
	}
	return out
}

func loraRank(lc *model.LoRAConfig) int {
	if lc == nil {
		return 0
	}
	return lc.Rank
}

// WriteDecode counts every decode shape on b and writes one JSON
// object per shape (asJSON) or a table to w; it returns the profiles.
func WriteDecode(w io.Writer, b *cuda.Backend, asJSON bool) ([]DecodeProfile, error) {
	shapes := DecodeShapes()
	header := "decode step profile (counted; tokens/s are ESTIMATES against the bandwidth bound of bf16 weights + live KV; -graph: the step as a CUDA graph replay, nodes: the ops it replays; -fp8: an fp8 KV cache)\n" +
		fmt.Sprintf("%-38s %9s %6s %6s %9s %9s %9s %11s %11s %8s %6s", "shape", "launches", "nodes", "syncs", "GB read", "bound GB",
			"est ms", "est tok/s", "bound tok/s", "of bound", "maps")
	var out []DecodeProfile
	err := writeProfiles(w, asJSON, header, len(shapes), func(i int) (map[string]any, string, error) {
		s := shapes[i]
		dp, err := DecodeStep(b, s)
		if err != nil {
			return nil, "", err
		}
		out = append(out, dp)
		j := dp.JSON(cuda.H100)
		maps := "-"
		if s.Paged {
			maps = fmt.Sprintf("%d/%.1f", dp.Step.PageMaps, j["page_maps_per_step_mean"])
		}
		return j, fmt.Sprintf("%-38s %9d %6d %6d %9.2f %9.2f %9.2f %11.0f %11.0f %7.1f%% %6s", s.Name, j["launches_per_step"], j["graph_nodes_per_step"], j["host_syncs_per_step"],
			j["bytes_per_step"].(float64)/1e9, dp.BoundBytes/1e9, j["est_ms_per_step"], j["est_tok_s"], j["bound_tok_s"],
			100*j["est_fraction_of_bound"].(float64), maps), nil
	})
	return out, err
}
