package profile

// The estimated step time of the one-step-off pipeline (issue 35;
// docs/data-parallel.md, "Generation ranks"): on W GPUs of one node, the
// synchronous step (generation on all W, then training on all W) beside
// the overlapped one at train.max_off_policy_steps 1 (R GPUs generate step
// t+1 while W−R train step t, then rank 0 broadcasts the new weights to
// the generation ranks), for every split R = 1 … W−1, from the counted
// training and decode steps. ESTIMATES, not measurements: the counts'
// roofline times (cuda.Roofline) put together under the assumptions below,
// each of which EstimatePipeline's output and the profile's table state.
//
//   - Generation on G GPUs: the step's response tokens over G × slots
//     (sampling.max_slots, every slot busy) at the decode step time of that
//     many slots at the mean context (prompt + half a response), plus a
//     tail: one longest response (max_new_tokens) decoded alone at batch 1
//     at its mean context (prompt + half of max_new_tokens). The sampler's
//     continuous batching keeps slots busy until the step's last rollouts;
//     the tail stands for them (pessimistic where they finish together).
//   - A decode step at (slots, context) is interpolated bilinearly between
//     the counted graph steps (or eager ones where sampling.cuda_graphs is
//     off) at batch 1 and the smallest counted batch ≥ slots, at the
//     smallest and largest counted context: the counts are affine in the
//     batch, in the context and in their product (weights once, a row of
//     work per slot, keys and values per slot and token), which bilinear
//     interpolation reproduces exactly up to the roofline's max per op.
//   - Training on G GPUs: the step's tokens (prompt + response per row)
//     over G, each costing the counted 8×2k step per token (forward,
//     backward, AdamW) for each PPO epoch, one counted forward per token
//     for the old log-probs and one for the reference's (when kl_coef > 0),
//     and with train.recompute one more forward in each epoch's backward.
//     The counted step runs AdamW once per 16k tokens where the trainer
//     runs it once per mini-batch (sharded by ZeRO): pessimistic by at
//     most that share. ZeRO's collectives are left out.
//   - A model that is not the counted one (Qwen3-8B beside the counted
//     Qwen3-1.7B) is scaled: training and forwards by the ratio of model
//     FLOPs (bench.TrainFLOPs) on the counted shape, each decode step by
//     the ratio of its bandwidth bound (bf16 weights + live keys and values
//     at that batch and context).
//   - The weight sync: rank 0 broadcasts the payload of trainer's weight
//     link under bf16 products (every matrix but the input embedding as
//     bf16, the embedding and the norms fp32) at NVLinkGBs, once per step,
//     on the training side's path. The hash of the payload on both sides
//     (a device-to-host copy and SHA-256, docs/data-parallel.md) is left
//     out: a device-side hash is what the estimate assumes.
//   - The mean lengths are assumptions (a config gives only the limits):
//     AssumedPromptTokens per prompt, AssumedResponseFraction of
//     max_new_tokens per response.

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// NVLinkGBs is the bandwidth, in GB/s, assumed for rank 0's broadcast of
// the weights to the generation ranks within one node: an H100 SXM5's
// NVLink 4 moves 450 GB/s each way (900 GB/s both ways together), the
// most a broadcast's bus bandwidth reaches there.
const NVLinkGBs = 450

// AssumedPromptTokens is the mean prompt length assumed for the paper's
// math prompts (data.max_prompt_length is only a limit), and
// AssumedResponseFraction the mean response length as a fraction of
// max_new_tokens.
const (
	AssumedPromptTokens     = 300
	AssumedResponseFraction = 0.5
)

// PipelineWorld is the number of GPUs the profile's estimate splits: one
// node of 8.
const PipelineWorld = 8

// Workload is one training step of a config on World GPUs.
type Workload struct {
	Config                       string              // the config it is read from
	Model                        string              // the model's name
	Opts                         model.RandomOptions // the model's shapes
	World                        int                 // GPUs
	Rows                         int                 // rollouts per step: prompts_per_step × n_mean
	PromptTokens, ResponseTokens int                 // mean tokens per row (assumed)
	MaxNewTokens                 int                 // the tail: one longest response, decoded alone
	Slots                        int                 // sampling.max_slots: concurrent sequences per generating GPU
	Graphs                       bool                // sampling.cuda_graphs
	LogProbForwards              int                 // forwards before the update: old log-probs, and the reference's
	PPOEpochs                    int                 // passes of the update over the rows
	Recompute                    bool                // train.recompute: one more forward in each backward
	// Exact is precision.exact_logprobs: the exact training step and
	// decode steps (graphed, as the sampler runs them without
	// exact_logprobs_check), and no π_old forward (LogProbForwards counts
	// the reference's alone).
	Exact bool
}

// PipelineRates are one GPU's times the estimate is built from.
type PipelineRates struct {
	TrainTokenS   float64 // an optimizer step (forward, backward, AdamW) per token
	ForwardTokenS float64 // a forward alone per token
	DecodeStepS   float64 // a decode step of Slots slots at the mean context
	TailStepS     float64 // a decode step of one slot at the tail's mean context
	SyncBytes     float64 // the weights rank 0 broadcasts after each step
	Source        string  // counted, or how they were scaled
}

// Split is the overlapped step with GenerationGPUs generating and
// TrainingGPUs training.
type Split struct {
	GenerationGPUs, TrainingGPUs int
	GenerationS                  float64 // generation on GenerationGPUs
	TrainingS                    float64 // training on TrainingGPUs plus the weight sync
	StepS                        float64 // max(GenerationS, TrainingS)
}

// Bound is the phase that sets the split's step time.
func (s Split) Bound() string {
	if s.GenerationS >= s.TrainingS {
		return "generation"
	}
	return "training"
}

// PipelineEstimate is the synchronous step and the overlapped one.
type PipelineEstimate struct {
	Workload     Workload
	Rates        PipelineRates
	GenerationS  float64 // generation on all World GPUs
	TrainingS    float64 // training on all World GPUs
	SyncS        float64 // the weight broadcast (overlapped only)
	SynchronousS float64 // GenerationS + TrainingS
	Splits       []Split // R = 1 … World−1 generation GPUs; none in exact mode
	Best         Split   // the split with the shortest step
	Ratio        float64 // Best.StepS / SynchronousS (< 1: the overlap is faster)
}

// noOverlapExact is why exact mode has no overlapped step: the trainer
// refuses precision.exact_logprobs at train.max_off_policy_steps 1
// (trainer/config.go), whose generation ranks sample with an earlier
// step's weights, so their log-probs would not be π_old.
const noOverlapExact = "exact mode runs on-policy only (train.max_off_policy_steps 0): no overlapped step"

// GenerationSeconds is the generation of the step's rows on gpus GPUs.
func (w Workload) GenerationSeconds(r PipelineRates, gpus int) float64 {
	steps := float64(w.Rows) * float64(w.ResponseTokens) / (float64(gpus) * float64(w.Slots))
	return steps*r.DecodeStepS + float64(w.MaxNewTokens)*r.TailStepS
}

// TrainingSeconds is the log-prob forwards and the update of the step's
// rows on gpus GPUs (ZeRO's collectives left out).
func (w Workload) TrainingSeconds(r PipelineRates, gpus int) float64 {
	update := r.TrainTokenS
	if w.Recompute {
		update += r.ForwardTokenS
	}
	perToken := float64(w.LogProbForwards)*r.ForwardTokenS + float64(w.PPOEpochs)*update
	return float64(w.Rows) * float64(w.PromptTokens+w.ResponseTokens) / float64(gpus) * perToken
}

// EstimatePipeline is the synchronous step of w and its overlapped step at
// every split of w.World GPUs (none in exact mode: noOverlapExact), from r.
func EstimatePipeline(w Workload, r PipelineRates) PipelineEstimate {
	e := PipelineEstimate{Workload: w, Rates: r, GenerationS: w.GenerationSeconds(r, w.World),
		TrainingS: w.TrainingSeconds(r, w.World), SyncS: r.SyncBytes / (NVLinkGBs * 1e9)}
	e.SynchronousS = e.GenerationS + e.TrainingS
	if w.Exact {
		return e
	}
	for g := 1; g < w.World; g++ {
		s := Split{GenerationGPUs: g, TrainingGPUs: w.World - g, GenerationS: w.GenerationSeconds(r, g),
			TrainingS: w.TrainingSeconds(r, w.World-g) + e.SyncS}
		s.StepS = math.Max(s.GenerationS, s.TrainingS)
		e.Splits = append(e.Splits, s)
		if len(e.Splits) == 1 || s.StepS < e.Best.StepS {
			e.Best = s
		}
	}
	e.Ratio = e.Best.StepS / e.SynchronousS
	return e
}

// PipelineAssumptions are the assumptions the estimate rests on, one line
// each, as the profile prints them.
func PipelineAssumptions() []string {
	return []string{
		fmt.Sprintf("mean row: %d prompt tokens, %.0f %% of max_new_tokens generated (assumed; a config gives only limits)",
			AssumedPromptTokens, 100*AssumedResponseFraction),
		"generation on G GPUs: response tokens / (G × sampling.max_slots) decode steps at the mean context (interpolated between the counted batch-1/64, 1k/4k graph steps), plus a tail of one max_new_tokens response alone at batch 1",
		"training on G GPUs: tokens / G × (the counted 8×2k step per token per PPO epoch, + a counted forward per token for the old and for the reference log-probs, + one with train.recompute); AdamW counted once per 16k tokens; ZeRO's collectives left out",
		"Qwen3-8B scaled from Qwen3-1.7B's counts: training by model FLOPs, decode by bytes read per step",
		fmt.Sprintf("weight sync: the link's payload (bf16 matrices, fp32 embedding and norms) broadcast at %d GB/s over NVLink, on the training side; the payload's hashing (≈ 2 GB/s today) left out", NVLinkGBs),
		"synchronous: generation on all GPUs, then training on all; overlapped (max_off_policy_steps 1): max(generation on R, training on W−R + sync)",
		"exact mode (precision.exact_logprobs): the counted 8×2k-exact step (exact forward, default backward), no π_old forward, the reference's and train.recompute's forwards at the default rate (exact mode paused), graphed exact decode steps (LogSoftmaxGather on the drawn tokens inside the graph) at the same counted corners as today's; " + noOverlapExact,
	}
}

// RunSettings are the values of a training config a workload reads. The
// caller resolves the config (cmd/gdrotrain: configs and trainer.Resolve),
// since this package sits below the trainer (docs/architecture.md).
type RunSettings struct {
	Rows            int  // train.prompts_per_step × gdro.rollout.n_mean
	MaxNewTokens    int  // sampling.max_new_tokens
	Slots           int  // sampling.max_slots
	Graphs          bool // sampling.cuda_graphs
	LogProbForwards int  // 2 with a reference policy (trainer.NeedsReference), else 1
	PPOEpochs       int  // train.ppo_epochs
	Recompute       bool // train.recompute
	Exact           bool // precision.exact_logprobs (then LogProbForwards leaves out the π_old forward)
}

// PaperConfigs are the names of the paper's GRPO configs
// (configs/paper-grpo-1.7b.yaml and paper-grpo-8b.yaml) and their models.
var PaperConfigs = []struct {
	Config, Model string
	Opts          model.RandomOptions
}{{"paper-grpo-1.7b", "Qwen3-1.7B", bench.Qwen3_1_7B()}, {"paper-grpo-8b", "Qwen3-8B", bench.Qwen3_8B()},
	{"recipe-exact-grpo-1.7b", "Qwen3-1.7B", bench.Qwen3_1_7B()}}

// PaperWorkloads are the paper's GRPO configs on PipelineWorld GPUs, their
// settings read by settings (the resolved built-in configs); the mean
// lengths are the assumed ones.
func PaperWorkloads(settings func(config string) (RunSettings, error)) ([]Workload, error) {
	var out []Workload
	for _, c := range PaperConfigs {
		rs, err := settings(c.Config)
		if err != nil {
			return nil, err
		}
		out = append(out, Workload{Config: c.Config, Model: c.Model, Opts: c.Opts, World: PipelineWorld,
			Rows: rs.Rows, PromptTokens: AssumedPromptTokens,
			ResponseTokens: int(math.Round(AssumedResponseFraction * float64(rs.MaxNewTokens))),
			MaxNewTokens:   rs.MaxNewTokens, Slots: rs.Slots, Graphs: rs.Graphs,
			LogProbForwards: rs.LogProbForwards, PPOEpochs: rs.PPOEpochs, Recompute: rs.Recompute, Exact: rs.Exact})
	}
	return out, nil
}

// RatesFrom are w's rates from a counted training step and counted decode
// steps (of one model; w's model, or another one it is scaled from).
func RatesFrom(w Workload, train StepProfile, train2 bench.Shape, decode []DecodeProfile, r cuda.Roofline) (PipelineRates, error) {
	wcfg, err := w.Opts.Config()
	if err != nil {
		return PipelineRates{}, err
	}
	scale := 1.0 // training: model FLOPs of w's model over the counted one's, on the counted shape
	if !sameShape(w.Opts, train2.Opts) {
		s := train2
		s.Opts = w.Opts
		scale = bench.TrainFLOPs(s) / bench.TrainFLOPs(train2)
	}
	rates := PipelineRates{TrainTokenS: scale * train.Step.EstSeconds(r) / float64(train.Tokens),
		ForwardTokenS: scale * train.Forward.EstSeconds(r) / float64(train.Tokens), SyncBytes: float64(syncBytes(wcfg))}
	ctx := float64(w.PromptTokens) + float64(w.ResponseTokens)/2
	tailCtx := float64(w.PromptTokens) + float64(w.MaxNewTokens)/2
	var dscale float64
	if rates.DecodeStepS, dscale, err = decodeStepAt(w, wcfg, decode, float64(w.Slots), ctx, r); err != nil {
		return rates, err
	}
	if rates.TailStepS, _, err = decodeStepAt(w, wcfg, decode, 1, tailCtx, r); err != nil {
		return rates, err
	}
	rates.Source = fmt.Sprintf("counted (%s, decode steps of %s)", train.Shape, shapeFamily(decode))
	if scale != 1 || dscale != 1 {
		rates.Source = fmt.Sprintf("scaled from the counts of %s: training ×%.2f (model FLOPs), decode ×%.2f (bytes read per step)",
			train.Shape, scale, dscale)
	}
	return rates, nil
}

// decodeStepAt is the time of a decode step of w's model at batch slots and
// context ctx, interpolated bilinearly between the counted steps (see the
// file's comment), each scaled by the bound bytes of w's model over the
// counted one's where they differ; scale is that ratio at (slots, ctx).
func decodeStepAt(w Workload, wcfg *model.Config, decode []DecodeProfile, slots, ctx float64, r cuda.Roofline) (sec, scale float64, err error) {
	var usable []DecodeProfile
	for _, d := range decode {
		if d.Shape.Graphs == w.Graphs && d.Shape.Exact == w.Exact && !d.Shape.Paged && !d.Shape.FP8 && d.Shape.LoRA == nil {
			usable = append(usable, d)
		}
	}
	var batches, contexts []int
	for _, d := range usable {
		batches, contexts = appendNew(batches, d.Shape.Batch), appendNew(contexts, d.Shape.Context)
	}
	sort.Ints(batches)
	sort.Ints(contexts)
	if len(batches) < 2 || len(contexts) < 2 {
		return 0, 0, fmt.Errorf("pipeline estimate: need decode steps at two batches and two contexts (graphs %v), have batches %v, contexts %v",
			w.Graphs, batches, contexts)
	}
	b0, b1 := batches[0], batches[len(batches)-1]
	for _, b := range batches[1:] {
		if float64(b) >= slots {
			b1 = b
			break
		}
	}
	c0, c1 := contexts[0], contexts[len(contexts)-1]
	at := func(b, c int) (float64, error) {
		for _, d := range usable {
			if d.Shape.Batch == b && d.Shape.Context == c {
				est := d.Step.EstSeconds(r)
				if !sameShape(d.Shape.Opts, w.Opts) {
					est *= boundBytesAt(wcfg, float64(b), float64(c)) / d.BoundBytes
				}
				return est, nil
			}
		}
		return 0, fmt.Errorf("pipeline estimate: no counted decode step at batch %d, context %d (graphs %v)", b, c, w.Graphs)
	}
	var e [2][2]float64
	for i, b := range []int{b0, b1} {
		for j, c := range []int{c0, c1} {
			if e[i][j], err = at(b, c); err != nil {
				return 0, 0, err
			}
		}
	}
	sec = bilinear(e, float64(b0), float64(b1), float64(c0), float64(c1), slots, ctx)
	scale = 1
	if d := usable[0]; !sameShape(d.Shape.Opts, w.Opts) {
		dcfg, err := d.Shape.Opts.Config()
		if err != nil {
			return 0, 0, err
		}
		scale = boundBytesAt(wcfg, slots, ctx) / boundBytesAt(dcfg, slots, ctx)
	}
	return sec, scale, nil
}

// bilinear interpolates (or extrapolates) e, the values at (x0|x1, y0|y1),
// at (x, y).
func bilinear(e [2][2]float64, x0, x1, y0, y1, x, y float64) float64 {
	fx := (x - x0) / (x1 - x0)
	fy := (y - y0) / (y1 - y0)
	lo := e[0][0] + fx*(e[1][0]-e[0][0])
	hi := e[0][1] + fx*(e[1][1]-e[0][1])
	return lo + fy*(hi-lo)
}

// boundBytesAt is boundBytes at a fractional batch and context (bf16 cache).
func boundBytesAt(cfg *model.Config, batch, ctx float64) float64 {
	return 2*float64(matrixParams(cfg)) + batch*ctx*float64(cfg.NumHiddenLayers*2)*float64(kvRowBytes(cfg, false))
}

// syncBytes is the payload of the weight link under bf16 products
// (trainer/asynclink.go): the matrices the optimizer keeps sharded masters
// of as bf16, the rest (the input embedding, the norms) as fp32.
func syncBytes(cfg *model.Config) int64 {
	var n int64
	for _, np := range model.ParamShapes(cfg) {
		w := int64(4)
		if optim.MasterSharded(np) {
			w = 2
		}
		numel := int64(1)
		for _, d := range np.Shape {
			numel *= int64(d)
		}
		n += w * numel
	}
	return n
}

func sameShape(a, b model.RandomOptions) bool {
	return a.Layers == b.Layers && a.Hidden == b.Hidden && a.Intermediate == b.Intermediate && a.Heads == b.Heads &&
		a.KVHeads == b.KVHeads && a.HeadDim == b.HeadDim && a.Vocab == b.Vocab && a.Tied == b.Tied
}

func appendNew(xs []int, x int) []int {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

// shapeFamily names the decode profiles' model by their first shape's name.
func shapeFamily(decode []DecodeProfile) string {
	if len(decode) == 0 {
		return "none"
	}
	name := decode[0].Shape.Name
	if i := strings.Index(name, "-decode"); i > 0 {
		return name[:i]
	}
	return name
}

// PipelineTrainShape is the counted training shape the estimate reads (the
// 8×2k step: rows of about the paper's length).
const PipelineTrainShape = "qwen3-1.7b-8x2k"

// pipelineTrain is the counted training step the estimate reads:
// PipelineTrainShape, or its exact-mode row.
func pipelineTrain(train []StepProfile, exact bool) (StepProfile, bench.Shape, error) {
	name := PipelineTrainShape
	if exact {
		name += "-exact"
	}
	for _, s := range TrainShapes() {
		if s.Name != name {
			continue
		}
		for _, sp := range train {
			if sp.Shape == name {
				return sp, s, nil
			}
		}
	}
	return StepProfile{}, bench.Shape{}, fmt.Errorf("pipeline estimate: no counted training step %s", name)
}

// WritePipeline writes the estimate for every workload (PaperWorkloads)
// from the counted training and decode steps: one JSON object per config
// (asJSON), or a table with the assumptions under it.
func WritePipeline(w io.Writer, train []StepProfile, decode []DecodeProfile, wls []Workload, asJSON bool) error {
	header := fmt.Sprintf("pipeline step on %d GPUs (ESTIMATES from the counts above, not measurements): synchronous = generation on %d, then training on %d; "+
		"overlapped (train.max_off_policy_steps 1, dist.rollout_ranks R) = max(generation on R, training on %d−R + weight sync)\n",
		PipelineWorld, PipelineWorld, PipelineWorld, PipelineWorld) +
		fmt.Sprintf("%-16s %5s %5s %9s %9s %9s %8s %7s %11s %-10s %6s", "config", "rows", "slots", "gen s", "train s", "step s", "bcast ms", "best R", "overlap s", "bound", "ratio")
	ests := make([]PipelineEstimate, len(wls))
	for i, wl := range wls {
		sp, shape, err := pipelineTrain(train, wl.Exact)
		if err != nil {
			return err
		}
		r, err := RatesFrom(wl, sp, shape, decode, cuda.H100)
		if err != nil {
			return err
		}
		if wl.Exact {
			// The forwards besides the update's own (the reference's, and
			// train.recompute's inside the backward) run without exact
			// mode (model.PauseExact): the default step's forward rate.
			def, dshape, err := pipelineTrain(train, false)
			if err != nil {
				return err
			}
			dw := wl
			dw.Exact = false
			dr, err := RatesFrom(dw, def, dshape, decode, cuda.H100)
			if err != nil {
				return err
			}
			r.ForwardTokenS = dr.ForwardTokenS
		}
		ests[i] = EstimatePipeline(wl, r)
	}
	err := writeProfiles(w, asJSON, header, len(ests), func(i int) (map[string]any, string, error) {
		e := ests[i]
		wl, r := e.Workload, e.Rates
		line := fmt.Sprintf("%-16s %5d %5d %9.1f %9.1f %9.1f %8.1f", wl.Config, wl.Rows, wl.Slots,
			e.GenerationS, e.TrainingS, e.SynchronousS, 1e3*e.SyncS)
		overlap := noOverlapExact
		if len(e.Splits) > 0 {
			line += fmt.Sprintf(" %7d %11.1f %-10s %5.2f×", e.Best.GenerationGPUs, e.Best.StepS, e.Best.Bound(), e.Ratio)
			var by []string
			for _, s := range e.Splits {
				by = append(by, fmt.Sprintf("%d: %.1f", s.GenerationGPUs, s.StepS))
			}
			overlap = "overlapped s by R: " + strings.Join(by, ", ")
		} else {
			line += fmt.Sprintf(" %7s %11s %-10s %6s", "-", "-", "-", "-")
		}
		line += fmt.Sprintf("\n  %s, %s; per GPU: step %.1fk tok/s, forward %.1fk tok/s, decode %.0f tok/s at %d slots, tail %.0f tok/s"+
			"\n  %s", wl.Model, r.Source, 1e-3/r.TrainTokenS, 1e-3/r.ForwardTokenS, float64(wl.Slots)/r.DecodeStepS, wl.Slots,
			1/r.TailStepS, overlap)
		return e.JSON(), line, nil
	})
	if err != nil || asJSON {
		return err
	}
	fmt.Fprintln(w, "gen s, train s: on all GPUs; step s: the synchronous step (gen + train); bcast ms: the weight sync; best R: generation GPUs of the best split (8−R train); ratio: overlapped / synchronous (< 1: faster). Assumptions:")
	for _, a := range PipelineAssumptions() {
		fmt.Fprintln(w, "  - "+a)
	}
	return nil
}

// JSON returns the estimate as one flat object.
func (e PipelineEstimate) JSON() map[string]any {
	w := e.Workload
	splits := make([]map[string]any, len(e.Splits))
	for i, s := range e.Splits {
		splits[i] = map[string]any{"generation_gpus": s.GenerationGPUs, "training_gpus": s.TrainingGPUs,
			"est_generation_s": s.GenerationS, "est_training_with_sync_s": s.TrainingS, "est_step_s": s.StepS, "bound": s.Bound()}
	}
	j := map[string]any{
		"pipeline": w.Config, "model": w.Model, "world": w.World, "rows": w.Rows,
		"prompt_tokens": w.PromptTokens, "response_tokens": w.ResponseTokens, "max_new_tokens": w.MaxNewTokens,
		"slots": w.Slots, "cuda_graphs": w.Graphs, "log_prob_forwards": w.LogProbForwards, "ppo_epochs": w.PPOEpochs, "recompute": w.Recompute,
		"train_token_ms":    1e3 * e.Rates.TrainTokenS,
		"forward_token_ms":  1e3 * e.Rates.ForwardTokenS,
		"decode_step_ms":    1e3 * e.Rates.DecodeStepS,
		"tail_step_ms":      1e3 * e.Rates.TailStepS,
		"sync_bytes":        e.Rates.SyncBytes,
		"rates":             e.Rates.Source,
		"est_generation_s":  e.GenerationS,
		"est_training_s":    e.TrainingS,
		"est_synchronous_s": e.SynchronousS,
		"est_sync_s":        e.SyncS,
		"splits":            splits,
		"estimate":          "ESTIMATE from the counted steps' roofline times (" + cuda.H100.Name + "), not a measurement: " + strings.Join(PipelineAssumptions(), "; "),
	}
	if len(e.Splits) == 0 {
		j["no_overlap"] = noOverlapExact
		return j
	}
	j["best_generation_gpus"], j["est_overlapped_s"], j["overlapped_over_synchronous"] = e.Best.GenerationGPUs, e.Best.StepS, e.Ratio
	return j
}
