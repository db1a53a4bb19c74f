package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExactKVNoOpOnFP32Cache: ExactKV changes nothing where the cache is
// fp32: the training forward's log-probs and the gradients are bitwise
// those without it.
func TestExactKVNoOpOnFP32Cache(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 2))
	seqs := []Sequence{{Tokens: randomTokens(rng, 19, 64), Start: 3}, {Tokens: randomTokens(rng, 7, 64), Start: 1}}
	run := func(exact bool) ([]float32, []float32) {
		m := tinyModel(t, false, 5)
		m.ExactKV = exact
		p, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		var lp []float32
		for _, l := range p.LogProbs {
			lp = append(lp, l...)
		}
		grads := NewLike(m.B, m.Cfg, m.Trainable())
		dl := make([][]float32, len(p.LogProbs))
		for i := range dl {
			dl[i] = make([]float32, len(p.LogProbs[i]))
			for j := range dl[i] {
				dl[i][j] = float32(j%3) - 1
			}
		}
		if err := m.Backward(p, dl, grads); err != nil {
			t.Fatal(err)
		}
		var g []float32
		for _, np := range grads.Named(m.Cfg) {
			g = append(g, Values(m.B, *np.Ptr)...)
		}
		return lp, g
	}
	lp0, g0 := run(false)
	lp1, g1 := run(true)
	for name, pair := range map[string][2][]float32{"log-probs": {lp0, lp1}, "gradients": {g0, g1}} {
		if len(pair[0]) != len(pair[1]) {
			t.Fatalf("%s: %d values against %d", name, len(pair[1]), len(pair[0]))
		}
		for i := range pair[0] {
			if math.Float32bits(pair[0][i]) != math.Float32bits(pair[1][i]) {
				t.Fatalf("%s[%d]: %g with ExactKV, %g without", name, i, pair[1][i], pair[0][i])
			}
		}
	}
}
