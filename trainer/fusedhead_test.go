package trainer

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestFusedHeadMatchesMicroBatch: the loss the trainer hands the fused
// head (LossConfig.TokenLoss) gives, token for token, exactly the
// derivatives MicroBatch computes on the host, under each aggregation,
// with importance weights on some rows, a masked row, GDRO weights and an
// accumulation count — so the per-step check of microStep (sameTokenGrads)
// can only fire on a backend's error. And that check fires when more than
// maxTokenGradFlips derivatives are off by more than 4 ulps.
func TestFusedHeadMatchesMicroBatch(t *testing.T) {
	o := model.DefaultTiny()
	mc, _ := o.Config()
	b := cpu.NewBackend()
	m := &model.Model{Cfg: mc, B: b, P: model.RandomParams(b, mc, 9, 0.3, 0.2)}
	rng := rand.New(rand.NewPCG(4, 2))
	var seqs []model.Sequence
	for i := range 5 {
		toks := make([]int32, 7+2*i)
		for k := range toks {
			toks[k] = int32(rng.IntN(mc.VocabSize))
		}
		seqs = append(seqs, model.Sequence{Tokens: toks, Start: 2 + i%2})
	}
	p, err := m.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	rows := make([]grpo.Row, len(seqs))
	for i := range rows {
		n := len(p.LogProbs[i])
		r := grpo.Row{Old: make([]float32, n), Ref: make([]float32, n), Adv: 1.3 * rng.NormFloat64(), Weight: 0.5 + rng.Float64(),
			GroupSize: 1 + i%3, Masked: i == 2}
		for k := range n {
			r.Old[k] = p.LogProbs[i][k] + float32(0.4*rng.NormFloat64())
			r.Ref[k] = p.LogProbs[i][k] + float32(0.4*rng.NormFloat64())
		}
		if i%2 == 1 {
			r.IS = make([]float32, n)
			for k := range r.IS {
				r.IS[k] = float32(0.3 + rng.Float64())
			}
		}
		rows[i] = r
	}
	for _, agg := range []string{"token-mean", "seq-mean-token-mean", "prompt-mean-token-mean"} {
		lc := grpo.DefaultLoss()
		lc.KLCoef, lc.Aggregation = 0.05, agg
		f, err := m.ForwardLoss(seqs, lc.TokenLoss(rows, 3), model.NewParams(b, mc))
		if err != nil {
			t.Fatal(err)
		}
		f.Release()
		rs := append([]grpo.Row(nil), rows...)
		for i := range rs {
			rs[i].LogProbs = f.LogProbs[i]
		}
		host, st := lc.MicroBatch(rs, 3)
		if st.ClipCount == 0 || st.ClipCount == st.Tokens {
			t.Fatalf("%s: want a mix of clipped and unclipped tokens, got %d of %d", agg, st.ClipCount, st.Tokens)
		}
		nonzero := 0
		for i := range host {
			for k := range host[i] {
				if f.DLogp[i][k] != host[i][k] {
					t.Fatalf("%s: row %d token %d: fused %v, MicroBatch %v", agg, i, k, f.DLogp[i][k], host[i][k])
				}
				if host[i][k] != 0 {
					nonzero++
				}
			}
		}
		if nonzero == 0 {
			t.Fatalf("%s: every derivative is 0", agg)
		}
		if err := sameTokenGrads(f.DLogp, host); err != nil {
			t.Fatal(err)
		}
		bad := make([][]float32, len(host))
		for i := range host {
			bad[i] = append([]float32(nil), host[i]...)
		}
		// Up to maxTokenGradFlips tokens may differ (a clip-bound tie
		// resolved the other way); one more is an error.
		flipped := 0
		for i := range bad {
			for k := range bad[i] {
				if bad[i][k] != 0 && flipped <= maxTokenGradFlips {
					bad[i][k] *= 1.001
					flipped++
					err := sameTokenGrads(bad, host)
					if (err != nil) != (flipped > maxTokenGradFlips) {
						t.Fatalf("%s: %d derivatives off by 0.1 %%: error %v", agg, flipped, err)
					}
				}
			}
		}
	}
}

// TestFusedHeadRunMatchesTwoPass: a 2-step run with the fused head (the
// default) and one with train.fused_head: false write the same metrics
// (timings aside): at the fixture's vocabulary the head is one chunk, so
// the two orders of the head's backward do the same arithmetic.
func TestFusedHeadRunMatchesTwoPass(t *testing.T) {
	cfg, _ := fixture(t)
	if !cfg.Train.FusedHead {
		t.Fatal("train.fused_head is not on by default")
	}
	fused := readLines(t, filepath.Join(runFixture(t, cfg), "metrics.jsonl"))
	cfg.Train.FusedHead, cfg.Run.Name = false, "two-pass"
	two := readLines(t, filepath.Join(runFixture(t, cfg), "metrics.jsonl"))
	if len(fused) != 2 {
		t.Fatalf("%d metrics lines, want 2", len(fused))
	}
	sameMetrics(t, fused, two, "the fused and the two-pass head")
}
