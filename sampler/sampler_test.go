package sampler

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/model"
)

// scripted is a mock LM whose logits are a fixed function of the slot's
// token history, so results can be predicted without a network.
type scripted struct {
	vocab int
	hist  map[int][]int32
	calls int
	rows  []int // inputs per Step call
	f     func(hist []int32) []float32
}

func newScripted(vocab int, f func([]int32) []float32) *scripted {
	return &scripted{vocab: vocab, hist: map[int][]int32{}, f: f}
}

func (m *scripted) NewKVCache(slots, maxLen int) *model.KVCache {
	return &model.KVCache{Slots: slots, MaxLen: maxLen, Len: make([]int, slots)}
}

func (m *scripted) CopyPrefix(kv *model.KVCache, dst, src, n int) error {
	if n > kv.Len[src] {
		return fmt.Errorf("copy %d tokens of slot %d holding %d", n, src, kv.Len[src])
	}
	m.hist[dst] = append([]int32(nil), m.hist[src][:n]...)
	kv.Len[dst] = n
	return nil
}

func (m *scripted) Step(kv *model.KVCache, in []model.StepInput) ([][]float32, error) {
	m.calls++
	m.rows = append(m.rows, len(in))
	var out [][]float32
	for _, s := range in {
		h := append(m.hist[s.Slot][:kv.Len[s.Slot]], s.Tokens...)
		m.hist[s.Slot] = h
		kv.Len[s.Slot] = len(h)
		out = append(out, m.f(h))
	}
	return out, nil
}

// uniform logits over the vocabulary.
func uniform(vocab int) func([]int32) []float32 {
	return func([]int32) []float32 { return make([]float32, vocab) }
}

func gen(t *testing.T, lm LM, reqs []Request, p Params) [][]Completion {
	t.Helper()
	out, err := Generate(context.Background(), lm, reqs, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func base() Params {
	return Params{Temperature: 1, TopP: 1, MaxNewTokens: 12, Seed: 1, Step: 3}
}

func TestSeedsAndTemperature(t *testing.T) {
	reqs := []Request{{UID: "a", Prompt: []int32{1, 2}, N: 3}, {UID: "b", Prompt: []int32{5}, N: 2}}
	p := base()
	x := gen(t, newScripted(50, uniform(50)), reqs, p)
	y := gen(t, newScripted(50, uniform(50)), reqs, p)
	for i := range x {
		for j := range x[i] {
			if !equalTokens(x[i][j].Tokens, y[i][j].Tokens) {
				t.Fatalf("same seed differs at %d/%d", i, j)
			}
		}
	}
	if equalTokens(x[0][0].Tokens, x[0][1].Tokens) {
		t.Fatal("two rollouts of one prompt drew identical tokens")
	}
	p.Seed = 2
	z := gen(t, newScripted(50, uniform(50)), reqs, p)
	if equalTokens(x[0][0].Tokens, z[0][0].Tokens) {
		t.Fatal("different seeds gave identical tokens")
	}
	// Temperature 0 is greedy: the seed does not matter.
	peaked := func(h []int32) []float32 {
		l := make([]float32, 50)
		l[(int(h[len(h)-1])*7+3)%50] = 1
		return l
	}
	g := base()
	g.Temperature = 0
	a := gen(t, newScripted(50, peaked), reqs, g)
	g.Seed = 99
	b := gen(t, newScripted(50, peaked), reqs, g)
	if !equalTokens(a[0][0].Tokens, b[0][0].Tokens) || !equalTokens(a[0][0].Tokens, a[0][2].Tokens) {
		t.Fatal("greedy decoding depends on the seed or rollout")
	}
	if a[0][0].Tokens[0] != (2*7+3)%50 {
		t.Fatalf("greedy first token %d", a[0][0].Tokens[0])
	}
}

func TestStopAndTruncation(t *testing.T) {
	// The model emits last+1; stop id 10 is reached after a known count.
	count := func(h []int32) []float32 {
		l := make([]float32, 20)
		l[(h[len(h)-1]+1)%20] = 100
		return l
	}
	p := base()
	p.StopIDs = []int32{10}
	p.MaxNewTokens = 5
	out := gen(t, newScripted(20, count), []Request{{UID: "stop", Prompt: []int32{7}, N: 1}, {UID: "long", Prompt: []int32{0}, N: 1}}, p)
	s, l := out[0][0], out[1][0]
	if !s.Stopped || s.Truncated || !equalTokens(s.Tokens, []int32{8, 9, 10}) {
		t.Fatalf("stop: %+v", s)
	}
	if l.Stopped || !l.Truncated || len(l.Tokens) != 5 {
		t.Fatalf("truncation: %+v", l)
	}
	if len(s.LogProbs) != len(s.Tokens) {
		t.Fatalf("log-probs %d for %d tokens", len(s.LogProbs), len(s.Tokens))
	}
}

// TestBatchCompositionIndependence: a prompt's completions do not depend on
// the other prompts in the batch, on the slot count or on arrival order.
func TestBatchCompositionIndependence(t *testing.T) {
	f := func(h []int32) []float32 { // history-dependent logits
		l := make([]float32, 30)
		for i := range l {
			l[i] = float32(math.Sin(float64(int(h[len(h)-1])*31+i*7+len(h)))) * 2
		}
		return l
	}
	target := Request{UID: "target", Prompt: []int32{3, 1, 4}, N: 4}
	p := base()
	p.TopK, p.TopP = 20, 0.9
	alone := gen(t, newScripted(30, f), []Request{target}, p)[0]
	p.MaxSlots = 5
	mixed := gen(t, newScripted(30, f), []Request{{UID: "x", Prompt: []int32{1}, N: 3}, target, {UID: "y", Prompt: []int32{2, 2}, N: 5}}, p)[1]
	for i := range alone {
		if !equalTokens(alone[i].Tokens, mixed[i].Tokens) {
			t.Fatalf("rollout %d: alone %v, in a batch %v", i, alone[i].Tokens, mixed[i].Tokens)
		}
	}
}

// TestContinuousBatching: with fewer slots than a prompt has rollouts, and
// rollouts of very different lengths, every rollout's tokens equal those
// drawn with a slot for every rollout at once; every step but the tail
// runs a full batch (a finished rollout's slot is refilled in the same
// step), and a single slot serves a prompt of several rollouts (its home
// slot passes from rollout to rollout).
func TestContinuousBatching(t *testing.T) {
	// Stop id 0; the logits make a rollout's length depend on its history.
	f := func(h []int32) []float32 {
		l := make([]float32, 16)
		for i := range l {
			l[i] = float32(math.Sin(float64(int(h[len(h)-1])*13+i*5+len(h)))) * 1.5
		}
		l[0] = float32(len(h)%5) - 2.5 // stop more likely at some lengths
		return l
	}
	reqs := []Request{{UID: "a", Prompt: []int32{3, 1}, N: 5}, {UID: "b", Prompt: []int32{4}, N: 1},
		{UID: "c", Prompt: []int32{1, 5, 9}, N: 7}, {UID: "d", Prompt: []int32{2, 6}, N: 3}}
	p := base()
	p.StopIDs, p.MaxNewTokens = []int32{0}, 24
	p.MaxSlots = 64
	want := gen(t, newScripted(16, f), reqs, p)
	lengths := map[int]bool{}
	for _, comps := range want {
		for _, c := range comps {
			lengths[len(c.Tokens)] = true
		}
	}
	if len(lengths) < 4 {
		t.Fatalf("rollout lengths %v: want varied lengths for this test", lengths)
	}
	for _, slots := range []int{1, 2, 3, 5} {
		p.MaxSlots = slots
		lm := newScripted(16, f)
		got := gen(t, lm, reqs, p)
		for i := range want {
			for j := range want[i] {
				if !equalTokens(want[i][j].Tokens, got[i][j].Tokens) || got[i][j].Stopped != want[i][j].Stopped {
					t.Fatalf("%d slots: request %d rollout %d: %v, with a slot each %v", slots, i, j, got[i][j].Tokens, want[i][j].Tokens)
				}
			}
		}
		// Full batches after the first step (prefills only: the prompts'
		// other rollouts start once their prefix exists) until the last
		// rollouts drain: a short step happens only when nothing is left
		// to start.
		short := false
		for _, rows := range lm.rows[1:] {
			if rows < slots {
				short = true
			} else if short {
				t.Fatalf("%d slots: steps %v: a full step after a short one", slots, lm.rows)
			}
		}
		if lm.rows[0] != min(slots, len(reqs)) {
			t.Fatalf("%d slots: first step ran %d rows, want %d prefills", slots, lm.rows[0], min(slots, len(reqs)))
		}
	}
}

// TestSampleDistribution: frequencies follow softmax(logits/T) after top-k
// and top-p filtering (within 5 standard errors).
func TestSampleDistribution(t *testing.T) {
	logits := []float32{2, 1, 0.5, 0, -1}
	cases := []struct {
		name string
		temp float64
		k    int
		p    float64
		want []float64
	}{
		{"full", 1, 0, 1, softmax(logits, 1, 5)},
		{"temperature 0.5", 0.5, 0, 1, softmax(logits, 0.5, 5)},
		{"top-k 2", 1, 2, 1, softmax(logits, 1, 2)},
		{"top-p 0.7", 1, 0, 0.7, softmax(logits, 1, 2)}, // p0 ≈ 0.53, p0+p1 ≈ 0.73 ≥ 0.7
	}
	for _, c := range cases {
		const n = 40000
		counts := make([]float64, len(logits))
		key := rng.Key(7)
		for i := 0; i < n; i++ {
			tok, lp := Sample(logits, c.temp, c.k, c.p, rng.Uniform(key, uint64(i)))
			counts[tok]++
			if math.Abs(math.Exp(float64(lp))-c.want[tok]) > 1e-6 {
				t.Fatalf("%s: log-prob of %d is %v, want log %v", c.name, tok, lp, c.want[tok])
			}
		}
		for i, w := range c.want {
			got := counts[i] / n
			if math.Abs(got-w) > 5*math.Sqrt(w*(1-w)/n)+1e-9 {
				t.Errorf("%s: token %d frequency %.4f, want %.4f", c.name, i, got, w)
			}
		}
	}
}

func softmax(l []float32, temp float64, keep int) []float64 {
	out := make([]float64, len(l))
	var s float64
	for i := 0; i < keep; i++ {
		out[i] = math.Exp(float64(l[i]) / temp)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// tinyCPUModel is the tiny model with fixed random weights on the CPU.
func tinyCPUModel(t *testing.T) *model.Model {
	t.Helper()
	cfg, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	return &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 5, 0.3, 0.2)}
}

// TestGreedyMatchesFullForward: greedy generation through the KV cache (with
// a shared, copied prefix) picks the argmax of a full recomputation.
func TestGreedyMatchesFullForward(t *testing.T) {
	m := tinyCPUModel(t)
	cfg := m.Cfg
	rnd := rand.New(rand.NewPCG(1, 1))
	prompt := make([]int32, 7)
	for i := range prompt {
		prompt[i] = int32(rnd.IntN(cfg.VocabSize))
	}
	p := Params{Temperature: 0, TopP: 1, MaxNewTokens: 10, MaxSlots: 3}
	out := gen(t, m, []Request{{UID: "g", Prompt: prompt, N: 2}, {UID: "h", Prompt: prompt[:3], N: 1}}, p)
	seq := append([]int32(nil), prompt...)
	for i, tok := range out[0][1].Tokens {
		logits, err := m.Logits(seq)
		if err != nil {
			t.Fatal(err)
		}
		last := logits[len(logits)-1]
		best := 0
		for j, v := range last {
			if v > last[best] {
				best = j
			}
		}
		if int32(best) != tok {
			t.Fatalf("token %d: cached greedy %d, full forward argmax %d", i, tok, best)
		}
		seq = append(seq, tok)
	}
}

func TestGenerateRejectsBadInput(t *testing.T) {
	lm := newScripted(5, uniform(5))
	for _, c := range []struct {
		reqs []Request
		p    Params
	}{
		{[]Request{{UID: "e", N: 1}}, base()},
		{[]Request{{UID: "n", Prompt: []int32{1}, N: -1}}, Params{Temperature: 1, TopP: 1, MaxNewTokens: 3, MaxSlots: 4}},
		{nil, Params{Temperature: -1, TopP: 1, MaxNewTokens: 3}},
		{nil, Params{Temperature: 1, TopP: 0, MaxNewTokens: 3}},
		{nil, Params{Temperature: 1, TopP: 1, MaxNewTokens: 0}},
	} {
		if _, err := Generate(context.Background(), lm, c.reqs, c.p, nil); err == nil {
			t.Errorf("no error for %+v / %+v", c.reqs, c.p)
		}
	}
}

// TestGraphsIgnoredOffDevice: Params.Graphs changes nothing for a model
// that cannot run graphed steps (the CPU path is unchanged; the CUDA
// backend's graphed path is tested in cuda, TestGenerateGraphsDeterministic).
func TestGraphsIgnoredOffDevice(t *testing.T) {
	f := func(h []int32) []float32 {
		l := make([]float32, 30)
		for i := range l {
			l[i] = float32(math.Cos(float64(int(h[len(h)-1])*13+i*5+len(h)))) * 2
		}
		return l
	}
	reqs := []Request{{UID: "x", Prompt: []int32{1}, N: 3}, {UID: "y", Prompt: []int32{2, 2}, N: 2}}
	p := base()
	off := gen(t, newScripted(30, f), reqs, p)
	p.Graphs = true
	on := gen(t, newScripted(30, f), reqs, p)
	for i := range off {
		for j := range off[i] {
			if !equalTokens(off[i][j].Tokens, on[i][j].Tokens) {
				t.Fatalf("prompt %d rollout %d: graphs off %v, on %v", i, j, off[i][j].Tokens, on[i][j].Tokens)
			}
		}
	}
}
