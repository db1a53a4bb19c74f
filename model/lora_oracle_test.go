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
			b, c := m.B, m.Cfg
			lens := []int{5, 4, 2}
			segs, pos := oraclePack(lens)
			n, C := len(pos), c.HiddenSize
			var fwd, grad oracleWorst
			for l := range m.P.Layers {
				rng := rand.New(rand.NewPCG(uint64(l), 78))
				xHost, doutHost := oracleNormal(rng, n*C), oracleNormal(rng, n*C)
				x, out, dx := b.New(n, C), b.New(n, C), b.New(n, C)
				b.Upload(x, xHost)
				b.Upload(dx, doutHost)
				a := m.newLayerActs(n, true)
				a.lora.tmp = m.newLoRATmp(n)
				m.layerForward(l, a, x, out, pos, kvPlan{segs: segs})
				grads := NewAdapters(b, c, &lc)
				fg := frozenGrads{C: b.New(C), D: b.New(c.HeadDim)}
				m.layerBackward(l, a, m.newLayerGrads(n), dx, &Pass{pos: pos, segs: segs}, fg.layer(), &grads.Adapters[l])
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				o := newOracleGraph(t, c, lens)
				w := o.layerParams(m, l)
				xNode := o.leaf("x", n, C, oracleF64(xHost))
				outNode := o.layer(xNode, w)
				cost := o.must(G.Sum(o.must(G.HadamardProd(outNode, o.input(n, C, oracleF64(doutHost))))))
				vals, want := o.run(cost, outNode)
				name := fmt.Sprintf("layer %d", l)
				oracleCheck(t, name+" output", oracleDownload(b, out), vals[0], oracleForwardTol, &fwd)
				oracleCheck(t, name+" ∂J/∂x", oracleDownload(b, dx), want["x"], oracleGradTol, &grad)
				checked := 0
				for _, np := range grads.Named(c) {
					if !strings.HasPrefix(np.Name, fmt.Sprintf("model.layers.%d.", l)) {
						continue
					}
					oracleCheck(t, name+" ∂J/∂"+np.Name, oracleDownload(b, *np.Ptr), want[np.Name], oracleGradTol, &grad)
					checked++
				}
				if checked != 2*len(lc.Targets) {
					t.Fatalf("%s: %d adapter gradients checked, want %d", name, checked, 2*len(lc.Targets))
				}
				o.selfCheck(cost, want, rng)
			}
			t.Logf("forward: %v", &fwd)
			t.Logf("gradients: %v", &grad)
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
