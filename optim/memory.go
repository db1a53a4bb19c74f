package optim

import "github.com/gdrotrain/gdrotrain/model"

// Memory is what one rank holds, in bytes, for the parameters it trains:
// their fp32 weights (or masters), gradients and AdamW moments, and ZeRO's
// collective buffer.
type Memory struct {
	Weights, Gradients, Moments int64
	// GatherBuffer is ZeRO's collective buffer: one padded copy of the
	// largest parameter (cuda.Comm's reduce-scatter and all-gather).
	GatherBuffer int64
}

// PlanMemory is Memory for mc's policy on one of world ranks at ZeRO
// stage zero, computed before anything is allocated. One process, or
// zero 0: everything whole (4 bytes a parameter each for weights and
// gradients, 8 for the moments). ZeRO-1 keeps 1/world of the moments
// (each parameter's ⌈n/world⌉ elements at most) plus the collective
// buffer; with mastersSharded (bf16 products and dist.shard_masters) also
// only 1/world of the fp32 masters of the matrices but the embedding
// (MasterSharded). ZeRO-2 also replaces the whole gradient by the window
// (WindowBytes) plus 1/world of it.
func PlanMemory(mc *model.Config, world, zero int, mastersSharded bool) Memory {
	const f32 = 4
	params := mc.NumParams() * f32
	m := Memory{Weights: params, Gradients: params, Moments: 2 * params}
	if world <= 1 || zero < 1 {
		return m
	}
	var moments, largest, grads, weights int64
	for _, np := range model.ParamShapes(mc) {
		n := int64(1)
		for _, d := range np.Shape {
			n *= int64(d)
		}
		chunk := (n + int64(world) - 1) / int64(world)
		moments += 2 * chunk * f32
		grads += chunk * f32
		largest = max(largest, chunk*int64(world)*f32)
		if mastersSharded && MasterSharded(np) {
			weights += chunk * f32
		} else {
			weights += n * f32
		}
	}
	m.Moments, m.GatherBuffer, m.Weights = moments, largest, weights
	if zero >= 2 {
		m.Gradients = grads + WindowBytes(mc)
	}
	return m
}
