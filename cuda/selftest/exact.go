package selftest

// The full-distribution check of exact mode (precision.exact_logprobs,
// docs/algorithm.md §5.10): on the GPU alone, the sampler's decode path
// against the training forward, bit for bit. It is one of the report's
// checks, and its failure is marked FAILED with its first difference in
// the check's line and in the summary line (which the GPU kit shows), but
// only a run in exact mode depends on it, so Run's error leaves it out:
// a run in exact mode also refuses on Report.ExactErr (ForDevice's
// exact).

import (
	"fmt"
	"strings"

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
// the backend's exact mode set to on (and turned off again after): four
// sequences (two sharing a prompt) decoded in 2 and 4 slots (sequences
// joining and leaving, a prefix copied, batches of 1 to 4 rows) and, where
// the backend pages a cache of this format (a bf16 cache, as a bf16 run's
// is; any on the CPU), in a paged cache; trained in micro-batches of 4, 1
// and 3 rows. Every whole-vocabulary row must equal the reference's in
// every bit. It is small because the emulator runs it in every self-test
// of the CI (about 3 s there). It returns false when b has no exact mode
// (model.BatchInvariant).
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
	m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 17, 0.2, 0.3), KVCacheBF16: prec == cuda.BF16, ExactKV: true}
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
	// In 2 slots the first leaves after 3 steps and the third, sharing
	// the second's prompt, joins by a copy of its cached prefix.
	for i, n := range []int{3, 4, 3, 2} {
		if i != 2 {
			prompt = g.ids(5+i, m.Cfg.VocabSize)
		}
		seqs = append(seqs, model.Sequence{Tokens: append(append([]int32{}, prompt...), g.ids(n, m.Cfg.VocabSize)...), Start: len(prompt)})
	}
	vc := sampler.VocabCheck{Seqs: seqs, MicroBatches: []int{len(seqs), 1, 3},
		Decodes: []sampler.DecodeLayout{{Slots: 2}, {Slots: 4}}}
	if m.KVCacheBF16 || model.SamplerCapsOf(m.B).KV == nil {
		// A paged cache backs bf16 (or fp8) rows on a GPU: 4 pages of the
		// backend's granularity for each layer's K and V.
		budget := 4 * int64(2*len(m.P.Layers)) * pageBytes(m.B)
		vc.Decodes = append(vc.Decodes, sampler.DecodeLayout{Slots: 2, Paging: &model.KVPaging{BudgetBytes: budget}})
	}
	return vc
}

// pageBytes is the backend's page granularity (the default page where it
// has none).
func pageBytes(b model.Backend) int64 {
	if pg := model.SamplerCapsOf(b).Pager; pg != nil {
		return pg.KVPageBytes()
	}
	return model.DefaultKVPageBytes
}

// ExactErr is the exact log-probs check's failure (nil when it passed or
// did not run: a backend without exact mode).
func (r *Report) ExactErr() error {
	for _, c := range r.Checks {
		if c.Name == exactName && c.Err != nil {
			return fmt.Errorf("%w%s", c.Err, exactHint(c))
		}
	}
	return nil
}

// exactHint is the way out a failed exact check offers on a device where
// the exact products are warpgroup MMAs (Run notes them in Kernels), or "".
func exactHint(c Check) string {
	if !strings.Contains(c.Kernels, "gemm_exact_wg") {
		return ""
	}
	return "\nHINT: on an H100 or H200 exact mode's bf16 products run on the warpgroup-MMA kernels (sm_90a); " +
		cuda.ExactWGMMAEnv + "=0 keeps them on the mma.sync kernels"
}

// exactLine is the summary's part for the exact check (empty when it did
// not run): its figures, and on a failure its first difference.
func (r *Report) exactLine() string {
	for _, c := range r.Checks {
		switch {
		case c.Name != exactName:
		case c.Err != nil:
			return fmt.Sprintf("; %s FAILED: %v%s", exactName, c.Err, exactHint(c))
		default:
			return fmt.Sprintf("; %s: %d of %d whole-vocabulary log-softmax rows differ (max |Δ| %.3g)", exactName, c.exact.Differing, c.exact.Rows, c.exact.MaxAbs)
		}
	}
	return ""
}
