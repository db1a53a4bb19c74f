package cuda

// Profiling one decode step of rollout generation: a token for each of
// batch cache slots holding context tokens, the logits reduced on the
// device as the sampler does for unfiltered sampling (model.DecodeStep),
// with the policy's bf16 weight copies and a bf16 KV cache, as generation
// runs. Counted at one and two layers and extrapolated, as the training
// step is (profile_step.go). A decode step is bound by what it must read:
// the estimate is set against the bandwidth bound of the bf16 weights plus
// the live keys and values, read once at the full data-sheet bandwidth.
//
// With Graphs the step is the sampler's graphed one (model.DecodeGraph):
// the batch padded to its bucket, the token drawn on the device, and the
// counted step a replay of the captured graph (the third step of a key).

import (
	"fmt"
	"io"

	"github.com/gdrotrain/gdrotrain/model"
)

// DecodeShape is a decode batch and the context every slot holds.
type DecodeShape struct {
	Name           string
	Opts           model.TinyOptions
	Batch, Context int
	Graphs         bool // the step as a CUDA graph replay with the draw on the device
}

// DecodeProfile is the profile of one decode step of a shape.
type DecodeProfile struct {
	Shape         DecodeShape
	CountedLayers [2]int
	Step          Profile // one steady-state step, extrapolated to the shape's depth
	BoundBytes    float64 // bf16 weights (matrices once) + live bf16 keys and values
}

// ProfileDecodeStep counts one decode step of s on b at one and two layers
// and extrapolates to s.Opts.Layers.
func ProfileDecodeStep(b *Backend, s DecodeShape) (DecodeProfile, error) {
	dp := DecodeProfile{Shape: s, CountedLayers: [2]int{1, 2}}
	var at [2]Profile
	for i, L := range dp.CountedLayers {
		o := s.Opts
		o.Layers = L
		p, err := decodeAt(b, o, s)
		if err != nil {
			return dp, fmt.Errorf("decode profile %s at %d layers: %w", s.Name, L, err)
		}
		at[i] = p
	}
	dp.Step = at[0].Extrapolate(at[1].Sub(at[0]), s.Opts.Layers-dp.CountedLayers[0])
	dp.Step.DeviceAllocs, dp.Step.LiveBuffers, dp.Step.Leaked = at[1].DeviceAllocs, at[1].LiveBuffers, at[1].Leaked
	cfg, err := s.Opts.Config()
	if err != nil {
		return dp, err
	}
	kv := float64(s.Batch) * float64(s.Context) * float64(cfg.NumHiddenLayers*2*cfg.NumKeyValueHeads*cfg.HeadDim) * 2
	dp.BoundBytes = 2*float64(matrixParams(cfg)) + kv
	return dp, nil
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
// counts.
func decodeAt(b *Backend, o model.TinyOptions, s DecodeShape) (Profile, error) {
	cfg, err := o.Config()
	if err != nil {
		return Profile{}, err
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0), KVCacheBF16: true}
	if _, err := m.ShadowWeights(); err != nil {
		return Profile{}, err
	}
	const warm = 2 // steps before the counted one: a graph's eager run and its capture
	kv := m.NewKVCache(s.Batch+1, s.Context+warm+1)
	defer kv.Release()
	in := make([]model.StepInput, s.Batch)
	draws := make([]model.Draw, s.Batch)
	for i := range in {
		kv.Len[i] = s.Context - warm
		in[i] = model.StepInput{Slot: i, Tokens: []int32{int32(i % cfg.VocabSize)}}
		draws[i] = model.Draw{Key: uint64(i)}
	}
	step := func() error { return model.DecodeStep(m, kv, in) }
	if s.Graphs {
		dg, err := m.NewDecodeGraph(kv, model.SampleParams{Temperature: 1, TopP: 1})
		if err != nil {
			return Profile{}, err
		}
		defer dg.Release()
		step = func() error { _, _, err := dg.Step(in, draws); return err }
	}
	for range warm {
		if err := step(); err != nil {
			return Profile{}, err
		}
	}
	before := b.Device().Profile()
	if err := step(); err != nil {
		return Profile{}, err
	}
	return b.Device().Profile().Sub(before), b.Err()
}

// JSON returns the profile as one flat object with the estimate on r.
func (dp DecodeProfile) JSON(r Roofline) map[string]any {
	p := dp.Step
	est := p.EstSeconds(r)
	bound := dp.BoundBytes / (r.BandwidthGBs * 1e9)
	bytes := 0.0
	for _, x := range p.Bytes {
		bytes += x
	}
	return map[string]any{
		"shape": dp.Shape.Name, "decode_batch": dp.Shape.Batch, "context": dp.Shape.Context, "layers": dp.Shape.Opts.Layers,
		"counted_layers":          dp.CountedLayers,
		"cuda_graphs":             dp.Shape.Graphs,
		"graph_launches_per_step": p.GraphLaunches,
		"graph_nodes_per_step":    p.GraphNodes,
		"other_launches_per_step": p.Launches + p.GEMMs + p.Memsets,
		"launches_per_step":       p.GraphLaunches + p.Launches + p.GEMMs + p.Memsets,
		"kernel_launches":         p.Launches,
		"gemm_calls":              p.GEMMs,
		"host_syncs_per_step":     p.HostSyncs,
		"device_allocs":           p.DeviceAllocs,
		"bytes_per_step":          bytes,
		"bound_bytes_per_step":    dp.BoundBytes,
		"est_ms_per_step":         1e3 * est,
		"est_tok_s":               float64(dp.Shape.Batch) / est,
		"bound_tok_s":             float64(dp.Shape.Batch) / bound,
		"est_fraction_of_bound":   bound / est,
		"est_h100_ms_by_engine":   msByEngine(p),
		"estimate":                "roofline over the counts, not a measurement; bound: bf16 weights + live bf16 KV at the full bandwidth: " + r.String(),
		"extrapolated":            fmt.Sprintf("counted at %d and %d layers, extrapolated linearly to %d", dp.CountedLayers[0], dp.CountedLayers[1], dp.Shape.Opts.Layers),
	}
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
				out = append(out, DecodeShape{Name: name, Opts: model.Qwen3_1_7B(), Batch: batch, Context: ctx, Graphs: graphs})
			}
		}
	}
	return out
}

// WriteDecodeProfiles counts every decode shape on b and writes one JSON
// object per shape (asJSON) or a table to w.
func WriteDecodeProfiles(w io.Writer, b *Backend, asJSON bool) error {
	shapes := DecodeShapes()
	header := "decode step profile (counted; tokens/s are ESTIMATES against the bandwidth bound of bf16 weights + live KV; -graph: the step as a CUDA graph replay, nodes: the ops it replays)\n" +
		fmt.Sprintf("%-32s %9s %6s %6s %9s %9s %9s %11s %11s %7s", "shape", "launches", "nodes", "syncs", "GB read", "bound GB",
			"est ms", "est tok/s", "bound tok/s", "of bound")
	return writeProfiles(w, asJSON, header, len(shapes), func(i int) (map[string]any, string, error) {
		s := shapes[i]
		dp, err := ProfileDecodeStep(b, s)
		if err != nil {
			return nil, "", err
		}
		j := dp.JSON(H100)
		return j, fmt.Sprintf("%-32s %9d %6d %6d %9.2f %9.2f %9.2f %11.0f %11.0f %6.1f%%", s.Name, j["launches_per_step"], j["graph_nodes_per_step"], j["host_syncs_per_step"],
			j["bytes_per_step"].(float64)/1e9, dp.BoundBytes/1e9, j["est_ms_per_step"], j["est_tok_s"], j["bound_tok_s"],
			100*j["est_fraction_of_bound"].(float64)), nil
	})
}
