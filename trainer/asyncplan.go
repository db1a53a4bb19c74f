package trainer

// The memory plan of a generation rank (dist.rollout_ranks): the policy
// for products and the sampler's KV cache, nothing of the update.

import (
	"fmt"
	"strings"
)

// GenerationPlan is b (a training rank's budget from planFor) as a
// generation rank holds it: the policy's weights — bf16 where products
// are bf16 (the input embedding fp32, as model.Freeze keeps it), fp32
// otherwise — and the KV cache; no reference, gradients, moments,
// activations or collective buffer.
func GenerationPlan(b Budget) Budget {
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
	g.Plan = MemoryPlan{Weights: weights, KVCache: p.KVCache, Logits: p.Logits}
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
