package trainer

import (
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestPlanForWorld: with ZeRO-1 over W ranks a rank holds 1/W of the AdamW
// moments (up to each parameter's padding, < W elements per parameter)
// plus one padded copy of the largest parameter; everything else is what
// one process holds. Checked on the real Qwen3 shapes.
func TestPlanForWorld(t *testing.T) {
	for _, size := range []string{"1.7b", "4b", "8b"} {
		mc, err := model.LoadConfig(filepath.Join("..", "docs", "qwen3-shapes", size))
		if err != nil {
			t.Fatal(err)
		}
		cfg := Default()
		one := planFor(mc, cfg, true, "cuda")
		for _, tc := range []struct{ world, zero int }{{1, 1}, {8, 0}, {2, 1}, {8, 1}} {
			b := planFor(mc, cfg, true, "cuda")
			b.ForWorld(tc.world, tc.zero)
			if tc.world <= 1 || tc.zero == 0 {
				if b.Plan != one.Plan {
					t.Errorf("%s world %d ZeRO-%d: plan changed: %+v, want %+v", size, tc.world, tc.zero, b.Plan, one.Plan)
				}
				continue
			}
			params := int64(len(model.ParamShapes(mc)))
			lo, hi := one.Plan.Moments/int64(tc.world), one.Plan.Moments/int64(tc.world)+2*4*params*int64(tc.world)
			if b.Plan.Moments < lo || b.Plan.Moments > hi {
				t.Errorf("%s world %d: moments %d, want in [%d, %d]", size, tc.world, b.Plan.Moments, lo, hi)
			}
			embed := int64(mc.VocabSize) * int64(mc.HiddenSize) * 4
			if b.Plan.GatherBuffer < embed || b.Plan.GatherBuffer > embed+4*int64(tc.world) {
				t.Errorf("%s world %d: gather buffer %d, want the embedding's %d padded", size, tc.world, b.Plan.GatherBuffer, embed)
			}
			rest, restOne := b.Plan, one.Plan
			rest.Moments, rest.GatherBuffer, restOne.Moments = 0, 0, 0
			if rest != restOne {
				t.Errorf("%s world %d: parts other than the moments changed", size, tc.world)
			}
		}
	}
}
