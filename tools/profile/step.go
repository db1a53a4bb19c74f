package profile

// Profiling one optimizer step of a model shape: forward, the per-token
// gradient of a token-mean loss, backward, gradient clipping and AdamW, as
// the trainer runs them. A full-size shape (Qwen3-1.7B, 8 rows × 2k
// tokens) is too much arithmetic for the CPU emulator, so the step is
// counted at one and at two decoder layers and extrapolated: every count
// is linear in the depth (the per-layer ops repeat; embedding, head, loss
// and optimizer bookkeeping do not), so counts(L) = counts(1) + (L−1) ×
// (counts(2) − counts(1)). On the emulator, GDROTRAIN_EMU_COUNT_ONLY=1
// skips the arithmetic itself.

import (
	"encoding/json"
	"fmt"
	"github.com/gdrotrain/gdrotrain/grpo"
	"io"
	"math/rand/v2"
	"os"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// StepProfile is the profile of one optimizer step of a shape.
type StepProfile struct {
	Shape         string
	Rows, Tokens  int
	Layers        int          // the shape's depth, which Step is extrapolated to
	CountedLayers [2]int       // the depths actually run
	First         cuda.Profile // the first step at CountedLayers[1] (allocations, tables)
	Step          cuda.Profile // the second step, extrapolated to Layers (DeviceAllocs: as counted at CountedLayers[1])
	ModelFLOPs    float64      // the step's useful arithmetic (bench.TrainFLOPs)
	// Forward is a forward alone on the same rows, its pass released, as
	// the trainer computes the old and the reference log-probs
	// (trainer.logProbsOf), extrapolated to Layers.
	Forward cuda.Profile
}

// TrainStep counts one optimizer step of s on b, at one and two
// layers, extrapolated to s.Opts.Layers.
func TrainStep(b *cuda.Backend, s bench.Shape) (StepProfile, error) {
	sp := StepProfile{Shape: s.Name, Rows: s.Batch, Tokens: s.Batch * s.SeqLen, Layers: s.Opts.Layers,
		CountedLayers: [2]int{1, 2}, ModelFLOPs: bench.TrainFLOPs(s)}
	var at, fwd [2]cuda.Profile
	for i, L := range sp.CountedLayers {
		o := s.Opts
		o.Layers = L
		first, step, err := profileAt(b, o, s)
		if err != nil {
			return sp, fmt.Errorf("profile %s at %d layers: %w", s.Name, L, err)
		}
		at[i], fwd[i] = step.step, step.forward
		sp.First = first
	}
	perLayer := at[1].Sub(at[0])
	sp.Step = at[0].Extrapolate(perLayer, s.Opts.Layers-sp.CountedLayers[0])
	sp.Forward = fwd[0].Extrapolate(fwd[1].Sub(fwd[0]), s.Opts.Layers-sp.CountedLayers[0])
	// Allocations, buffers left live and leaks are not per-layer counts
	// (a steady-state step's are all 0): they are reported as counted at
	// the deeper depth.
	sp.Step.DeviceAllocs, sp.Step.LiveBuffers, sp.Step.Leaked = at[1].DeviceAllocs, at[1].LiveBuffers, at[1].Leaked
	return sp, nil
}

// counted are a steady-state optimizer step's counts and a log-prob
// forward's on the same rows.
type counted struct{ step, forward cuda.Profile }

// profileAt runs two optimizer steps of o and returns the first one's
// counts and the second's, then counts a forward alone.
func profileAt(b *cuda.Backend, o model.RandomOptions, s bench.Shape) (first cuda.Profile, step counted, err error) {
	cfg, err := o.Config()
	if err != nil {
		return first, step, err
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0)}
	if _, err := m.ShadowWeights(); err != nil { // as the trainer does
		return first, step, err
	}
	grads := model.NewParams(b, cfg)
	opt := optim.NewAdamW(b, cfg, optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	rng := rand.New(rand.NewPCG(3, 3))
	seqs := make([]model.Sequence, s.Batch)
	for i := range seqs {
		toks := make([]int32, s.SeqLen)
		for j := range toks {
			toks[j] = int32(rng.IntN(cfg.VocabSize))
		}
		seqs[i] = model.Sequence{Tokens: toks, Start: s.SeqLen - s.ResponseTokens}
	}
	if err := b.Err(); err != nil {
		return first, step, err
	}
	if s.Exact { // precision.exact_logprobs: batch-invariant forwards (Backward turns it off)
		defer b.SetBatchInvariant(b.IsBatchInvariant())
		b.SetBatchInvariant(true)
	}
	d := b.Device()
	d.ReleaseCache() // each depth starts from an empty allocator cache
	for i := 0; i < 2; i++ {
		before := d.Profile()
		cuda.PrintSitesTo(nil)
		if err := optimizerStep(m, seqs, grads, opt); err != nil {
			return first, step, err
		}
		if i == 1 && cuda.SitesOn() {
			fmt.Fprintf(os.Stderr, "# %d×%d at %d layers: the steady-state step by op and call site (GDROTRAIN_PROFILE_SITES)\n", s.Batch, s.SeqLen, o.Layers)
			cuda.PrintSitesTo(os.Stderr)
		}
		if i == 0 {
			first = d.Profile().Sub(before)
		} else {
			step.step = d.Profile().Sub(before)
		}
	}
	before := d.Profile()
	pass, err := m.Forward(seqs)
	if err != nil {
		return first, step, err
	}
	pass.Release() // only the log-probs are wanted
	step.forward = d.Profile().Sub(before)
	return first, step, b.Err()
}

// optimizerStep is the trainer's update on one micro-batch: gradients
// zeroed, the forward with the fused head (train.fused_head, the default:
// the GRPO loss's per-token derivative computed on the device and the LM
// head's backward run on the forward's logits), backward, clipping, AdamW.
func optimizerStep(m *model.Model, seqs []model.Sequence, grads *model.Params, opt *optim.AdamW) error {
	optim.ZeroGrads(m.B, m.Cfg, grads)
	total := 0
	for _, s := range seqs {
		total += len(s.Tokens) - s.Start
	}
	loss := &model.TokenLoss{Surrogate: grpo.Surrogate{ClipLow: 0.2, ClipHigh: 0.28, DualClip: 3, KLCoef: 0.001}, GA: 1,
		Old: make([]float32, total), Ref: make([]float32, total), Adv: make([]float64, total), Denom: make([]float64, total)}
	for k := range total {
		loss.Adv[k], loss.Denom[k] = 1, float64(total)
	}
	pass, err := m.ForwardLoss(seqs, loss, grads)
	if err != nil {
		return err
	}
	if err := m.Backward(pass, nil, grads); err != nil {
		return err
	}
	if _, err := optim.ClipGradNorm(m.B, m.Cfg, grads, 1); err != nil {
		return err
	}
	if err := opt.Update(m.B, m.Cfg, m.P, grads, 1e-6); err != nil {
		return err
	}
	return m.B.Err()
}

// JSON returns the profile as one flat object with the estimate on r.
func (sp StepProfile) JSON(r cuda.Roofline) map[string]any {
	p := sp.Step
	est := p.EstSeconds(r)
	estFA2 := p.EstSecondsAttentionOn(cuda.H100FA2Measured)
	estFA3 := p.EstSecondsAttentionOn(cuda.H100FA3Measured)
	return map[string]any{
		"shape": sp.Shape, "rows": sp.Rows, "tokens": sp.Tokens, "layers": sp.Layers,
		"counted_layers":           sp.CountedLayers,
		"launches":                 p.Launches,
		"gemm_calls":               p.GEMMs,
		"memsets":                  p.Memsets,
		"host_syncs":               p.HostSyncs,
		"device_allocs":            p.DeviceAllocs, // counted at CountedLayers[1], not extrapolated
		"device_allocs_first_step": sp.First.DeviceAllocs,
		"live_buffers_added":       p.LiveBuffers, // buffers a step leaves allocated: 0 when every temporary is released
		"leaked_buffers":           p.Leaked,
		"h2d_bytes":                p.H2DBytes,
		"d2h_bytes":                p.D2HBytes,
		"flops_tensor_core":        p.FlopsTensorCore(),
		"flops_cuda_core":          p.FlopsCUDACore(),
		"flops_attention_tc":       p.FlopsFlash(),                // fused attention on tensor cores, forward and backward (in flops_tensor_core)
		"flops_attention_cuda":     p.Flops[cuda.EngineAttention], // attention kernels on CUDA cores (in flops_cuda_core)
		"tensor_core_fraction":     p.TensorCoreFraction(),
		"model_flops":              sp.ModelFLOPs,
		"est_h100_ms":              1e3 * est,
		"est_h100_ms_forward":      1e3 * sp.Forward.EstSeconds(r), // a log-prob forward alone on the same rows
		"est_h100_ms_by_engine":    msByEngine(p),
		"dram_gb_by_engine":        gbByEngine(p), // the ops' estimated DRAM traffic
		"est_mfu":                  sp.ModelFLOPs / (est * r.BF16TFLOPs * 1e12),
		// The sensitivity to the attention's assumed rate: FA2's measured ones.
		"est_h100_ms_fa2_attention": 1e3 * estFA2,
		"est_mfu_fa2_attention":     sp.ModelFLOPs / (estFA2 * r.BF16TFLOPs * 1e12),
		"estimate_fa2_attention":    cuda.H100FA2Measured.String(),
		// And at FA3's (the warpgroup-MMA kernels' upper bound).
		"est_h100_ms_fa3_attention": 1e3 * estFA3,
		"est_mfu_fa3_attention":     sp.ModelFLOPs / (estFA3 * r.BF16TFLOPs * 1e12),
		"estimate_fa3_attention":    cuda.H100FA3Measured.String(),
		"estimate":                  "roofline over the counts, not a measurement: " + r.String(),
		"extrapolated":              fmt.Sprintf("counted at %d and %d layers, extrapolated linearly to %d", sp.CountedLayers[0], sp.CountedLayers[1], sp.Layers),
	}
}

// TrainShapes are the shapes `gdrotrain bench --profile` counts: a
// Qwen3-1.7B training step of 8 rows × 2k tokens and of 2 rows × 8k
// (16k tokens each, a 256-token prompt per row).
func TrainShapes() []bench.Shape {
	o := bench.Qwen3_1_7B()
	return []bench.Shape{
		{Name: "qwen3-1.7b-8x2k", Opts: o, Batch: 8, SeqLen: 2048, ResponseTokens: 2048 - 256},
		{Name: "qwen3-1.7b-2x8k", Opts: o, Batch: 2, SeqLen: 8192, ResponseTokens: 8192 - 256},
		{Name: "qwen3-1.7b-8x2k-exact", Opts: o, Batch: 8, SeqLen: 2048, ResponseTokens: 2048 - 256, Exact: true},
		{Name: "qwen3-1.7b-2x8k-exact", Opts: o, Batch: 2, SeqLen: 8192, ResponseTokens: 8192 - 256, Exact: true},
	}
}

// WriteTrain counts every training shape on b and writes one JSON object
// per shape (asJSON) or a table to w; it returns the profiles.
func WriteTrain(w io.Writer, b *cuda.Backend, asJSON bool) ([]StepProfile, error) {
	shapes := TrainShapes()
	header := fmt.Sprintf("step profile (counted by the backend; time and MFU are ESTIMATES: %s)\n", cuda.H100) +
		fmt.Sprintf("%-18s %9s %7s %6s %7s %8s %9s %9s %7s %9s %7s", "shape", "launches", "gemms", "syncs",
			"allocs", "TC frac", "attn TF", "total TF", "est ms", "est MFU", "layers")
	var out []StepProfile
	err := writeProfiles(w, asJSON, header, len(shapes), func(i int) (map[string]any, string, error) {
		s := shapes[i]
		sp, err := TrainStep(b, s)
		if err != nil {
			return nil, "", err
		}
		out = append(out, sp)
		j, p := sp.JSON(cuda.H100), sp.Step
		return j, fmt.Sprintf("%-18s %9d %7d %6d %7d %8.3f %9.2f %9.2f %7.1f %8.1f%% %4d of %d\n%-18s %s: est %.1f ms, MFU %.1f%%\n%-18s %s: est %.1f ms, MFU %.1f%%", s.Name, p.Launches, p.GEMMs,
			p.HostSyncs, p.DeviceAllocs, p.TensorCoreFraction(), (p.FlopsFlash()+p.Flops[cuda.EngineAttention])/1e12,
			(p.FlopsTensorCore()+p.FlopsCUDACore())/1e12, j["est_h100_ms"], 100*j["est_mfu"].(float64), sp.CountedLayers[1], sp.Layers,
			"", "  attention at FlashAttention-2's measured H100 rates (31 % / 17 % of bf16)", j["est_h100_ms_fa2_attention"],
			100*j["est_mfu_fa2_attention"].(float64),
			"", "  attention at FlashAttention-3's measured H100 rates (warpgroup MMA: 67 % / 67 % of bf16)", j["est_h100_ms_fa3_attention"],
			100*j["est_mfu_fa3_attention"].(float64)), nil
	})
	return out, err
}

// writeProfiles writes n profiles, each one JSON object (asJSON) or one
// line of a table under header.
func writeProfiles(w io.Writer, asJSON bool, header string, n int, row func(i int) (map[string]any, string, error)) error {
	if !asJSON {
		fmt.Fprintln(w, header)
	}
	enc := json.NewEncoder(w)
	for i := 0; i < n; i++ {
		j, line, err := row(i)
		if err != nil {
			return err
		}
		if asJSON {
			err = enc.Encode(j)
		} else {
			_, err = fmt.Fprintln(w, line)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gbByEngine is the ops' DRAM traffic by engine, in GB.
func gbByEngine(p cuda.Profile) map[string]float64 {
	out := map[string]float64{}
	for e, b := range p.Bytes {
		out[cuda.Engine(e).String()] = b / 1e9
	}
	return out
}

// msByEngine is the estimate's op time by engine, plus launches and syncs.
func msByEngine(p cuda.Profile) map[string]float64 {
	out := map[string]float64{}
	for e, s := range p.Seconds {
		out[cuda.Engine(e).String()] = 1e3 * s
	}
	out["launch_overhead"] = 1e3 * float64(p.Launches+p.GEMMs+p.Memsets) * cuda.H100.LaunchUs * 1e-6
	out["host_syncs"] = 1e3 * float64(p.HostSyncs) * cuda.H100.SyncUs * 1e-6
	return out
}
