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

// exactMMAName is the second exact check's name: the same check on the
// mma.sync products, run where the warpgroup-MMA ones failed the first.
const exactMMAName = exactName + " on mma.sync"

// wgKernels is what the first exact check's kernels add on a device whose
// exact bf16 products are warpgroup MMAs.
const wgKernels = "; bf16 products on the sm_90a warpgroup-MMA kernels gemm_exact_wg*"

// checkExact is exactCheck; a test replaces it to make one route fail.
var checkExact = exactCheck

// exactChecks are gpu's exact log-probs checks (none where it has no exact
// mode): the check on the backend's own route and, where that route is the
// warpgroup-MMA products and the check failed, the same check on the
// mma.sync products. Nothing promises that HGMMA rounds a row alike
// wherever it sits in the warpgroup's 64 (docs/gpu.md); if on some GPU it
// does not, a run in exact mode keeps its products on mma.sync rather than
// refusing to start (ExactRoute, ForDevice).
func exactChecks(gpu *cuda.Backend, prec cuda.Precision) []Check {
	c, ok := checkExact(gpu, prec, true)
	if !ok {
		return nil
	}
	if !gpu.ExactOnWGMMA() {
		return []Check{c}
	}
	c.Kernels += wgKernels
	if c.Err == nil {
		return []Check{c}
	}
	alt := cuda.NewBackend(gpu.Device(), prec)
	alt.KeepExactOnMMASync()
	m, _ := checkExact(alt, prec, true)
	m.Name = exactMMAName
	return []Check{c, m}
}

// isExact reports whether c is an exact log-probs check, whose failure
// fails only a run in exact mode.
func isExact(c Check) bool { return c.Name == exactName || c.Name == exactMMAName }

// check returns r's check of that name, or nil.
func (r *Report) check(name string) *Check {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// ExactRoute is what the self-test leaves a run in exact mode: mmaSync
// when the exact check failed on the warpgroup-MMA products and passed on
// the mma.sync ones (the run then keeps its products there), an error when
// it failed on every route it ran. Both are zero when the check passed or
// did not run (a backend without exact mode).
func (r *Report) ExactRoute() (mmaSync bool, err error) {
	first, second := r.check(exactName), r.check(exactMMAName)
	switch {
	case first == nil || first.Err == nil:
		return false, nil
	case second == nil:
		return false, first.Err
	case second.Err == nil:
		return true, nil
	}
	return false, fmt.Errorf("on the warpgroup-MMA products: %w; on the mma.sync products: %w", first.Err, second.Err)
}

// exactLine is the summary's part for the exact checks (empty when they
// did not run): their figures, a failure's first difference, and where a
// run in exact mode takes its products when only the second passed.
func (r *Report) exactLine() string {
	line := ""
	for _, c := range r.Checks {
		if !isExact(c) {
			continue
		}
		name := c.Name
		if strings.Contains(c.Kernels, "gemm_exact_wg") {
			name += " on warpgroup MMA"
		}
		if c.Err != nil {
			line += fmt.Sprintf("; %s FAILED: %v", name, c.Err)
			continue
		}
		line += fmt.Sprintf("; %s: %d of %d whole-vocabulary log-softmax rows differ (max |Δ| %.3g)", name, c.exact.Differing, c.exact.Rows, c.exact.MaxAbs)
	}
	if mma, _ := r.ExactRoute(); mma {
		line += ": a run in exact mode keeps its bf16 products on the mma.sync kernels"
	}
	return line
}
