package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomWeights draws a normal ∂J/∂logp for every scored token of seqs.
func randomWeights(rng *rand.Rand, seqs []Sequence) [][]float32 {
	var w [][]float32
	for _, s := range seqs {
		row := make([]float32, len(s.Tokens)-s.Start)
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		w = append(w, row)
	}
	return w
}

// objective returns J = Σ w·logp for the sequences.
func objective(t *testing.T, m *Model, seqs []Sequence, w [][]float32) float64 {
	p, err := m.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	var j float64
	for i := range w {
		for k := range w[i] {
			j += float64(w[i][k]) * float64(p.LogProbs[i][k])
		}
	}
	return j
}

// TestBackwardFiniteDifferences probes random entries of every parameter with
// central differences of J = Σ w_t log π(token_t). The forward stores float32,
// so the step is large (1e-2) and the tolerance 2e-2 relative to the largest
// probed gradient of the tensor; gorgonia's symbolic gradients (oracle_test)
// and the PyTorch fixture give the tight checks.
func TestBackwardFiniteDifferences(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := tinyModel(t, tied, 11)
		rng := rand.New(rand.NewPCG(3, 4))
		seqs := []Sequence{{Tokens: randomTokens(rng, 9, m.Cfg.VocabSize), Start: 3}, {Tokens: randomTokens(rng, 5, m.Cfg.VocabSize), Start: 1}}
		w := randomWeights(rng, seqs)
		p, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		grads := NewParams(m.B, m.Cfg)
		if err := m.Backward(p, w, grads); err != nil {
			t.Fatal(err)
		}
		gn := grads.Named(m.Cfg)
		for i, np := range m.P.Named(m.Cfg) {
			pt := *np.Ptr
			host := make([]float32, pt.Numel())
			m.B.Download(pt, host)
			g := make([]float32, pt.Numel())
			m.B.Download(*gn[i].Ptr, g)
			var maxG float64
			for _, v := range g {
				maxG = math.Max(maxG, math.Abs(float64(v)))
			}
			for probe := 0; probe < 4; probe++ {
				k := rng.IntN(len(host))
				if np.Name == "model.embed_tokens.weight" || np.Name == "lm_head.weight" {
					// probe a row that matters: an input or target token
					k = int(seqs[0].Tokens[probe+3])*m.Cfg.HiddenSize + rng.IntN(m.Cfg.HiddenSize)
				}
				const h = 1e-2
				orig := host[k]
				host[k] = orig + h
				m.B.Upload(pt, host)
				jp := objective(t, m, seqs, w)
				host[k] = orig - h
				m.B.Upload(pt, host)
				jm := objective(t, m, seqs, w)
				host[k] = orig
				m.B.Upload(pt, host)
				fd := (jp - jm) / (2 * h)
				if d := math.Abs(fd - float64(g[k])); d > 2e-2*maxG+1e-4 {
					t.Errorf("tied=%v %s[%d]: analytic %v, finite difference %v (max |g| %v)", tied, np.Name, k, g[k], fd, maxG)
				}
			}
		}
	}
}

// TestRecomputeSameGradients: activation recomputation repeats the same ops
// on the same inputs, so log-probs and every gradient are bitwise equal to
// the stored-activation backward.
func TestRecomputeSameGradients(t *testing.T) {
	for _, tied := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(5, 6))
		m := tinyModel(t, tied, 21)
		seqs := []Sequence{{Tokens: randomTokens(rng, 17, m.Cfg.VocabSize), Start: 4}, {Tokens: randomTokens(rng, 9, m.Cfg.VocabSize), Start: 2}}
		w := [][]float32{make([]float32, 13), make([]float32, 7)}
		for _, row := range w {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
		}
		run := func(recompute bool) (lp []float32, grads map[string][]float32) {
			m.Recompute = recompute
			p, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			g := NewParams(m.B, m.Cfg)
			if err := m.Backward(p, w, g); err != nil {
				t.Fatal(err)
			}
			grads = map[string][]float32{}
			g.Each(m.Cfg, func(name string, x *Tensor) {
				v := make([]float32, x.Numel())
				m.B.Download(x, v)
				grads[name] = v
			})
			return append(p.LogProbs[0], p.LogProbs[1]...), grads
		}
		lp0, g0 := run(false)
		lp1, g1 := run(true)
		for i := range lp0 {
			if lp0[i] != lp1[i] {
				t.Fatalf("tied=%v: log-prob %d differs with recomputation: %v vs %v", tied, i, lp0[i], lp1[i])
			}
		}
		for name, a := range g0 {
			for i := range a {
				if a[i] != g1[name][i] {
					t.Fatalf("tied=%v: %s[%d] differs with recomputation: %v vs %v", tied, name, i, a[i], g1[name][i])
				}
			}
		}
	}
}
