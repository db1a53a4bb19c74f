package model

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
)

// randomTokenLoss draws a GRPO token loss for m target rows whose old
// log-probs sit near the current ones (lp), so that every branch occurs:
// ratios inside and outside the clip, the dual clip, a delta beyond ±20,
// importance weights, and dropped (masked) tokens.
func randomTokenLoss(rng *rand.Rand, lp []float32) *TokenLoss {
	m := len(lp)
	l := &TokenLoss{Surrogate: grpo.Surrogate{ClipLow: 0.2, ClipHigh: 0.28, DualClip: 3, KLCoef: 0.05}, GA: 2,
		Old: make([]float32, m), Ref: make([]float32, m), IS: make([]float32, m), Adv: make([]float64, m), Denom: make([]float64, m)}
	for k := range lp {
		l.Old[k] = lp[k] + float32(0.6*rng.NormFloat64())
		l.Ref[k] = lp[k] + float32(0.3*rng.NormFloat64())
		if k%7 == 3 {
			l.Old[k] = lp[k] - 25 // delta out of bounds
		}
		l.IS[k] = float32(0.5 + rng.Float64())
		l.Adv[k] = 2 * rng.NormFloat64()
		if k%5 != 4 {
			l.Denom[k] = float64(m)
		}
	}
	return l
}

// TestFusedHeadMatchesTwoPass: the fused head (ForwardLoss, the head's
// backward in the forward) gives the two-pass head's log-probs exactly,
// the host's derivatives exactly (on the CPU backends they are the same
// function), and every gradient within float32 rounding (the head's
// gradient adds its chunks in the other order), tied and untied, in one
// chunk and in chunks of 3 rows, with recomputation and with adapters.
func TestFusedHeadMatchesTwoPass(t *testing.T) {
	type variant struct {
		name                 string
		tied, recompute, lr  bool
		chunkRows, groupRows int
	}
	var cases []variant
	for _, tied := range []bool{false, true} {
		for _, rows := range []int{0, 3} {
			cases = append(cases, variant{tied: tied, chunkRows: rows})
		}
	}
	// 11 target rows in chunks of 3: the weight gradient's product per
	// chunk (groups of 1 row: 1 chunk), per 2 chunks (the last group
	// short), and once.
	cases = append(cases, variant{name: "group", chunkRows: 3, groupRows: 1}, variant{name: "group", chunkRows: 3, groupRows: 5},
		variant{name: "group", tied: true, chunkRows: 3, groupRows: 4},
		variant{name: "recompute", tied: true, recompute: true, chunkRows: 3},
		variant{name: "lora", lr: true, chunkRows: 3, groupRows: 5})
	for _, tc := range cases {
		name := fmt.Sprintf("%s tied=%v chunk=%d group=%d", tc.name, tc.tied, tc.chunkRows, tc.groupRows)
		t.Run(name, func(t *testing.T) {
			if tc.chunkRows > 0 {
				old := headChunkElems
				defer func() { headChunkElems = old }()
			}
			if tc.groupRows > 0 {
				old := headGroupRows
				headGroupRows = tc.groupRows
				defer func() { headGroupRows = old }()
			}
			m := tinyModel(t, tc.tied, 5)
			m.Recompute = tc.recompute
			if tc.lr {
				randomAdapters(t, m, &LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "down"}}, 9)
			}
			if tc.chunkRows > 0 {
				headChunkElems = tc.chunkRows * m.Cfg.VocabSize
			}
			rng := rand.New(rand.NewPCG(8, 2))
			seqs := []Sequence{{Tokens: randomTokens(rng, 9, m.Cfg.VocabSize), Start: 3}, {Tokens: randomTokens(rng, 6, m.Cfg.VocabSize), Start: 1}}
			newGrads := func() *Params {
				if m.A != nil {
					return NewLike(m.B, m.Cfg, m.A)
				}
				return NewParams(m.B, m.Cfg)
			}
			grads := func(g *Params) map[string][]float32 {
				out := map[string][]float32{}
				g.Each(m.Cfg, func(name string, x *Tensor) {
					h := make([]float32, x.Numel())
					m.B.Download(x, h)
					out[name] = h
				})
				return out
			}

			// Two passes: the host computes ∂J/∂log π from the log-probs.
			p, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			var flat []float32
			for _, lp := range p.LogProbs {
				flat = append(flat, lp...)
			}
			l := randomTokenLoss(rng, flat)
			w, k := make([][]float32, len(p.LogProbs)), 0
			for i, lp := range p.LogProbs {
				for _, x := range lp {
					w[i] = append(w[i], l.Grad(k, x))
					k++
				}
			}
			g2 := newGrads()
			if err := m.Backward(p, w, g2); err != nil {
				t.Fatal(err)
			}
			want := grads(g2)

			scratch := newGrads()
			f, err := m.ForwardLoss(seqs, l, scratch)
			if err != nil {
				t.Fatal(err)
			}
			for i := range w {
				for j := range w[i] {
					if f.LogProbs[i][j] != p.LogProbs[i][j] || f.DLogp[i][j] != w[i][j] {
						t.Fatalf("sequence %d token %d: fused log-prob %v, derivative %v; two-pass %v, %v", i, j, f.LogProbs[i][j], f.DLogp[i][j], p.LogProbs[i][j], w[i][j])
					}
				}
			}
			if err := m.Backward(f, w, scratch); err == nil || !strings.Contains(err.Error(), "ForwardLoss") {
				t.Fatalf("a fused pass's backward with log-prob gradients: got %v", err)
			}
			g1 := newGrads()
			f, err = m.ForwardLoss(seqs, l, g1)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(f, nil, g1); err != nil {
				t.Fatal(err)
			}
			// The fp32 tolerance of TestHeadChunksKeepLast (the same
			// reordering of the head's chunk sums).
			got := grads(g1)
			for name, x := range want {
				if _, err := numcheck.Compare(got[name], x, numcheck.Tol{Atol: 1e-5, Rtol: 1e-4}); err != nil {
					t.Errorf("gradient %s: %v", name, err)
				}
			}
		})
	}
}
