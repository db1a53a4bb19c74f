package cpu_test

import (
	"math"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestKVCacheDecode: decoding through a bf16 or an fp8 cache on the CPU
// gives log-probs within the format's tolerance of decoding through the
// fp32 cache, on the same tokens (the fp32 cache's greedy continuation of
// a prompt, fed to each), and the same greedy choice at every step but
// where the fp32 cache's two best logits lie closer than the format's
// error (a random tiny model's are often within 1e-3). The tolerances are
// a few times the largest differences observed (bf16 4.6e-4, fp8 5.1e-3
// nats).
func TestKVCacheDecode(t *testing.T) {
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 2, 300
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0.1)}
	prompt := []int32{5, 17, 200, 3, 99, 41, 7}
	const steps = 24
	want := decode(t, m, prompt, nil, steps) // greedy through the fp32 cache
	for _, c := range []struct {
		name      string
		bf16, fp8 bool
		tol       float64
	}{
		{"bf16", true, false, 2e-3},
		{"fp8", false, true, 2e-2},
	} {
		m.KVCacheBF16, m.KVCacheFP8 = c.bf16, c.fp8
		if err := m.CheckKVCache(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := decode(t, m, prompt, want.toks, steps)
		var worst float64
		agree, close := 0, 0
		for i := range want.lps {
			worst = math.Max(worst, math.Abs(got.lps[i]-want.lps[i]))
		}
		for i := range want.best {
			switch {
			case got.best[i] == want.best[i]:
				agree++
			case want.margin[i] <= 2*c.tol:
				close++ // a near-tie the format's error may flip
			default:
				t.Errorf("%s cache, step %d: greedy token %d, the fp32 cache's %d by a margin of %.3g", c.name, i, got.best[i], want.best[i], want.margin[i])
			}
		}
		t.Logf("%s cache: max |Δ log-prob| %.3g over %d tokens; greedy choice as fp32's at %d steps, flipped at %d near-ties", c.name, worst, len(want.lps), agree, close)
		if worst > c.tol || worst == 0 {
			t.Errorf("%s cache: max |Δ log-prob| %g, want in (0, %g]", c.name, worst, c.tol)
		}
	}
}

// decoded is a decode's per-step log-prob of its token, the token, the
// greedy choice and the margin of the best logit over the second.
type decoded struct {
	lps, margin []float64
	toks, best  []int32
}

// decode prefills prompt and decodes steps tokens one at a time: forced
// (the tokens of forced) or greedy (forced nil).
func decode(t *testing.T, m *model.Model, prompt, forced []int32, steps int) decoded {
	t.Helper()
	kv := m.NewKVCache(1, len(prompt)+steps)
	defer kv.Release()
	logits, err := m.Step(kv, []model.StepInput{{Slot: 0, Tokens: prompt}})
	if err != nil {
		t.Fatal(err)
	}
	var d decoded
	for s := 0; s < steps; s++ {
		row := logits[0]
		best, second := int32(0), -1
		for v := 1; v < len(row); v++ {
			switch {
			case row[v] > row[best]:
				best, second = int32(v), int(best)
			case second < 0 || row[v] > row[second]:
				second = v
			}
		}
		next := best
		if forced != nil {
			next = forced[s]
		}
		mx, sum := float64(row[best]), 0.0
		for _, x := range row {
			sum += math.Exp(float64(x) - mx)
		}
		d.lps = append(d.lps, float64(row[next])-mx-math.Log(sum))
		d.toks, d.best = append(d.toks, next), append(d.best, best)
		d.margin = append(d.margin, float64(row[best]-row[second]))
		if logits, err = m.Step(kv, []model.StepInput{{Slot: 0, Tokens: []int32{next}}}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
