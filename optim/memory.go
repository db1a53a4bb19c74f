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
	return planShapes(model.ParamShapes(mc), world, zero, mastersSharded, WindowBytes(mc))
}

// PlanAdapters is Memory for LoRA adapters of lc on mc (the parameters an
// adapters-only run trains): ZeRO shards them as any parameter, and
// ZeRO-2's window is the whole adapter gradient (zero2.go).
func PlanAdapters(mc *model.Config, lc *model.LoRAConfig, world, zero int) Memory {
	shapes := model.AdapterShapes(mc, lc)
	return planShapes(shapes, world, zero, false, 4*shapesNumel(shapes))
}

func shapesNumel(shapes []model.NamedParam) int64 {
	var n int64
	for _, np := range shapes {
		n += int64(numel(np.Shape))
	}
	return n
}

// planShapes is Memory for parameters of these shapes; window is ZeRO-2's
// gradient window in bytes.
func planShapes(shapes []model.NamedParam, world, zero int, mastersSharded bool, window int64) Memory {
	const f32 = 4
	params := shapesNumel(shapes) * f32
	m := Memory{Weights: params, Gradients: params, Moments: 2 * params}
	if world <= 1 || zero < 1 {
		return m
	}
	var moments, largest, grads, weights int64
	for _, np := range shapes {
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
		m.Gradients = grads + window
	}
	return m
}
