// Package memplan plans a run's memory before anything large is
// allocated, so a run that cannot fit stops at once with a message saying
// how much it needs and what to change (rather than dying mid-step). Both
// backends hold float32 tensors (the GPU's weights are also AdamW's fp32
// master copy), so one plan serves both; it is checked against the memory
// of the device in hand. The trainer fills Settings from its config
// (trainer.PlanBudget, trainer.OpenBackend).
package memplan

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// Settings are what the plan reads of a run's config.
type Settings struct {
	// SeqLen is the longest sequence: the longest prompt plus the most
	// new tokens of training or validation samples.
	SeqLen, MicroBatchRows int
	FusedHead, Recompute   bool
	LoRA                   *model.LoRAConfig // nil: full fine-tuning
	// MaxSlots and CUDAGraphs size the sampler's KV cache; KVPoolBytes is
	// a paged cache's pool (0: not paged).
	MaxSlots    int
	CUDAGraphs  bool
	KVPoolBytes int64
	// NeedRef: the run keeps a frozen reference model.
	NeedRef, ShardMasters bool
	// RefBF16, KVBF16, KVFP8 and BF16Products: the precisions asked for
	// (they apply on a GPU; KVBF16 and KVFP8 on the CPU too, where auto
	// has resolved to fp32).
	RefBF16, KVBF16, KVFP8, BF16Products bool
}

// Plan is the estimated peak memory of a run, in bytes. Generation
// and training take turns in a step: the sampler's KV cache is released
// when Generate returns, before the training forward allocates its
// activations (and the device pool frees idle blocks of other sizes
// before it fails an allocation), so the peak is the state that persists
// plus the larger of the two phases.
type Plan struct {
	// Base is a LoRA run's frozen base weights, which are also its
	// reference (Weights, Gradients and Moments are then the adapters').
	Base                                   int64
	Weights, Reference, Gradients, Moments int64
	WeightCopies                           int64 // bf16 copies of the policy's matrices for products (GPU, bf16 products)
	Activations, KVCache, Logits           int64
	// GatherBuffer is ZeRO-1's all-gather buffer after AdamW: one padded
	// copy of the largest parameter (cuda.Comm.GatherShards).
	GatherBuffer int64
}

// Persistent is what the run holds throughout: the policy, the
// reference, the gradients and the optimizer state.
func (p Plan) Persistent() int64 {
	return p.Base + p.Weights + p.Reference + p.Gradients + p.Moments + p.WeightCopies
}

// Generation is what sampling adds: the KV cache.
func (p Plan) Generation() int64 { return p.KVCache }

// Training is what the update adds: the saved activations, the LM head's
// logit chunks and ZeRO's collective buffer.
func (p Plan) Training() int64 { return p.Activations + p.Logits + p.GatherBuffer }

// Total is the peak: the persistent state plus the larger phase.
func (p Plan) Total() int64 { return p.Persistent() + max(p.Generation(), p.Training()) }

func (p Plan) String() string {
	g := func(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
	gather := ""
	if p.GatherBuffer > 0 {
		gather = ", ZeRO collective buffer " + g(p.GatherBuffer)
	}
	base := ""
	if p.Base > 0 {
		base = "frozen base (LoRA) " + g(p.Base) + ", adapter "
	}
	return fmt.Sprintf(base+"weights %s, reference %s, gradients %s, AdamW moments %s, bf16 weight copies %s, activations %s, KV cache %s, logits %s%s; "+
		"peak %s (persistent %s + the larger of generation %s and training %s)",
		g(p.Weights), g(p.Reference), g(p.Gradients), g(p.Moments), g(p.WeightCopies), g(p.Activations), g(p.KVCache), g(p.Logits), gather,
		g(p.Total()), g(p.Persistent()), g(p.Generation()), g(p.Training()))
}

// planTokens is a micro-batch's tokens at the longest sequence.
func planTokens(s Settings) int64 {
	return int64(s.MicroBatchRows) * int64(s.SeqLen)
}

// headRows is the LM head's rows of logits and of logit gradients held at
// once in a training pass (model.HeadRows).
func headRows(mc *model.Config, s Settings) (logits, grads int) {
	return model.HeadRows(mc, int(planTokens(s)), s.FusedHead, s.LoRA == nil)
}

// kvSlots is the sampler's cache slots: one more under CUDA graphs (the
// padding rows' spare, model.DecodeGraph).
func kvSlots(s Settings) int64 {
	n := int64(s.MaxSlots) // continuous batching: n may exceed the slots
	if s.CUDAGraphs {
		n++
	}
	return n
}

// kvPool is the paged KV cache's page pool in bytes (sampling.kv_cache_gib;
// 0: not paged). The CUDA backend creates pages up to it as slots grow and
// the graphs' spare slot holds its pages within it, so the pool, not
// kvSlots × the longest sequence, is what the cache can take.
func kvPool(s Settings) int64 { return s.KVPoolBytes }

// Estimate is a run's peak memory in one process on the CPU (fp32
// throughout), from the model's config and the run's settings.
func Estimate(mc *model.Config, s Settings) Plan {
	const f32 = 4
	params := mc.NumParams() * f32
	C, F := int64(mc.HiddenSize), int64(mc.IntermediateSize)
	HD, GD := int64(mc.NumAttentionHeads*mc.HeadDim), int64(mc.NumKeyValueHeads*mc.HeadDim)
	seq := int64(s.SeqLen)
	tokens := planTokens(s)
	// Saved per token per layer by the training forward (model's
	// layerActs): the layer's input, xMid and the statistics, fp32
	// everywhere, and the rest (halfPerToken), fp32 on the CPU; plus the
	// backward's scratch gradients for one layer (layerGrads).
	H, G := int64(mc.NumAttentionHeads), int64(mc.NumKeyValueHeads)
	perLayer := (2*C+2+2*H+G)*f32 + halfPerToken(mc)
	scratch := (2*C + 3*F + 3*HD + 4*GD) * f32
	opt := optim.PlanMemory(mc, 1, 0, false)
	p := Plan{
		Weights:     opt.Weights,
		Gradients:   opt.Gradients,
		Moments:     opt.Moments,
		Activations: tokens * (perLayer*int64(mc.NumHiddenLayers) + scratch + 4*C*f32),
		KVCache:     kvSlots(s) * seq * int64(mc.NumHiddenLayers) * 2 * GD * f32,
	}
	// The LM head's logits (one chunk) and their gradient (one chunk, or
	// the fused head's group of chunks: model.HeadRows), fp32 as on the CPU.
	lr, gr := headRows(mc, s)
	p.Logits = int64(lr+gr) * int64(mc.VocabSize) * f32
	if s.Recompute {
		// Each layer's input is kept; one layer's activations are rebuilt
		// at a time (plus the backward's scratch output).
		p.Activations = tokens * (C*f32*int64(mc.NumHiddenLayers) + perLayer + scratch + 5*C*f32)
	}
	if s.NeedRef {
		p.Reference = params
	}
	if lc := s.LoRA; lc != nil {
		// The base is frozen and is the reference; gradients, moments
		// and masters are the adapters'. Each adapted projection saves
		// its rank's low-rank input per token and layer; the backward
		// adds their gradients, and the terms pass through one shared
		// scratch (model's loraActs).
		ad := optim.PlanAdapters(mc, lc, 1, 0)
		p.Base, p.Reference = params, 0
		p.Weights, p.Gradients, p.Moments = ad.Weights, ad.Gradients, ad.Moments
		low := int64(lc.Rank*len(lc.Targets)) * f32
		layers := int64(mc.NumHiddenLayers)
		if s.Recompute {
			layers = 1
		}
		p.Activations += tokens * (low*(layers+1) + max(HD, GD, min(F, C))*f32)
	}
	return p
}

// FrozenBytes is the base model held as model.Freeze leaves it: matrices
// bf16, the input embedding and the norms fp32.
func FrozenBytes(mc *model.Config) int64 {
	var n int64
	for _, np := range model.ParamShapes(mc) {
		k := int64(1)
		for _, d := range np.Shape {
			k *= int64(d)
		}
		if len(np.Shape) < 2 || np.Name == "model.embed_tokens.weight" {
			n += 4 * k
		} else {
			n += 2 * k
		}
	}
	return n
}

// halfPerToken is the fp32 bytes per token of a layer's saved activations
// that a GPU under bf16 products keeps in bf16 (model.HalfPrecision):
// the normed inputs of products (xn1, xn2), the fused q/k/v product and
// attention's inputs and output (qkv, qn, kn, v, att), and the MLP's
// (gate and up, h).
func halfPerToken(mc *model.Config) int64 {
	C, F := int64(mc.HiddenSize), int64(mc.IntermediateSize)
	HD, GD := int64(mc.NumAttentionHeads*mc.HeadDim), int64(mc.NumKeyValueHeads*mc.HeadDim)
	return (2*C + 3*HD + 4*GD + 3*F) * 4
}

// Budget is a memory plan set against the memory of the device it will run
// on: the GPU's free memory for the CUDA backend, MemAvailable for the CPU.
type Budget struct {
	Plan      Plan
	NeedRef   bool
	Device    string // backend name
	Available int64  // bytes; 0 when unknown
	// RefBF16, KVBF16: the reference model and KV cache are held in bf16;
	// ActBF16: the saved activations too, but for the residual stream and
	// the statistics.
	RefBF16, KVBF16, ActBF16 bool
	// KVFP8: the KV cache is fp8 (e4m3 codes and per-token scales).
	KVFP8 bool
	// KVPaged: the KV cache is the page pool of sampling.kv_cache_gib.
	KVPaged bool
	// World is the number of data-parallel ranks the plan is per rank of
	// (0 or 1: one process); ZeRO the sharding stage (1: the AdamW
	// moments and fp32 masters split over the ranks, 2: the gradients
	// too); MastersSharded: the policy's matrices are bf16 only, each
	// rank holding the fp32 master of its part (ForWorld).
	World, ZeRO    int
	MastersSharded bool
	masters        bool // dist.shard_masters
	model          *model.Config
	lora           *model.LoRAConfig // nil: full fine-tuning
}

// ForWorld makes b the plan of one of world data-parallel ranks: every
// rank holds the whole policy (its product copies), reference, activations
// and KV cache of its own micro-batches and slots; the weights (or fp32
// masters), gradients, moments and collective buffer are the optimizer
// strategy's at ZeRO stage zero (optim.PlanMemory). Masters are sharded
// where the policy's matrices have bf16 product copies and
// dist.shard_masters is on.
func (b *Budget) ForWorld(world, zero int) {
	b.World, b.ZeRO = world, zero
	mc := b.model
	if world <= 1 || zero < 1 || mc == nil {
		return
	}
	b.MastersSharded = b.Plan.WeightCopies > 0 && b.masters && b.lora == nil
	opt := optim.PlanMemory(mc, world, zero, b.MastersSharded)
	if b.lora != nil {
		opt = optim.PlanAdapters(mc, b.lora, world, zero)
	}
	b.Plan.Weights, b.Plan.Gradients, b.Plan.Moments, b.Plan.GatherBuffer = opt.Weights, opt.Gradients, opt.Moments, opt.GatherBuffer
}

// Check refuses a plan that will not fit, saying what to change.
func (b Budget) Check() error { return Check(b.Plan, b.Available) }

// Report is the dry-run text: every part, the total, the device's memory
// and the verdict.
func (b Budget) Report() string {
	g := func(x int64) string { return fmt.Sprintf("%8.2f GiB", float64(x)/(1<<30)) }
	p := b.Plan
	var sb strings.Builder
	if b.World > 1 {
		fmt.Fprintf(&sb, "memory plan per rank of %d (data parallel, ZeRO-%d) on %s:\n", b.World, b.ZeRO, b.Device)
	} else {
		fmt.Fprintf(&sb, "memory plan on %s:\n", b.Device)
	}
	dt := func(bf bool) string {
		if bf {
			return "bf16"
		}
		return "fp32"
	}
	if p.Base > 0 {
		fmt.Fprintf(&sb, "  %-38s %s\n", "LoRA base ("+map[bool]string{false: "fp32", true: "bf16"}[b.RefBF16]+", frozen; = reference)", g(p.Base))
	}
	weights := rowName(b, 1, true, "fp32 embedding, norms; masters 1/%d", "weights (fp32, also the master copy)")
	if b.lora != nil {
		weights = fmt.Sprintf("LoRA adapters r=%d (fp32)", b.lora.Rank)
	}
	for _, row := range []struct {
		name string
		v    int64
	}{
		{weights, p.Weights},
		{refRow(b, dt(b.RefBF16)), p.Reference},
		{rowName(b, 2, false, "gradients (fp32, 1 layer + 1/%d)", "gradients (fp32)"), p.Gradients},
		{rowName(b, 1, false, "AdamW moments (fp32, 1/%d)", "AdamW moments (fp32)"), p.Moments},
		{rowName(b, 1, true, "bf16 weights, whole on all %d", "weight copies for products (bf16)"), p.WeightCopies},
		{"activations (" + map[bool]string{false: "fp32", true: "bf16, residual fp32"}[b.ActBF16] + ")", p.Activations},
		{kvRow(b, map[bool]string{false: dt(b.KVBF16), true: "fp8 e4m3 + scales"}[b.KVFP8]), p.KVCache}, {"logits (LM-head chunks)", p.Logits},
	} {
		if row.name != "" {
			fmt.Fprintf(&sb, "  %-38s %s\n", row.name, g(row.v))
		}
	}
	if p.GatherBuffer > 0 {
		fmt.Fprintf(&sb, "  %-38s %s\n", "ZeRO collective buffer (fp32)", g(p.GatherBuffer))
	}
	fmt.Fprintf(&sb, "  %-38s %s\n", "persistent (weights … moments)", g(p.Persistent()))
	fmt.Fprintf(&sb, "  %-38s %s\n", "generation (KV cache)", g(p.Generation()))
	fmt.Fprintf(&sb, "  %-38s %s\n", "training (activations, logits, ZeRO)", g(p.Training()))
	fmt.Fprintf(&sb, "  %-38s %s\n", "peak (persistent + larger phase)", g(p.Total()))
	if b.Available > 0 {
		fmt.Fprintf(&sb, "  %-38s %s\n", "available", g(b.Available))
	} else {
		fmt.Fprintf(&sb, "  %-38s %s\n", "available", "unknown")
	}
	sb.WriteString(b.verdict())
	return sb.String()
}

// verdict is the plan's last line: whether it fits the device's memory.
func (b Budget) verdict() string {
	switch err := b.Check(); {
	case err != nil:
		return fmt.Sprintf("verdict: does not fit: %v\n", err)
	case b.Available <= 0:
		return "verdict: cannot tell (the device's memory is unknown)\n"
	default:
		return fmt.Sprintf("verdict: fits, %.2f GiB to spare\n", float64(b.Available-b.Plan.Total())/(1<<30))
	}
}

// refRow names the reference's row ("" hides it: a LoRA run's reference
// is its base).
func refRow(b Budget, dtype string) string {
	if b.lora != nil {
		return ""
	}
	return "reference model (" + dtype + ")"
}

// rowName names a plan row: sharded (a format of the world size) when the
// run shards that part at its ZeRO stage (and, for masters, when the
// matrices have bf16 copies), whole otherwise.
func rowName(b Budget, stage int, masters bool, sharded, whole string) string {
	if b.World > 1 && b.ZeRO >= stage && (!masters || b.MastersSharded) {
		return fmt.Sprintf(sharded, b.World)
	}
	return whole
}

// For plans for the CPU or a GPU (whose reference, KV cache, activations
// and weight copies may be bf16) named device.
func For(mc *model.Config, s Settings, gpu bool, device string) Budget {
	need := s.NeedRef
	bud := Budget{Plan: Estimate(mc, s), NeedRef: need, Device: device, model: mc, masters: s.ShardMasters,
		lora: s.LoRA}
	if gpu && s.RefBF16 {
		bud.Plan.Reference /= 2 // frozen matrices in bf16 (norms, embedding are small)
		bud.RefBF16 = need
		if bud.lora != nil {
			bud.Plan.Base = FrozenBytes(mc)
			bud.RefBF16 = true
		}
	}
	// The KV cache's format is the same on the CPU (Settings resolve
	// precision.kv_cache auto per device); paging maps pages on a GPU only.
	if fp8 := s.KVFP8; s.KVBF16 || fp8 {
		bud.Plan.KVCache /= 2
		bud.KVBF16 = !fp8
		if fp8 { // codes and scales per row, against bf16's 2 bytes an element
			G, D := int64(mc.NumKeyValueHeads), int64(mc.HeadDim)
			bud.Plan.KVCache = bud.Plan.KVCache / (2 * G * D) * model.FP8KVRowBytes(int(G), int(D))
			bud.KVFP8 = true
		}
		if pool := kvPool(s); gpu && pool > 0 {
			// Paged: the page pool, never more than every slot in full.
			bud.Plan.KVCache = min(pool, bud.Plan.KVCache)
			bud.KVPaged = true
		}
	}
	if gpu && s.BF16Products {
		bud.Plan.WeightCopies = bud.Plan.Weights / 2 // model.ShadowWeights
		if bud.lora != nil && s.RefBF16 && mc.TieWordEmbeddings {
			// The adapters', and a tied LM head's (Freeze keeps the input
			// embedding fp32; the head's product reads the copy).
			bud.Plan.WeightCopies += 2 * int64(mc.VocabSize) * int64(mc.HiddenSize)
		}
		// Every activation but the residual stream and the statistics is
		// bf16 (halfPerToken): every layer's set, or the one recomputed set.
		layers := int64(mc.NumHiddenLayers)
		if s.Recompute {
			layers = 1
		}
		bud.Plan.Activations -= planTokens(s) * layers * halfPerToken(mc) / 2
		// The logits' gradient is bf16 too (model.HalfPrecision).
		_, gr := headRows(mc, s)
		bud.Plan.Logits -= int64(gr) * int64(mc.VocabSize) * 2
		bud.ActBF16 = true
	}
	return bud
}

// Available reads MemAvailable from /proc/meminfo (0 if unknown).
func Available() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if strings.HasPrefix(sc.Text(), "MemAvailable:") {
			if _, err := fmt.Sscanf(strings.TrimPrefix(sc.Text(), "MemAvailable:"), "%d", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// Check refuses a plan that exceeds the available memory avail (0:
// unknown, accepted).
func Check(p Plan, avail int64) error {
	if avail <= 0 || p.Total() <= avail {
		return nil
	}
	return fmt.Errorf("out of memory before starting: the run needs about %.2f GiB (%s) but %.2f GiB is available; "+
		"lower train.micro_batch_rows, sampling.max_slots or sampling.max_new_tokens, bound the KV cache (sampling.kv_cache_gib), use a smaller model, "+
		"or spread the run over several GPUs with dist.zero_stage 2 (the per-rank plan: --dry-run --world-size N)",
		float64(p.Total())/(1<<30), p, float64(avail)/(1<<30))
}

// kvRow names the plan's KV cache row.
func kvRow(b Budget, dtype string) string {
	if b.KVPaged {
		return "KV cache (" + dtype + ", paged pool)"
	}
	return "KV cache (" + dtype + ")"
}

// Generation is b (a training rank's budget from For) as a
// generation rank holds it: the policy's weights — bf16 where products
// are bf16 (the input embedding fp32, as model.Freeze keeps it), fp32
// otherwise — and the KV cache; no reference, gradients, moments,
// activations or collective buffer.
func Generation(b Budget) Budget {
	g := b
	g.World, g.ZeRO, g.MastersSharded, g.NeedRef = 0, 0, false, false
	p := b.Plan
	weights := p.Weights
	if mc := b.model; mc != nil {
		weights = mc.NumParams() * 4
		if p.WeightCopies > 0 {
			embed := int64(mc.VocabSize) * int64(mc.HiddenSize)
			weights = (mc.NumParams()-embed)*2 + embed*4
		}
	}
	g.Plan = Plan{Weights: weights, KVCache: p.KVCache, Logits: p.Logits}
	return g
}

// GenerationReport is the dry-run text of a generation rank's plan.
func GenerationReport(b Budget) string {
	g := func(x int64) string { return fmt.Sprintf("%8.2f GiB", float64(x)/(1<<30)) }
	p := b.Plan
	dt := "fp32"
	if mc := b.model; mc != nil && p.Weights < mc.NumParams()*4 {
		dt = "bf16; fp32 embedding, norms"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "memory plan per generation rank on %s:\n", b.Device)
	for _, row := range []struct {
		name string
		v    int64
	}{{"policy (" + dt + ")", p.Weights}, {kvRow(b, map[bool]string{false: "fp32", true: "bf16"}[b.KVBF16]), p.KVCache},
		{"logits (LM-head chunks)", p.Logits}, {"peak", p.Weights + p.KVCache + p.Logits}} {
		fmt.Fprintf(&sb, "  %-38s %s\n", row.name, g(row.v))
	}
	sb.WriteString(b.verdict())
	return sb.String()
}
