package trainer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// TestPlanForWorld: over W ranks, ZeRO-1 keeps 1/W of the AdamW moments
// and, where the matrices have bf16 product copies, of their fp32 masters
// (up to each parameter's padding, < W elements), plus one padded copy of
// the largest parameter; ZeRO-2 also 1/W of the gradients plus the
// one-layer window. Everything else is what one process holds. Checked on
// the real Qwen3 shapes, with bf16 and fp32 products.
func TestPlanForWorld(t *testing.T) {
	for _, size := range []string{"1.7b", "4b", "8b"} {
		mc, err := model.LoadConfig(filepath.Join("..", "docs", "qwen3-shapes", size))
		if err != nil {
			t.Fatal(err)
		}
		for _, prec := range []string{"bf16", "fp32"} {
			cfg := Default()
			cfg.Precision.MatMul = prec
			one := planFor(mc, cfg, true, "cuda")
			for _, tc := range []struct{ world, zero int }{{1, 1}, {8, 0}, {2, 1}, {8, 1}, {8, 2}, {1, 2}} {
				b := planFor(mc, cfg, true, "cuda")
				b.ForWorld(tc.world, tc.zero)
				name := fmt.Sprintf("%s %s world %d ZeRO-%d", size, prec, tc.world, tc.zero)
				if tc.world <= 1 || tc.zero == 0 {
					if b.Plan != one.Plan {
						t.Errorf("%s: plan changed: %+v, want %+v", name, b.Plan, one.Plan)
					}
					continue
				}
				W, params := int64(tc.world), int64(len(model.ParamShapes(mc)))
				pad := 4 * params * W // < W elements of padding per parameter
				within := func(what string, got, want int64) {
					if got < want || got > want+pad {
						t.Errorf("%s: %s %d, want %d (+ padding ≤ %d)", name, what, got, want, pad)
					}
				}
				within("moments", b.Plan.Moments, one.Plan.Moments/W)
				embed := int64(mc.VocabSize) * int64(mc.HiddenSize) * 4
				within("collective buffer", b.Plan.GatherBuffer, embed)
				rest, restOne := b.Plan, one.Plan
				rest.Moments, rest.GatherBuffer, restOne.Moments = 0, 0, 0
				if prec == "bf16" {
					// The embedding and the norms whole, the rest 1/W.
					var whole int64
					for _, np := range model.ParamShapes(mc) {
						if !optim.MasterSharded(np) {
							n := int64(4)
							for _, d := range np.Shape {
								n *= int64(d)
							}
							whole += n
						}
					}
					within("weights", b.Plan.Weights, whole+(one.Plan.Weights-whole)/W)
					if !b.MastersSharded {
						t.Errorf("%s: masters not sharded under bf16 products", name)
					}
					rest.Weights, restOne.Weights = 0, 0
				}
				if tc.zero == 2 {
					within("gradients", b.Plan.Gradients, one.Plan.Gradients/W+optim.WindowBytes(mc))
					rest.Gradients, restOne.Gradients = 0, 0
				}
				if rest != restOne {
					t.Errorf("%s: other parts changed: %+v, want %+v", name, rest, restOne)
				}
			}
		}
	}
}
