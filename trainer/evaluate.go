package trainer

// Validation (docs/algorithm.md §9 and §11 item 24): n sampled responses
// per held-out prompt; per benchmark (data_source) the mean accuracy
// (mean@n), the unbiased pass@k for k = 1, 2, 4, … ≤ n and, under its own
// name, the reference's first_k_any@k (any correct among the first k
// samples); pooled pass@n
// over all prompts as the paper reports it (a prompt counts once, correct
// iff any of its n samples is); and the worst benchmark's mean accuracy.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// BenchResult summarises one benchmark.
type BenchResult struct {
	Prompts int                `json:"prompts"`
	MeanAcc float64            `json:"mean_acc"`  // mean@n
	PassAtK map[string]float64 `json:"pass_at_k"` // the unbiased estimator over all n samples
	// FirstKAny is the reference's figure: the share of prompts with a
	// correct answer among their first k samples (one draw of k, so a
	// noisier estimate of the same quantity as pass@k). Named apart so the
	// two are not compared by mistake.
	FirstKAny map[string]float64 `json:"first_k_any"`
}

// ValResult is one line of validation.jsonl.
type ValResult struct {
	Step       int                     `json:"step"`
	N          int                     `json:"n"`
	Prompts    int                     `json:"prompts"`
	MeanAcc    float64                 `json:"mean_acc"`
	PooledPass float64                 `json:"pooled_pass_at_n"`
	WorstGroup string                  `json:"worst_group"`
	WorstAcc   float64                 `json:"worst_group_acc"`
	Benchmarks map[string]*BenchResult `json:"benchmarks"`
	// PromptCorrect is each prompt's number of correct samples (of N), in
	// the order of the validation files, so two validations of one run can
	// be compared prompt by prompt (paired standard errors, the demo).
	PromptCorrect []int   `json:"prompt_correct"`
	MeanLength    float64 `json:"response_len_mean"`
	Truncation    float64 `json:"truncation_rate"`
	GenTokens     int     `json:"gen_tokens"`
}

// Evaluate runs the held-out evaluation: the current policy on the
// validation prompts (validation.* keys). Config checking is Validate.
func (t *Trainer) Evaluate(ctx context.Context) (*ValResult, error) {
	v := t.Cfg.Validation
	prompts := t.val.ds.Prompts
	if v.MaxPrompts > 0 && len(prompts) > v.MaxPrompts {
		prompts = prompts[:v.MaxPrompts]
	}
	t.phase(PhaseValidate)
	t.Log.Printf("validating at step %d: %d prompts × %d samples", t.step, len(prompts), v.N)
	reqs := make([]sampler.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = sampler.Request{UID: p.UID, Prompt: t.val.ids[p.UID], N: v.N}
	}
	params := sampler.Params{Temperature: v.Temperature, TopP: v.TopP, TopK: v.TopK, MaxNewTokens: v.MaxNewTokens,
		StopIDs: t.stops, Seed: rng.Key(t.Cfg.Run.Seed, rng.HashString("validation")), Step: t.step,
		MaxSlots: t.Cfg.Sampling.MaxSlots, Graphs: t.Cfg.Sampling.CUDAGraphs, // continuous batching: n may exceed the slots
		KVBudgetBytes: t.Cfg.Sampling.KVBudgetBytes()}
	recs, err := t.validatePrompts(ctx, prompts, reqs, params)
	if err != nil {
		return nil, fmt.Errorf("validation: %w", err)
	}
	res := &ValResult{Step: t.step, N: v.N, Prompts: len(prompts), Benchmarks: map[string]*BenchResult{}}
	correct := map[string][]int{} // per benchmark, correct count per prompt
	first := map[string][]int{}   // per benchmark, 1 + index of the first correct sample (0: none)
	var rows, truncated, anyCorrect int
	var accSum float64
	for i, rec := range recs {
		p, c := prompts[i], rec.Correct
		res.GenTokens += rec.Tokens
		truncated += rec.Truncated
		rows += rec.Rows
		correct[p.DataSource] = append(correct[p.DataSource], c)
		first[p.DataSource] = append(first[p.DataSource], rec.FirstCorrect)
		res.PromptCorrect = append(res.PromptCorrect, c)
		accSum += float64(c) / float64(v.N)
		if c > 0 {
			anyCorrect++
		}
	}
	res.MeanAcc = accSum / float64(max(len(prompts), 1))
	res.PooledPass = float64(anyCorrect) / float64(max(len(prompts), 1))
	res.MeanLength = float64(res.GenTokens) / float64(max(rows, 1))
	res.Truncation = float64(truncated) / float64(max(rows, 1))
	res.WorstAcc = math.Inf(1)
	names := make([]string, 0, len(correct))
	for src := range correct {
		names = append(names, src)
	}
	sort.Strings(names)
	for _, src := range names {
		cs := correct[src]
		b := &BenchResult{Prompts: len(cs), PassAtK: map[string]float64{}, FirstKAny: map[string]float64{}}
		for _, c := range cs {
			b.MeanAcc += float64(c) / float64(v.N)
		}
		b.MeanAcc /= float64(len(cs))
		for k := 1; k <= v.N; k *= 2 {
			var s float64
			for _, c := range cs {
				s += grpo.PassAtK(v.N, c, k)
			}
			b.PassAtK[fmt.Sprintf("pass@%d", k)] = s / float64(len(cs))
			b.FirstKAny[fmt.Sprintf("first_k_any@%d", k)] = firstKAny(first[src], k)
		}
		res.Benchmarks[src] = b
		if b.MeanAcc < res.WorstAcc {
			res.WorstAcc, res.WorstGroup = b.MeanAcc, src
		}
	}
	if len(names) == 0 {
		res.WorstAcc = 0
	}
	line, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if _, err := t.valLog.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("write validation.jsonl: %w", err)
	}
	return res, nil
}

// firstKAny is the share of prompts whose first correct sample is among
// their first k (first holds 1 + its index, 0 for none).
func firstKAny(first []int, k int) float64 {
	hit := 0
	for _, f := range first {
		if f > 0 && f <= k {
			hit++
		}
	}
	return float64(hit) / float64(max(len(first), 1))
}

// valPrompt is one validation prompt's outcome.
type valPrompt struct {
	Correct, Rows, Truncated, Tokens int
	// FirstCorrect is 1 + the rollout index of the first correct sample
	// (0: none correct).
	FirstCorrect int
}

// validatePrompts samples and scores reqs (the validation prompts, in
// order). Under data parallel each rank does a contiguous slice of the
// prompts and the outcomes and verifier counts are all-gathered in rank
// order, so every rank ends with the one-process records and counts.
func (t *Trainer) validatePrompts(ctx context.Context, prompts []data.Prompt, reqs []sampler.Request, params sampler.Params) ([]valPrompt, error) {
	n := make([]int, len(reqs))
	for i, r := range reqs {
		n[i] = r.N
	}
	lo, hi := t.group.slice(n)
	before := t.rmet.Snapshot()
	out, err := sampler.Generate(ctx, t.Policy, reqs[lo:hi], params, nil)
	if err != nil {
		return nil, err
	}
	recs := make([]valPrompt, len(out))
	for i, comps := range out {
		p := prompts[lo+i]
		for _, comp := range comps {
			if t.scorers[p.DataSource].Score(t.Tok.Decode32(comp.Tokens, true), p.GroundTruth).Correct {
				recs[i].Correct++
				if f := comp.Index + 1; recs[i].FirstCorrect == 0 || f < recs[i].FirstCorrect {
					recs[i].FirstCorrect = f
				}
			}
			recs[i].Tokens += len(comp.Tokens)
			if comp.Truncated {
				recs[i].Truncated++
			}
			recs[i].Rows++
		}
	}
	return t.group.shareValidation(t.step, len(reqs), recs, before, &t.rmet)
}

// valMsg is one rank's validation slice.
type valMsg struct {
	Prompts  []valPrompt
	Verifier reward.MetricsSnapshot
}

// ReadValidation reads a run's validation.jsonl.
func ReadValidation(path string) ([]*ValResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*ValResult
	for i, line := range bytes.Split(raw, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r ValResult
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		out = append(out, &r)
	}
	return out, nil
}
