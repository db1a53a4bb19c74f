package trainer

// The trainer's full-distribution check (precision.exact_logprobs_check,
// docs/algorithm.md §5.10): beside each token's log-prob, the π_old
// forward compares the whole-vocabulary log-softmax rows of each row's
// first and last response token with the sampler's, by digest
// (model.VocabDigest: 8 bytes a token carried, two rows of V floats a
// sequence downloaded), and logs how many differ.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// vocabCheck is one row's full-distribution check: rows compared, rows
// whose bits differ.
type vocabCheck struct{ Rows, Differ int }

// VocabCheckMetrics are the step's full-distribution figures
// (metrics.jsonl; present with precision.exact_logprobs_check).
type VocabCheckMetrics struct {
	// VocabRows is the whole-vocabulary rows compared (each row's first
	// and last response token); MismatchVocabRows how many differ in any
	// bit: exactly 0 in exact mode.
	VocabRows         int `json:"vocab_rows_checked"`
	MismatchVocabRows int `json:"mismatch_vocab_rows"`
}

// vocabMetrics sums the rows' checks (nil when no row was checked).
func vocabMetrics(rows []rowData) *VocabCheckMetrics {
	var vm VocabCheckMetrics
	for _, r := range rows {
		if r.vocab != nil {
			vm.VocabRows += r.vocab.Rows
			vm.MismatchVocabRows += r.vocab.Differ
		}
	}
	if vm.VocabRows == 0 {
		return nil
	}
	return &vm
}

// oldForward is the π_old forward of a micro-batch's rows; with
// precision.exact_logprobs_check it also checks the rows' first and last
// response tokens' whole-vocabulary rows against the sampler's digests.
func (t *Trainer) oldForward(seqs []model.Sequence, rows []rowData) (*model.Pass, error) {
	pc := t.Cfg.Precision
	if !pc.ExactLogProbs || !pc.ExactLogProbsCheck {
		return t.Policy.Forward(seqs)
	}
	var picks []model.VocabPick
	for i, r := range rows {
		n := len(r.tokens) - r.start
		if len(r.samplerVocab) != n {
			return nil, fmt.Errorf("precision.exact_logprobs_check: row %d of the micro-batch has %d response tokens but %d sampler vocabulary digests", i, n, len(r.samplerVocab))
		}
		for _, k := range []int{0, n - 1}[:min(n, 2)] {
			picks = append(picks, model.VocabPick{Seq: i, K: k})
		}
	}
	p, vr, err := t.Policy.ForwardVocab(seqs, picks)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		rows[i].vocab = &vocabCheck{}
	}
	for j, pk := range picks {
		v := rows[pk.Seq].vocab
		v.Rows++
		if model.VocabDigest(vr.Logits[j], vr.LSE[j]) != rows[pk.Seq].samplerVocab[pk.K] {
			v.Differ++
		}
	}
	return p, nil
}
