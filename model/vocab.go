package model

// Whole-vocabulary log-softmax rows of a training forward, for the
// full-distribution check of precision.exact_logprobs (docs/algorithm.md
// §5.10): the sampler's rows at sampled positions against the trainer's,
// bit for bit (sampler.CheckVocab; the trainer's exact_logprobs_check).

import (
	"fmt"
	"math"
	"sort"
)

// VocabPick names one target of a training forward: response token K
// (Tokens[Start+K]) of sequence Seq; its row is the distribution that
// predicts that token.
type VocabPick struct{ Seq, K int }

// LogSoftmaxRow returns logits − lse element by element in float32: the
// whole-vocabulary log-softmax row of logits whose log-sum-exp
// LogSoftmaxGather computed as lse. The sampler and the trainer both make
// their rows with it, so equal logits and LSEs give equal rows.
func LogSoftmaxRow(logits []float32, lse float32) []float32 {
	out := make([]float32, len(logits))
	for i, v := range logits {
		out[i] = v - lse
	}
	return out
}

// VocabDigest is a 64-bit FNV-1a hash of the bits of the log-softmax row of
// logits with log-sum-exp lse (LogSoftmaxRow): two rows with equal digests
// are, but for a 2⁻⁶⁴ chance, equal bit for bit; the trainer compares the
// sampler's rows by digest, which costs 8 bytes a token to carry.
func VocabDigest(logits []float32, lse float32) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for _, v := range logits {
		bits := math.Float32bits(v - lse)
		for s := 0; s < 32; s += 8 {
			h = (h ^ uint64(bits>>s&0xff)) * prime
		}
	}
	return h
}

// VocabRows are a forward's whole-vocabulary rows at its picks, as the
// head computed them: Logits[j] (V) and LSE[j] for picks[j].
type VocabRows struct {
	Logits [][]float32
	LSE    []float32
}

// ForwardVocab is Forward, also returning the logits and log-sum-exp of
// the picked targets, copied out of the LM head's chunks as the forward
// computes them (the same chunks, products and LogSoftmaxGather as
// without picks). Only the picked rows leave the device.
func (m *Model) ForwardVocab(seqs []Sequence, picks []VocabPick) (*Pass, *VocabRows, error) {
	tap, err := newVocabTap(seqs, picks)
	if err != nil {
		return nil, nil, fmt.Errorf("forward: %w", err)
	}
	p, err := m.forwardTap(seqs, nil, nil, tap)
	if tap.out != nil {
		defer Release(m.B, tap.out)
	}
	if err != nil {
		return nil, nil, err
	}
	V := m.Cfg.VocabSize
	vr := &VocabRows{Logits: make([][]float32, len(picks)), LSE: make([]float32, len(picks))}
	if len(picks) == 0 {
		return p, vr, nil
	}
	host, lse := Values(m.B, tap.out), Values(m.B, p.headLSE)
	if err := m.checkErr("forward"); err != nil {
		p.Release()
		return nil, nil, err
	}
	for j, o := range tap.order {
		vr.Logits[o] = host[j*V : (j+1)*V]
		vr.LSE[o] = lse[tap.rows[j]]
	}
	return p, vr, nil
}

// vocabTap copies picked rows of the head's logits chunks into out.
type vocabTap struct {
	rows  []int // the picks' target rows (indices into Pass.rows), ascending
	order []int // rows[j] is picks[order[j]]
	out   *Tensor
}

// newVocabTap maps picks to target rows: the targets of sequence i follow
// those of sequences 0…i−1, as pack lays them out.
func newVocabTap(seqs []Sequence, picks []VocabPick) (*vocabTap, error) {
	first := make([]int, len(seqs)+1)
	for i, s := range seqs {
		first[i+1] = first[i] + max(len(s.Tokens)-s.Start, 0)
	}
	t := &vocabTap{order: make([]int, len(picks))}
	for j, pk := range picks {
		if pk.Seq < 0 || pk.Seq >= len(seqs) || pk.K < 0 || first[pk.Seq]+pk.K >= first[pk.Seq+1] {
			return nil, fmt.Errorf("vocabulary pick %d (sequence %d, response token %d) is outside the %d sequences' targets", j, pk.Seq, pk.K, len(seqs))
		}
		t.order[j] = j
	}
	sort.SliceStable(t.order, func(a, b int) bool {
		pa, pb := picks[t.order[a]], picks[t.order[b]]
		return first[pa.Seq]+pa.K < first[pb.Seq]+pb.K
	})
	for _, o := range t.order {
		t.rows = append(t.rows, first[picks[o].Seq]+picks[o].K)
	}
	return t, nil
}

// take copies the picked rows among targets lo…hi−1 out of their chunk's
// logits (hi−lo, V).
func (t *vocabTap) take(b Backend, V, lo, hi int, logits *Tensor) {
	if t == nil || len(t.rows) == 0 {
		return
	}
	if t.out == nil {
		t.out = Scratch(b, len(t.rows), V)
	}
	j0 := sort.SearchInts(t.rows, lo)
	j1 := sort.SearchInts(t.rows, hi)
	if j0 == j1 {
		return
	}
	idx := make([]int32, j1-j0)
	for j := j0; j < j1; j++ {
		idx[j-j0] = int32(t.rows[j] - lo)
	}
	b.GatherRows(t.out.Rows(j0, j1), logits, idx)
}
