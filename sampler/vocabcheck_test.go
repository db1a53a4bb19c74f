package sampler

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// vocabSeqs are n sequences over m's vocabulary: prompts of 3 to 11 tokens,
// every third sharing the previous one's prompt (a shared prefix), and
// continuations of 1 to 12 tokens, so that with fewer slots than sequences
// they join and leave the decode at different steps.
func vocabSeqs(m *model.Model, n int, seed uint64) []model.Sequence {
	rnd := rand.New(rand.NewPCG(seed, 3))
	ids := func(k int) []int32 {
		out := make([]int32, k)
		for i := range out {
			out[i] = int32(rnd.IntN(m.Cfg.VocabSize))
		}
		return out
	}
	var seqs []model.Sequence
	var prompt []int32
	for i := 0; i < n; i++ {
		if i%3 != 2 {
			prompt = ids(3 + rnd.IntN(9))
		}
		seqs = append(seqs, model.Sequence{Tokens: append(append([]int32(nil), prompt...), ids(1+rnd.IntN(12))...), Start: len(prompt)})
	}
	return seqs
}

// vocabCheckCase: every decode layout and micro-batch size the check
// compares (one slot: every step a batch of one; 3 slots: sequences join
// and leave; 16: all at once; a paged cache of small pages).
func vocabCheckCase(m *model.Model) VocabCheck {
	seqs := vocabSeqs(m, 10, 1)
	return VocabCheck{Seqs: seqs, MicroBatches: []int{len(seqs), 1, 4},
		Decodes: []DecodeLayout{{Slots: 1}, {Slots: 3}, {Slots: 16}, {Slots: 4, Paging: &model.KVPaging{BudgetBytes: 1 << 16, PageBytes: 1 << 13}}}}
}

// TestCheckVocabExact: on the CPU backend in exact mode every
// whole-vocabulary row of every layout equals the reference's bit for bit;
// without exact mode the same check finds differing rows (it can fail) and
// names the first.
func TestCheckVocabExact(t *testing.T) {
	for _, c := range []struct {
		exact bool
		want  string // "" for no difference, else a part of the error
	}{
		{exact: true},
		{exact: false, want: "whole-vocabulary log-softmax rows differ"},
	} {
		m := exactCPUModel(t, c.exact)
		vc := vocabCheckCase(m)
		r, err := CheckVocab(m, vc)
		if err != nil {
			t.Fatal(err)
		}
		positions := 0
		for _, s := range vc.Seqs {
			positions += len(s.Tokens) - s.Start
		}
		if r.Positions != positions || r.Rows != positions*(len(vc.MicroBatches)-1+len(vc.Decodes)) {
			t.Fatalf("exact %v: %d positions, %d rows compared; want %d and %d", c.exact, r.Positions, r.Rows, positions, positions*(len(vc.MicroBatches)-1+len(vc.Decodes)))
		}
		t.Logf("exact %v: %d of %d rows differ, max |Δ| %.3g", c.exact, r.Differing, r.Rows, r.MaxAbs)
		switch err := r.Err(); {
		case c.want == "" && err != nil:
			t.Errorf("exact mode: %v", err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || r.First == nil || r.MaxAbs == 0):
			t.Errorf("exact off: want differing rows (%q), got %v", c.want, err)
		}
	}
}

// TestCheckVocabLocatesDifference: a row that differs in one element is
// reported with its layout, sequence, position and vocabulary id.
func TestCheckVocabLocatesDifference(t *testing.T) {
	var r VocabReport
	want := []float32{-1, -2, -3, -4}
	got := []float32{-1, -2, -3.5, -4}
	compareRow(&r, want, want, VocabDiff{Seq: 0, Pos: 0})
	compareRow(&r, got, want, VocabDiff{Layout: "decode in 3 slots", Reference: "training", Seq: 4, Pos: 7})
	compareRow(&r, want, got, VocabDiff{Seq: 5, Pos: 1})
	if r.Differing != 2 || r.MaxAbs != 0.5 || r.First == nil {
		t.Fatalf("report %+v", r)
	}
	if f := *r.First; f.Seq != 4 || f.Pos != 7 || f.Token != 2 || f.Got != -3.5 || f.Want != -3 {
		t.Errorf("first difference %+v, want sequence 4, position 7, vocabulary id 2", f)
	}
	if msg := r.Err().Error(); !strings.Contains(msg, "decode in 3 slots against training: sequence 4, continuation token 7, vocabulary id 2") {
		t.Errorf("message %q does not name the difference", msg)
	}
}

// TestVocabDigestsMatchTraining: with Params.VocabDigests the sampler's
// digest of each token's whole-vocabulary row (sequences joining and
// leaving, a paged cache) is the training forward's, in exact mode; and
// not without it (the digests see the rows' last bits).
func TestVocabDigestsMatchTraining(t *testing.T) {
	for _, exact := range []bool{true, false} {
		m := exactCPUModel(t, exact)
		reqs, p := exactRequests(m, exactCases[5])
		p.VocabDigests = true
		out := gen(t, m, reqs, p)
		var seqs []model.Sequence
		var picks []model.VocabPick
		var digests []uint64
		for i, comps := range out {
			for _, cp := range comps {
				if len(cp.VocabDigests) != len(cp.Tokens) {
					t.Fatalf("%d tokens, %d digests", len(cp.Tokens), len(cp.VocabDigests))
				}
				for k := range cp.Tokens {
					picks = append(picks, model.VocabPick{Seq: len(seqs), K: k})
				}
				digests = append(digests, cp.VocabDigests...)
				seqs = append(seqs, model.Sequence{Tokens: append(append([]int32(nil), reqs[i].Prompt...), cp.Tokens...), Start: len(reqs[i].Prompt)})
			}
		}
		pass, vr, err := m.ForwardVocab(seqs, picks)
		if err != nil {
			t.Fatal(err)
		}
		pass.Release()
		differ := 0
		for j := range picks {
			if model.VocabDigest(vr.Logits[j], vr.LSE[j]) != digests[j] {
				differ++
			}
		}
		t.Logf("exact %v: %d of %d digests differ", exact, differ, len(picks))
		if exact && differ != 0 || !exact && differ == 0 {
			t.Errorf("exact mode %v: %d of %d rows' digests differ from the training forward's", exact, differ, len(picks))
		}
	}
}
