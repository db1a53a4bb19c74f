package selftest

// The full-distribution check of exact mode (precision.exact_logprobs,
// docs/algorithm.md §5.10): on the GPU alone, the sampler's decode path
// against the training forward, bit for bit. Its failure is reported like
// any other check's (cuda-info --self-test exits 1, the GPU kit lists it),
// but only a run in exact mode depends on it: the startup self-test of a
// run without exact log-probs goes on (ForDevice; Error.ExactOnly).

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// exactName is the check's name; the report's summary line quotes its
// numbers after it.
const exactName = "exact log-probs"

// exactKernels are the kernels the check covers: every one on the path
// from a token to its log-probability, in decode and in training.
const exactKernels = "every decode-step and training-forward kernel in exact mode: gemm, attention, norms, RoPE, SwiGLU, gather/scatter, log_softmax_gather"

// exactCheck runs sampler.CheckVocab on the tiny random model on b with
// the backend's exact mode set to on (and turned off again after): six
// prompts' continuations decoded in 1, 3 and 8 slots (sequences joining
// and leaving, a prefix copied) and, where the cache is bf16 as a bf16
// run's is, a paged cache; trained in micro-batches of 6, 1 and 4 rows.
// Every whole-vocabulary row must equal the reference's in every bit. It
// returns false when b has no exact mode (model.BatchInvariant).
func exactCheck(b model.Backend, prec cuda.Precision, on bool) (Check, bool) {
	bi, ok := b.(model.BatchInvariant)
	if !ok {
		return Check{}, false
	}
	c := Check{Name: exactName, Kernels: exactKernels, worst: -1}
	bi.SetBatchInvariant(on)
	defer bi.SetBatchInvariant(false)
	o := model.DefaultTiny()
	o.Vocab = 300
	cfg, err := o.Config()
	if err != nil {
		c.Err = err
		return c, true
	}
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 17, 0.2, 0.3), KVCacheBF16: prec == cuda.BF16}
	r, err := sampler.CheckVocab(m, exactCase(m))
	if err != nil {
		c.Err = err
		return c, true
	}
	c.Values, c.MaxAbs, c.Err, c.exact = r.Rows, r.MaxAbs, r.Err(), &r
	return c, true
}

// exactCase is the sequences and layouts exactCheck compares.
func exactCase(m *model.Model) sampler.VocabCheck {
	g := newGen(23)
	var seqs []model.Sequence
	var prompt []int32
	for i := 0; i < 6; i++ {
		if i%3 != 1 { // every second prompt is shared by the next sequence
			prompt = g.ids(5+i, m.Cfg.VocabSize)
		}
		seqs = append(seqs, model.Sequence{Tokens: append(append([]int32{}, prompt...), g.ids(1+(7*i)%10, m.Cfg.VocabSize)...), Start: len(prompt)})
	}
	vc := sampler.VocabCheck{Seqs: seqs, MicroBatches: []int{len(seqs), 1, 4},
		Decodes: []sampler.DecodeLayout{{Slots: 1}, {Slots: 3}, {Slots: 8}}}
	if m.KVCacheBF16 || model.SamplerCapsOf(m.B).KV == nil {
		// A paged cache backs bf16 (or fp8) rows on a GPU: 4 pages of the
		// backend's granularity for each layer's K and V.
		budget := 4 * int64(2*len(m.P.Layers)) * pageBytes(m.B)
		vc.Decodes = append(vc.Decodes, sampler.DecodeLayout{Slots: 3, Paging: &model.KVPaging{BudgetBytes: budget}})
	}
	return vc
}

// pageBytes is the backend's page granularity (the default page where it
// has none).
func pageBytes(b model.Backend) int64 {
	if kv := model.SamplerCapsOf(b).KV; kv != nil {
		return kv.KVPageBytes()
	}
	return model.DefaultKVPageBytes
}

// exactLine is the summary's part for the exact check (empty when it did
// not run).
func (r *Report) exactLine() string {
	for _, c := range r.Checks {
		if c.Name != exactName {
			continue
		}
		if c.exact == nil {
			return fmt.Sprintf("; %s: not compared: %v", exactName, c.Err)
		}
		return fmt.Sprintf("; %s: %d of %d whole-vocabulary log-softmax rows differ (max |Δ| %.3g)", exactName, c.exact.Differing, c.exact.Rows, c.exact.MaxAbs)
	}
	return ""
}
