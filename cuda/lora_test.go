package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// TestLoRAStepMatchesCPU: a LoRA training step (forward with every
// projection adapted, the adapters' backward, clipping and AdamW on the
// adapters alone) on the device against the CPU backend, with random
// adapters (A as PEFT draws it, B nonzero), in fp32 and under bf16 products with the base frozen in
// bf16 as a LoRA run holds it (the CPU then reads the same bf16-rounded
// base). Tolerances as TestTrainingStepMatchesCPU's.
func TestLoRAStepMatchesCPU(t *testing.T) {
	lc := &model.LoRAConfig{Rank: 4, Alpha: 8, Targets: model.LoRAModules}
	for _, c := range []struct {
		prec              Precision
		logp, grad, param numcheck.Tol
	}{
		{FP32, numcheck.Tol{Atol: 1e-4, Rtol: 1e-4}, numcheck.Tol{Atol: 1e-4, Rtol: 2e-3}, numcheck.Tol{Atol: 1e-6, Rtol: 1e-5}},
		{BF16, numcheck.Tol{Atol: 5e-2, Rtol: 2e-2}, numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}, numcheck.Tol{Atol: 1e-4, Rtol: 1e-3}},
	} {
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
			rng := rand.New(rand.NewPCG(1, 2))
			seqs := []model.Sequence{{Tokens: randTokens(rng, 40, o.Vocab), Start: 10}, {Tokens: randTokens(rng, 23, o.Vocab), Start: 5}}
			var dl [][]float32
			for _, s := range seqs {
				row := make([]float32, len(s.Tokens)-s.Start)
				for i := range row {
					row[i] = float32(rng.NormFloat64()) / 20
				}
				dl = append(dl, row)
			}
			type result struct {
				logp          []float32
				grads, params map[string][]float32
				norm          float64
			}
			run := func(m *model.Model) result {
				pass, err := m.Forward(seqs)
				if err != nil {
					t.Fatal(err)
				}
				var r result
				for i := range pass.LogProbs {
					r.logp = append(r.logp, pass.LogProbs[i]...)
				}
				grads := model.NewLike(m.B, m.Cfg, m.A)
				if err := m.Backward(pass, dl, grads); err != nil {
					t.Fatal(err)
				}
				r.grads = snapshot(m, grads)
				if r.norm, err = optim.ClipGradNorm(m.B, m.Cfg, grads, 0.5); err != nil {
					t.Fatal(err)
				}
				opt := optim.NewAdamWFor(m.B, m.Cfg, m.A, optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 0.1, WeightDecay: 0.01})
				if err := opt.Update(m.B, m.Cfg, m.A, grads, 1e-2); err != nil {
					t.Fatal(err)
				}
				r.params = snapshot(m, m.A)
				return r
			}
			want, got := run(cpu), run(gpu)
			compare(t, "log-probs", got.logp, want.logp, c.logp)
			if len(want.grads) != 2*len(lc.Targets)*o.Layers {
				t.Fatalf("%d gradient tensors, want the %d adapters", len(want.grads), 2*len(lc.Targets)*o.Layers)
			}
			for name := range want.grads {
				compare(t, "grad "+name, got.grads[name], want.grads[name], c.grad)
				compare(t, "updated "+name, got.params[name], want.params[name], c.param)
			}
			if rel := (got.norm - want.norm) / want.norm; rel > c.grad.Rtol || rel < -c.grad.Rtol {
				t.Errorf("grad norm %.6g, cpu %.6g (rel %.1e)", got.norm, want.norm, rel)
			}
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
		host := download(m.B, *np.Ptr)
		for i, v := range host {
			host[i] = model.BF16ToF32(model.F32ToBF16(v))
		}
		m.B.Upload(*np.Ptr, host)
	}
}
