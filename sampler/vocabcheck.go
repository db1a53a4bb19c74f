package sampler

// The full-distribution check of precision.exact_logprobs (docs/algorithm.md
// §5.10): the whole-vocabulary log-softmax rows the sampler's decode path
// computes at sampled positions against the training forward's, bit for
// bit. A token's log-prob can agree by chance, or through a rounding that
// cancels; equal rows over the whole vocabulary leave nothing to chance.

import (
	"fmt"
	"math"
	"slices"

	"github.com/gdrotrain/gdrotrain/model"
)

// VocabCheck is what CheckVocab compares: sequences (a prompt, Tokens[:Start],
// and a continuation whose every token is a sampled position), decoded in
// each of Decodes and packed for training in micro-batches of each of
// MicroBatches rows. Sequences with equal prompts share a prefill as the
// sampler's rollouts do.
type VocabCheck struct {
	Seqs         []model.Sequence
	Decodes      []DecodeLayout
	MicroBatches []int
}

// DecodeLayout is one way of running the sampler's decode: Slots sequences
// at once (fewer than the sequences: they join as others leave, so the
// steps' batches change size), in a paged cache when Paging is set.
type DecodeLayout struct {
	Slots  int
	Paging *model.KVPaging
}

func (d DecodeLayout) String() string {
	if d.Paging != nil {
		return fmt.Sprintf("decode in %d slots, paged cache", d.Slots)
	}
	return fmt.Sprintf("decode in %d slots", d.Slots)
}

// VocabReport is CheckVocab's result.
type VocabReport struct {
	Positions int     // sampled positions (continuation tokens)
	Rows      int     // whole-vocabulary rows compared with the reference layout's
	Differing int     // rows with any differing bit
	MaxAbs    float64 // the largest |Δ| of any element (NaN where one side is NaN)
	// First is the first differing row (nil when none): in layout order,
	// then sequence and position order.
	First *VocabDiff
}

// VocabDiff locates one difference.
type VocabDiff struct {
	Layout, Reference string  // the layouts compared
	Seq, Pos          int     // the sequence and its continuation token (0-based)
	Token             int32   // the first vocabulary id whose log-prob differs
	Got, Want         float32 // its log-probs in Layout and in Reference
}

func (d VocabDiff) String() string {
	return fmt.Sprintf("%s against %s: sequence %d, continuation token %d, vocabulary id %d: %v vs %v (bits %#08x vs %#08x)",
		d.Layout, d.Reference, d.Seq, d.Pos, d.Token, d.Got, d.Want, math.Float32bits(d.Got), math.Float32bits(d.Want))
}

// Err is nil when no row differs, else an error naming the first difference.
func (r VocabReport) Err() error {
	if r.Differing == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d whole-vocabulary log-softmax rows differ (max |Δ| %.3g); first: %s", r.Differing, r.Rows, r.MaxAbs, r.First)
}

// CheckVocab runs c's sequences through the sampler's exact decode path in
// each decode layout and through the training forward in each micro-batch
// size, and compares every layout's whole-vocabulary log-softmax rows
// (model.LogSoftmaxRow) at every continuation token with those of the first
// micro-batch size, bit for bit. The model's backend runs as it is set
// (exact mode or not): the check measures, the caller decides.
func CheckVocab(m *model.Model, c VocabCheck) (VocabReport, error) {
	var r VocabReport
	if len(c.MicroBatches) == 0 {
		return r, fmt.Errorf("vocabulary check: no micro-batch size")
	}
	for i, s := range c.Seqs {
		if s.Start < 1 || s.Start > len(s.Tokens) {
			return r, fmt.Errorf("vocabulary check: sequence %d: start %d must be in [1, %d]", i, s.Start, len(s.Tokens))
		}
		r.Positions += len(s.Tokens) - s.Start
	}
	type layout struct {
		name string
		rows [][][]float32 // [seq][pos] → V log-probs
	}
	var layouts []layout
	for _, mb := range c.MicroBatches {
		rows, err := trainVocab(m, c.Seqs, mb)
		if err != nil {
			return r, fmt.Errorf("vocabulary check: training, micro-batch %d: %w", mb, err)
		}
		layouts = append(layouts, layout{fmt.Sprintf("training in micro-batches of %d", mb), rows})
	}
	for _, d := range c.Decodes {
		rows, err := decodeVocab(m, c.Seqs, d)
		if err != nil {
			return r, fmt.Errorf("vocabulary check: %s: %w", d, err)
		}
		layouts = append(layouts, layout{d.String(), rows})
	}
	ref := layouts[0]
	for _, l := range layouts[1:] {
		for i := range l.rows {
			for k := range l.rows[i] {
				r.Rows++
				compareRow(&r, l.rows[i][k], ref.rows[i][k], VocabDiff{Layout: l.name, Reference: ref.name, Seq: i, Pos: k})
			}
		}
	}
	return r, nil
}

// compareRow adds one row's comparison to r; at names the row.
func compareRow(r *VocabReport, got, want []float32, at VocabDiff) {
	first := -1
	for v := range got {
		if math.Float32bits(got[v]) == math.Float32bits(want[v]) {
			continue
		}
		if first < 0 {
			first = v
		}
		d := math.Abs(float64(got[v]) - float64(want[v]))
		if math.IsNaN(d) || d > r.MaxAbs {
			r.MaxAbs = d
		}
	}
	if first < 0 {
		return
	}
	r.Differing++
	if r.First == nil {
		at.Token, at.Got, at.Want = int32(first), got[first], want[first]
		r.First = &at
	}
}

// trainVocab runs the training forward over seqs packed mb rows at a time,
// as the trainer packs a micro-batch, and returns every continuation
// token's log-softmax row.
func trainVocab(m *model.Model, seqs []model.Sequence, mb int) ([][][]float32, error) {
	if mb < 1 {
		return nil, fmt.Errorf("micro-batch of %d rows", mb)
	}
	out := make([][][]float32, len(seqs))
	for lo := 0; lo < len(seqs); lo += mb {
		batch := seqs[lo:min(lo+mb, len(seqs))]
		var picks []model.VocabPick
		for i, s := range batch {
			for k := 0; k < len(s.Tokens)-s.Start; k++ {
				picks = append(picks, model.VocabPick{Seq: i, K: k})
			}
		}
		p, vr, err := m.ForwardVocab(batch, picks)
		if err != nil {
			return nil, err
		}
		p.Release()
		for j, pk := range picks {
			out[lo+pk.Seq] = append(out[lo+pk.Seq], model.LogSoftmaxRow(vr.Logits[j], vr.LSE[j]))
		}
	}
	return out, nil
}

// decoding is one sequence in a slot of decodeVocab: k is the continuation
// token its next row predicts.
type decoding struct{ seq, k int }

// decodeVocab runs seqs through the sampler's exact decode path (exactStep)
// in layout d, teacher-forced with their continuations: a sequence is
// admitted into a free slot by a prefill of its prompt (or, when a running
// sequence has the same prompt, a copy of that prompt's cached prefix, its
// first row then being the prefill's), then decodes one token a step, in
// steps shared with the others, and leaves after its last token's row.
func decodeVocab(m *model.Model, seqs []model.Sequence, d DecodeLayout) ([][][]float32, error) {
	if d.Slots < 1 {
		return nil, fmt.Errorf("%d slots", d.Slots)
	}
	maxLen := 1
	for _, s := range seqs {
		maxLen = max(maxLen, len(s.Tokens))
	}
	var kv *model.KVCache
	if d.Paging != nil {
		var err error
		if kv, err = m.NewPagedKVCache(d.Slots, maxLen, *d.Paging); err != nil {
			return nil, err
		}
	} else {
		kv = m.NewKVCache(d.Slots, maxLen)
	}
	defer kv.Release()
	out := make([][][]float32, len(seqs))
	slots := make([]*decoding, d.Slots)
	next := 0
	for {
		var in []model.StepInput
		var at []*decoding
		for s := range slots {
			var prefill *model.StepInput
			for slots[s] == nil && prefill == nil && next < len(seqs) {
				var err error
				if prefill, err = admit(m, kv, seqs, slots, s, next, out); err != nil {
					return nil, err
				}
				next++
			}
			dc := slots[s]
			switch {
			case prefill != nil:
				in, at = append(in, *prefill), append(at, dc)
			case dc != nil:
				sq := seqs[dc.seq]
				in, at = append(in, model.StepInput{Slot: s, Tokens: sq.Tokens[sq.Start+dc.k-1 : sq.Start+dc.k]}), append(at, dc)
			}
		}
		if len(in) == 0 {
			return out, nil
		}
		for _, x := range in {
			if err := kv.Grow(x.Slot, kv.Len[x.Slot]+len(x.Tokens)); err != nil {
				return nil, err
			}
		}
		pick := func([]float32, int) (rows, targets []int32) {
			for i, dc := range at {
				sq := seqs[dc.seq]
				rows, targets = append(rows, int32(i)), append(targets, sq.Tokens[sq.Start+dc.k])
			}
			return rows, targets
		}
		st, err := exactStep(m, kv, in, pick)
		if err != nil {
			return nil, err
		}
		n := len(at)
		for i, dc := range at {
			out[dc.seq] = append(out[dc.seq], model.LogSoftmaxRow(st.row(i), st.res[n+i]))
			dc.k++
			if sq := seqs[dc.seq]; sq.Start+dc.k == len(sq.Tokens) {
				s := in[i].Slot
				slots[s] = nil
				kv.Reset(s)
			}
		}
	}
}

// admit puts sequence i into free slot s. When a running sequence holds the
// same prompt, its cached prefix is copied and sequence i's first row is
// that prompt's prefill row: admit records it and returns nil, the
// sequence decoding from its second token in the step. Otherwise it
// returns the prefill's step input. A sequence without a continuation
// takes no slot.
func admit(m *model.Model, kv *model.KVCache, seqs []model.Sequence, slots []*decoding, s, i int, out [][][]float32) (*model.StepInput, error) {
	sq := seqs[i]
	if len(sq.Tokens) == sq.Start { // nothing to predict
		return nil, nil
	}
	prompt := sq.Tokens[:sq.Start]
	for src, dc := range slots {
		if dc == nil || dc.k == 0 || !slices.Equal(seqs[dc.seq].Tokens[:seqs[dc.seq].Start], prompt) {
			continue
		}
		if err := kv.Grow(s, len(prompt)); err != nil {
			return nil, err
		}
		if err := m.CopyPrefix(kv, s, src, len(prompt)); err != nil {
			return nil, err
		}
		out[i] = append(out[i], out[dc.seq][0])
		slots[s] = &decoding{seq: i, k: 1}
		if len(sq.Tokens) == sq.Start+1 { // its one row was the prefill's
			slots[s] = nil
			kv.Reset(s)
		}
		return nil, nil
	}
	slots[s] = &decoding{seq: i, k: 0}
	return &model.StepInput{Slot: s, Tokens: prompt}, nil
}
