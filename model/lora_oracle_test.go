package model

// The adapters' forward and backward (lora_pass.go) against gorgonia's
// symbolic differentiation of y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ written from the
// equation in the oracle graph (oracle_test.go: oracleGraph.proj), in
// float64, with the oracle's tolerances and its own finite-difference
// self-check. B is random, not PEFT's zeros, so every term and every
// gradient is exercised.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
)

// layerAdapters adds layer l's adapters of m (if any) to lw as leaves
// named as in the adapter set's name table.
func (o *oracleGraph) layerAdapters(m *Model, l int, lw *oracleLayerW) {
	if m.A == nil {
		return
	}
	lw.lora, lw.loraScale = map[string][2]*G.Node{}, float64(m.A.LoRA.Scale())
	la, r := &m.A.Adapters[l], m.A.LoRA.Rank
	for _, t := range LoRAModules {
		ad := la.adapter(t)
		if !ad.On() {
			continue
		}
		in, out := loraDims(m.Cfg, t)
		pre := fmt.Sprintf("model.layers.%d.%s.", l, loraModulePaths[t])
		lw.lora[t] = [2]*G.Node{
			o.param(pre+"lora_A.weight", r, in, m.B, ad.A),
			o.param(pre+"lora_B.weight", out, r, m.B, ad.B),
		}
	}
}

// randomAdapters gives m adapters of lc with every entry drawn N(0, 0.2²).
func randomAdapters(t *testing.T, m *Model, lc *LoRAConfig, seed uint64) {
	t.Helper()
	if err := lc.Validate(); err != nil {
		t.Fatal(err)
	}
	m.A = NewAdapters(m.B, m.Cfg, lc)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, np := range m.A.Named(m.Cfg) {
		host := make([]float32, numel(np.Shape))
		for i := range host {
			host[i] = float32(0.2 * rng.NormFloat64())
		}
		m.B.Upload(*np.Ptr, host)
	}
}

// loraCases are target sets with every stacking: all seven, gaps inside
// the q/k/v and gate/up stacks, single projections.
var loraCases = []LoRAConfig{
	{Rank: 3, Alpha: 6, Targets: []string{"q", "k", "v", "o", "gate", "up", "down"}},
	{Rank: 2, Alpha: 1, Targets: []string{"k", "up", "o"}},
	{Rank: 4, Alpha: 16, Targets: []string{"v", "down", "gate"}},
	{Rank: 1, Alpha: 2, Targets: []string{"q"}},
}

func TestOracleLoRALayer(t *testing.T) {
	for ci, lc := range loraCases {
		t.Run(strings.Join(lc.Targets, ","), func(t *testing.T) {
			m := oracleModel(t, false, 21)
			randomAdapters(t, m, &lc, uint64(ci))
			oracleLayers(t, m, []int{5, 4, 2}, 78)
		})
	}
}

// TestOracleLoRAModel: the whole model with adapters (tied and untied,
// with and without recomputation): log-probs, entropies and every
// adapter's gradient; the gradient set holds the adapters alone.
func TestOracleLoRAModel(t *testing.T) {
	for _, tied := range []bool{false, true} {
		for _, rec := range []bool{false, true} {
			t.Run(fmt.Sprintf("tied=%v,recompute=%v", tied, rec), func(t *testing.T) {
				m := oracleModel(t, tied, 5)
				m.Recompute = rec
				randomAdapters(t, m, &loraCases[1], 7)
				if n := len(m.Trainable().Named(m.Cfg)); n != 2*3*m.Cfg.NumHiddenLayers {
					t.Fatalf("the trainable set lists %d tensors, want the %d adapters", n, 2*3*m.Cfg.NumHiddenLayers)
				}
				oracleModelCheck(t, m)
			})
		}
	}
}
