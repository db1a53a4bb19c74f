package trainer

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestVocabCheckCountsDiffering: the π_old forward of the
// full-distribution check counts two rows per sequence (its first and last
// response token; one for a one-token response) and a row whose sampler
// digest differs in one bit; without the check it compares nothing.
func TestVocabCheckCountsDiffering(t *testing.T) {
	cfg, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	b.SetBatchInvariant(true)
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 3, 0.3, 0.2)}
	seqs := []model.Sequence{{Tokens: []int32{5, 9, 14, 2, 7}, Start: 2}, {Tokens: []int32{8, 1, 3}, Start: 2}, {Tokens: []int32{4, 4, 6, 10, 11, 12}, Start: 3}}
	// The sampler's digests: those of the same forward in exact mode.
	var picks []model.VocabPick
	for i, s := range seqs {
		for k := 0; k < len(s.Tokens)-s.Start; k++ {
			picks = append(picks, model.VocabPick{Seq: i, K: k})
		}
	}
	p, vr, err := m.ForwardVocab(seqs, picks)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	rowsWith := func(flip bool) []rowData {
		rows := make([]rowData, len(seqs))
		for i, s := range seqs {
			rows[i] = rowData{tokens: s.Tokens, start: s.Start}
		}
		for j, pk := range picks {
			rows[pk.Seq].samplerVocab = append(rows[pk.Seq].samplerVocab, model.VocabDigest(vr.Logits[j], vr.LSE[j]))
		}
		if flip {
			rows[2].samplerVocab[2] ^= 1 // the last token of the third row
		}
		return rows
	}
	for _, c := range []struct {
		check, flip bool
		want        *VocabCheckMetrics
	}{
		{check: true, want: &VocabCheckMetrics{VocabRows: 5}},
		{check: true, flip: true, want: &VocabCheckMetrics{VocabRows: 5, MismatchVocabRows: 1}},
		{check: false, flip: true},
	} {
		tr := &Trainer{Policy: m}
		tr.Cfg.Precision.ExactLogProbs, tr.Cfg.Precision.ExactLogProbsCheck = true, c.check
		rows := rowsWith(c.flip)
		p, err := tr.oldForward(seqs, rows)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
		got := vocabMetrics(rows)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("check %v, flipped digest %v: %+v, want %+v", c.check, c.flip, got, c.want)
		}
	}
}
