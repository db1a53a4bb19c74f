package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestLoRAStepMatchesCPU: a LoRA training step (forward with every
// projection adapted, the adapters' backward, clipping and AdamW on the
// adapters alone) on the device against the CPU backend, with random
// adapters (A as PEFT draws it, B nonzero), in fp32 and under bf16 products
// with the base frozen in bf16 as a LoRA run holds it (the CPU then reads
// the same bf16-rounded base). Tolerances as TestTrainingStepMatchesCPU's.
func TestLoRAStepMatchesCPU(t *testing.T) {
	lc := &model.LoRAConfig{Rank: 4, Alpha: 8, Targets: model.LoRAModules}
	for _, c := range stepCases {
		t.Run(string(c.prec), func(t *testing.T) {
			o := model.DefaultTiny()
			o.Vocab = 300
			cpu, gpu := tinyPair(t, c.prec, o)
			if c.prec == BF16 {
				roundBase(t, cpu)
				if frozen, err := gpu.Freeze(); err != nil || !frozen {
					t.Fatalf("freeze the base: %v (frozen %v)", err, frozen)
				}
			}
			for _, m := range []*model.Model{cpu, gpu} {
				// A as PEFT draws it, B random (PEFT's zeros would leave
				// A's gradient and every term zero).
				m.A = model.NewAdapters(m.B, m.Cfg, lc)
				model.InitAdapters(m.B, m.Cfg, m.A, 5)
				rng := rand.New(rand.NewPCG(5, 6))
				for _, np := range m.A.Named(m.Cfg) {
					if np.Shape[1] != lc.Rank {
						continue // an A
					}
					host := make([]float32, (*np.Ptr).Numel())
					for i := range host {
						host[i] = float32(0.1 * rng.NormFloat64())
					}
					m.B.Upload(*np.Ptr, host)
				}
				if _, err := m.ShadowWeights(); err != nil {
					t.Fatal(err)
				}
			}
			compareSteps(t, c, o, cpu, gpu, func(m *model.Model) *model.Params {
				return model.NewAdapters(m.B, m.Cfg, lc) // the adapters alone
			})
		})
	}
}

// roundBase rounds m's matrices (not the norms or the input embedding) to
// bf16, as model.Freeze stores them on the device.
func roundBase(t *testing.T, m *model.Model) {
	t.Helper()
	for _, np := range m.P.Named(m.Cfg) {
		if len(np.Shape) < 2 || np.Name == "model.embed_tokens.weight" {
			continue
		}
		host := model.Values(m.B, *np.Ptr)
		for i, v := range host {
			host[i] = model.BF16ToF32(model.F32ToBF16(v))
		}
		m.B.Upload(*np.Ptr, host)
	}
}
