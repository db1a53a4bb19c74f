package cpu_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
)

// fallback is the fast CPU backend seen through Backend and ResidualNormer
// alone: its multi-tensor ops, token-loss derivatives and memory pool are
// hidden, so the model and the optimizer take the paths a backend without
// them takes.
type fallback struct {
	model.Backend
	model.ResidualNormer
}

// TestCapabilitiesChangeNoValue: training steps through the fused head
// (TokenLossGrad), gradient clipping (SumSquaresAll), the update (AdamWAll)
// and the cleared gradients (ZeroAll), with temporaries recycled by the
// pool, leave the weights, the moments and the log-probs bit for bit as
// the fallback paths do, on one worker and on seven (whose splits fall
// inside tensors).
func TestCapabilitiesChangeNoValue(t *testing.T) {
	for _, workers := range []int{1, 7} {
		b := cpu.NewBackendWith(cpu.Options{Workers: workers})
		for _, c := range []struct {
			name string
			b    model.Backend
		}{{"capabilities", b}, {"fallback", fallback{b, b}}} {
			caps := model.TrainerCapsOf(c.b)
			_, pool := c.b.(model.MemoryPool)
			if got := caps.Multi != nil && caps.TokenLoss != nil && pool; got != (c.name == "capabilities") {
				t.Fatalf("%s: capabilities visible: %v", c.name, got)
			}
		}
		want := trainSteps(t, fallback{b, b})
		got := trainSteps(t, b)
		for i := range want {
			if !slices.EqualFunc(got[i], want[i], func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				t.Errorf("%d workers: result %d (of weights, moments, log-probs) differs from the fallback's", workers, i)
			}
		}
	}
}

// trainSteps runs three GRPO steps on a tiny model and returns the
// weights, both moments and each step's log-probs.
func trainSteps(t *testing.T, b model.Backend) [][]float32 {
	t.Helper()
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 2, 300
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0.1)}
	grads := model.NewParams(b, cfg)
	opt := optim.NewAdamW(b, cfg, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	seqs := []model.Sequence{{Tokens: make([]int32, 40), Start: 10}, {Tokens: make([]int32, 33), Start: 5}}
	M := 0
	for i := range seqs {
		for j := range seqs[i].Tokens {
			seqs[i].Tokens[j] = int32((7*i + 13*j + j*j) % cfg.VocabSize)
		}
		M += len(seqs[i].Tokens) - seqs[i].Start
	}
	l := &model.TokenLoss{Surrogate: grpo.Surrogate{ClipLow: 0.2, ClipHigh: 0.28, KLCoef: 0.04}, GA: 1,
		Old: make([]float32, M), Ref: make([]float32, M), Adv: make([]float64, M), Denom: make([]float64, M)}
	for k := range M {
		l.Old[k], l.Ref[k] = -5.5+0.01*float32(k%7), -5.7
		l.Adv[k], l.Denom[k] = float64(k%3)-1, float64(M)
	}
	var out [][]float32
	for range 3 {
		optim.ZeroGrads(b, cfg, grads)
		pass, err := m.ForwardLoss(seqs, l, grads)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Concat(pass.LogProbs...))
		if err := m.Backward(pass, nil, grads); err != nil {
			t.Fatal(err)
		}
		if _, err := optim.ClipGradNorm(b, cfg, grads, 0.5); err != nil {
			t.Fatal(err)
		}
		if err := opt.Update(b, cfg, m.P, grads, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*model.Params{m.P, opt.M, opt.V} {
		var ts []*model.Tensor
		p.Each(cfg, func(_ string, x *model.Tensor) { ts = append(ts, x) })
		out = append(out, model.Values(b, ts...))
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
