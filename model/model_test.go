package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// NewTestBackend returns the backend the model's tests build their models
// on: the fast CPU backend (backend/cpu), the one users run. model cannot
// import it (backend/cpu imports model), so the external test file
// fastcpu_test.go sets it before any test runs.
var NewTestBackend func() Backend

// tinyModel builds a random tiny model (GQA, jittered norms) on the CPU.
func tinyModel(t testing.TB, tied bool, seed uint64) *Model {
	t.Helper()
	o := DefaultTiny()
	o.Tied = tied
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewTestBackend()
	return &Model{Cfg: cfg, B: b, P: RandomParams(b, cfg, seed, 0.2, 0.3)}
}

func randomTokens(rng *rand.Rand, n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}

// TestKVDecodeMatchesFullForward: decoding token by token through the cache
// reproduces the one-shot prefill logits at every position (≤ 1e-5), also
// when several slots decode in one step and a prompt is prefilled in chunks.
func TestKVDecodeMatchesFullForward(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := tinyModel(t, tied, 7)
		rng := rand.New(rand.NewPCG(1, 2))
		seqs := [][]int32{randomTokens(rng, 13, m.Cfg.VocabSize), randomTokens(rng, 9, m.Cfg.VocabSize), randomTokens(rng, 17, m.Cfg.VocabSize)}
		var want [][][]float32
		for _, s := range seqs {
			l, err := m.Logits(s)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, l)
		}
		kv := m.NewKVCache(len(seqs), 32)
		// Prefill the first 3 tokens of each sequence in one step, then
		// decode the rest one token per step, all slots together.
		var in []StepInput
		for i, s := range seqs {
			in = append(in, StepInput{Slot: i, Tokens: s[:3]})
		}
		got, err := m.Step(kv, in)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			assertClose(t, "prefill", got[i], want[i][2], 1e-5)
		}
		for pos := 3; pos < 17; pos++ {
			in = in[:0]
			var which []int
			for i, s := range seqs {
				if pos < len(s) {
					in = append(in, StepInput{Slot: i, Tokens: s[pos : pos+1]})
					which = append(which, i)
				}
			}
			got, err := m.Step(kv, in)
			if err != nil {
				t.Fatal(err)
			}
			for j, i := range which {
				assertClose(t, "decode", got[j], want[i][pos], 1e-5)
			}
		}
	}
}

func assertClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("%s: index %d got %v want %v (|diff| %g)", what, i, got[i], want[i], d)
		}
	}
}

// TestForwardLogProbsMatchLogits: the training forward's log-probs equal
// log-softmax of the inference logits.
func TestForwardLogProbsMatchLogits(t *testing.T) {
	m := tinyModel(t, false, 3)
	rng := rand.New(rand.NewPCG(5, 6))
	a, c := randomTokens(rng, 11, m.Cfg.VocabSize), randomTokens(rng, 6, m.Cfg.VocabSize)
	p, err := m.Forward([]Sequence{{Tokens: a, Start: 4}, {Tokens: c, Start: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for si, s := range []Sequence{{a, 4}, {c, 1}} {
		logits, _ := m.Logits(s.Tokens)
		for k, lp := range p.LogProbs[si] {
			tpos := s.Start + k
			row := logits[tpos-1]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var sum float64
			for _, v := range row {
				sum += math.Exp(float64(v) - mx)
			}
			want := float64(row[s.Tokens[tpos]]) - mx - math.Log(sum)
			if math.Abs(want-float64(lp)) > 1e-5 {
				t.Fatalf("seq %d pos %d: logp %v, want %v", si, tpos, lp, want)
			}
		}
	}
}
