package trainer

// One training step (docs/algorithm.md §1, with the decisions of §11):
//
//	prompts ─► gdro.Plan (classify, n_i) ─► sampler.Generate ─► reward
//	  ─► old / reference log-probs ─► GRPO advantages ─► gdro.Weights
//	  ─► mini-batches of micro-batches: forward, clipped loss, backward,
//	     clip, AdamW ─► gdro.Observe (row signals, correctness) ─► metrics
//
// Rows are prompt-contiguous in plan order everywhere, so the per-row
// signals handed to the controllers line up with their labels by
// construction (docs/algorithm.md §11 items 15, 26); with several PPO epochs a row's signal
// is the mean over epochs.

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/reward"
	"github.com/gdrotrain/gdrotrain/sampler"
	"github.com/gdrotrain/gdrotrain/tokenizer"
)

// rowData is one response of the step.
type rowData struct {
	prompt   int // index into the step's prompts
	tokens   []int32
	start    int // first response token in tokens
	result   reward.Result
	old, ref []float32
	entropy  []float32
	adv      float64
	weight   float64
	group    int // rollouts of this row's prompt
	// truncated: the response hit max_new_tokens.
	truncated bool
	// sampler: the sampler's log-prob of each response token (the
	// distribution it drew from); is: the rollout correction's weights
	// (nil: 1) and mismatch its figures, set with the old log-probs.
	sampler []float32
	// samplerEnt: the entropies of the sampler's distributions, with
	// precision.exact_logprobs (where they are the trainer's).
	samplerEnt []float32
	// samplerVocab: each response token's whole-vocabulary digest
	// (model.VocabDigest), with precision.exact_logprobs_check; vocab:
	// the full-distribution check of the row's first and last token
	// (nil: not checked).
	samplerVocab []uint64
	vocab        *vocabCheck
	is           []float32
	mismatch     *grpo.RowMismatch
	// penalty: the soft overlong penalty added to the score; masked: the
	// overlong filter drops the row from the loss (overlong.go).
	penalty float64
	masked  bool
}

// StepMetrics is one line of metrics.jsonl. The embedded controller record
// contributes the per-bin fields (bin_share, weights, n, μ …; bin 0 =
// hardest), with the same names gdro-sim writes.
type StepMetrics struct {
	Step              int     `json:"step"`
	Epoch             int     `json:"epoch"`
	RewardMean        float64 `json:"reward_mean"`
	AccMean           float64 `json:"acc_mean"`
	ResponseLenMean   float64 `json:"response_len_mean"`
	ResponseLenMax    int     `json:"response_len_max"`
	TruncationRate    float64 `json:"truncation_rate"`
	NoAnswerRate      float64 `json:"no_answer_rate"`
	KL                float64 `json:"kl"`
	PPOKL             float64 `json:"ppo_kl"`
	Entropy           float64 `json:"entropy"`
	ClipFrac          float64 `json:"clip_frac"`
	LowerClipFrac     float64 `json:"lower_clip_frac"`
	PolicyLoss        float64 `json:"policy_loss"`
	GradNorm          float64 `json:"grad_norm"`
	LR                float64 `json:"lr"`
	Updates           int     `json:"optimizer_updates"`
	GenSeconds        float64 `json:"time_gen_s"`
	ScoreSeconds      float64 `json:"time_score_s"`
	LogProbSeconds    float64 `json:"time_logprob_s"`
	UpdateSeconds     float64 `json:"time_update_s"`
	StepSeconds       float64 `json:"time_step_s"`
	GenTokensPerSec   float64 `json:"gen_tokens_per_s"`
	TrainTokensPerSec float64 `json:"train_tokens_per_s"`
	VerifierBudget    int64   `json:"verifier_budget_exhausted"`
	VerifierPanics    int64   `json:"verifier_panics"`
	// GPUMemPeakGiB is the most GPU memory held in tensors during the step
	// (CUDA backend only; it depends on allocation timing, so it is not
	// part of what a resumed run must reproduce).
	GPUMemPeakGiB float64 `json:"gpu_mem_peak_gib,omitempty"`
	// GPUMemGenPeakGiB and GPUMemTrainPeakGiB split it by phase:
	// generation and scoring, then log-probs and the update (each phase
	// starts from what the step held when it began: the sampler's KV cache
	// is gone before training, which the memory plan relies on).
	GPUMemGenPeakGiB   float64 `json:"gpu_mem_gen_peak_gib,omitempty"`
	GPUMemTrainPeakGiB float64 `json:"gpu_mem_train_peak_gib,omitempty"`
	// dsCapHit: dynamic sampling ran out of rounds (DynamicSamplingMetrics).
	dsCapHit bool
	// RolloutPreemptions counts rollouts this process's sampler pre-empted
	// for KV pages (sampling.kv_cache_gib; 0 when the cache is not paged).
	RolloutPreemptions int `json:"rollout_preemptions"`
	// The sampler/trainer mismatch and the rollout correction (present
	// when the sampler draws from the policy itself; correction.go).
	*MismatchMetrics
	// The full-distribution check (present with
	// precision.exact_logprobs_check; vocabcheck.go).
	*VocabCheckMetrics
	// Dynamic sampling's rounds and drops (present when it is on).
	*DynamicSamplingMetrics
	// Overlong handling (present when loss.overlong does something).
	*OverlongMetrics
	// The generation ranks' weights and their lag (present with
	// dist.rollout_ranks; async.go).
	*AsyncMetrics
	*gdro.StepRecord
}

// lr is the schedule: linear warm-up over warmup_steps updates, then constant.
func (t *Trainer) lr(update int) float64 {
	w := t.Cfg.Optim.WarmupSteps
	if w > 0 && update < w {
		return t.Cfg.Optim.LR * float64(update+1) / float64(w)
	}
	return t.Cfg.Optim.LR
}

// stepState is what a step changes before its update: restoring it undoes
// an abandoned step exactly (the weights change only in the update).
type stepState struct {
	step   int
	cursor data.Cursor
	ctrl   gdro.State // a deep copy
	reward reward.MetricsSnapshot
}

func (t *Trainer) saveStepState() stepState {
	return stepState{step: t.step, cursor: t.loader.Cursor(), ctrl: t.Ctrl.State(), reward: t.rmet.Snapshot()}
}

// abandon rolls a step back to s after ctx was cancelled.
func (t *Trainer) abandon(s stepState, cause error) error {
	step := t.step
	t.step = s.step
	t.rmet.Restore(s.reward)
	if err := t.loader.Restore(s.cursor); err != nil {
		return fmt.Errorf("step %d: rolling back: %w", step, err)
	}
	if err := t.Ctrl.Restore(s.ctrl); err != nil {
		return fmt.Errorf("step %d: rolling back: %w", step, err)
	}
	t.Log.Printf("step %d abandoned before its update (%v); step %d is the last complete one", step, cause, t.step)
	return fmt.Errorf("step %d abandoned: %w", step, cause)
}

// Step runs one training step and returns its metrics. When ctx is
// cancelled before the update starts, the step is rolled back and the
// error wraps ctx's; once the update starts, the step finishes. In a
// data-parallel run (dp.go) every rank calls Step together.
func (t *Trainer) Step(ctx context.Context) (*StepMetrics, error) {
	start := time.Now()
	before := t.saveStepState()
	t.step++
	t.group.setStep(t.step)
	met := &StepMetrics{Step: t.step}
	mem := newMemPeaks(t.Policy.B)

	// Generate and score (each rank its slice of the prompts, the rows
	// then shared), in rounds while dynamic sampling wants more groups.
	b, err := t.rollouts.collect(ctx, met)
	if err != nil {
		if cause := ctx.Err(); cause != nil && b.abandonable {
			return nil, t.abandon(before, cause)
		}
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}
	genTokens := rolloutMetrics(b.rows, met)
	met.OverlongMetrics = overlongMetrics(t.Cfg.Loss.Overlong, b.rows)
	met.GenTokensPerSec = float64(genTokens) / math.Max(met.GenSeconds, 1e-9)
	if cause := ctx.Err(); cause != nil {
		return nil, t.abandon(before, cause)
	}
	met.GPUMemGenPeakGiB = mem.lap()

	// Rewards with the overlong penalty, advantages over every generated
	// group, then the groups the update trains on.
	t.advantages(b.rows)
	keep := t.keepGroups(b, met)
	plan, err := b.plan.Subset(keep)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}
	rows, rowOf := keptRows(b, keep)

	// Old and reference log-probs (no gradient), then the weights.
	t.phase(PhaseLogProbs)
	t0 := time.Now()
	spans := microBatches(plan.N, t.Cfg.Train.MiniBatchPrompts, t.Cfg.Train.MicroBatchRows)
	if err := t.logProbs(rows, spans); err != nil {
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}
	if cause := ctx.Err(); cause != nil { // the last moment before the weights change
		return nil, t.abandon(before, cause)
	}
	met.LogProbSeconds = time.Since(t0).Seconds()
	if err := t.weigh(plan, rows); err != nil {
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}

	// The actor update: it always finishes.
	t.phase(PhaseUpdate)
	t0 = time.Now()
	signal, kl, trained, err := t.update(spans, rows, met)
	if err != nil {
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}
	met.UpdateSeconds = time.Since(t0).Seconds()
	met.TrainTokensPerSec = float64(trained) / math.Max(met.UpdateSeconds+met.LogProbSeconds, 1e-9)
	met.MismatchMetrics = mismatchMetrics(rows)
	met.VocabCheckMetrics = vocabMetrics(rows)

	if met.StepRecord, err = t.Ctrl.Observe(b.plan, observed(b.rows, rowOf, signal, kl)); err != nil {
		return nil, fmt.Errorf("step %d: %w", t.step, err)
	}
	met.Updates = t.updates
	rs := t.rmet.Snapshot()
	met.VerifierBudget, met.VerifierPanics = rs.Budget, rs.Panics
	met.StepSeconds = time.Since(start).Seconds()
	met.GPUMemTrainPeakGiB = mem.peak()
	met.GPUMemPeakGiB = max(met.GPUMemGenPeakGiB, met.GPUMemTrainPeakGiB)
	return met, nil
}

// weigh sets the controllers' weight of each row trained on.
func (t *Trainer) weigh(plan *gdro.Plan, rows []rowData) error {
	if len(rows) == 0 {
		return nil
	}
	w, err := t.Ctrl.Weights(plan)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].weight = w.Row[i]
	}
	return nil
}

// memPeaks measures the GPU memory a step's phases hold at most (0
// where the backend does not report it).
type memPeaks struct{ m model.MemoryReporter }

func newMemPeaks(b model.Backend) memPeaks {
	m := model.MemoryCapsOf(b).Reporter
	if m != nil {
		m.ResetMemPeak()
	}
	return memPeaks{m}
}

// peak is the peak in GiB since the last lap.
func (p memPeaks) peak() float64 {
	if p.m == nil {
		return 0
	}
	return float64(p.m.MemPeak()) / (1 << 30)
}

// lap is peak, and starts the next lap.
func (p memPeaks) lap() float64 {
	peak := p.peak()
	if p.m != nil {
		p.m.ResetMemPeak()
	}
	return peak
}

// advantages sets each row's advantage: its reward with the overlong
// penalty, normalised in its prompt's group.
func (t *Trainer) advantages(rows []rowData) {
	rewards, groups := make([]float64, len(rows)), make([]int, len(rows))
	for i, r := range rows {
		rewards[i], groups[i] = r.result.Score+r.penalty, r.prompt
	}
	adv := grpo.Advantages(rewards, groups, t.Cfg.Loss.AdvEps, t.Cfg.Loss.AdvClip)
	for i := range rows {
		rows[i].adv = adv[i]
	}
}

// observed is what the controllers observe of every generated row (rowOf:
// its index among the rows trained on, −1 for none; signal and kl by
// trained row). A row the update did not train on has ρ = 1, so its loss
// signal is −A (0 for the groups dynamic sampling drops) and no KL is
// measured (docs/algorithm.md §5.12).
func observed(rows []rowData, rowOf []int, signal, kl []float64) gdro.Rows {
	obs := gdro.Rows{Loss: make([]float64, len(rows)), KL: make([]float64, len(rows)), Correct: make([]bool, len(rows))}
	for i, r := range rows {
		obs.Correct[i] = r.result.Correct
		if j := rowOf[i]; j >= 0 {
			obs.Loss[i], obs.KL[i] = signal[j], kl[j]
		} else {
			obs.Loss[i] = -r.adv
		}
	}
	return obs
}

// stepBatch is what a step generated: the prompts of every round, one
// plan over all of them (gdro.MergePlans) and their rows,
// prompt-contiguous in plan order.
type stepBatch struct {
	prompts []data.Prompt
	plan    *gdro.Plan
	rows    []rowData
	rounds  int
	// abandonable: an error may be the step's cancellation (generation
	// stops on ctx); the exchange of rows is not abandoned mid-way.
	abandonable bool
}

// collect runs the step's generation rounds: plan, generate, score, share
// the rows. Without dynamic sampling there is one round.
func (t *Trainer) collect(ctx context.Context, met *StepMetrics) (stepBatch, error) {
	var b stepBatch
	var plans []*gdro.Plan
	ds := t.Cfg.Train.DynamicSampling
	for round := 0; ; round++ {
		t.phase(PhaseGenerate)
		t0 := time.Now()
		prompts, epoch := t.loader.Next()
		if round == 0 {
			met.Epoch = epoch
		}
		uids := make([]string, len(prompts))
		for i, p := range prompts {
			uids[i] = p.UID
		}
		plan, err := t.Ctrl.Plan(uids)
		if err != nil {
			return b, err
		}
		lo, hi := t.group.slice(plan.N)
		before := t.rmet.Snapshot()
		rows, gst, err := t.generate(ctx, prompts, plan.N, lo, hi, t.roundSeed(round))
		met.RolloutPreemptions += gst.Preemptions
		if err != nil {
			b.abandonable = true
			return b, err
		}
		met.GenSeconds += time.Since(t0).Seconds()
		t.phase(PhaseScore)
		t0 = time.Now()
		t.score(prompts, rows)
		if rows, err = t.group.shareRows(rows, before, &t.rmet); err != nil {
			return b, err
		}
		for i := range rows {
			rows[i].prompt += len(b.prompts)
			rows[i].penalty = t.Cfg.Loss.Overlong.Penalty(len(rows[i].tokens)-rows[i].start, t.Cfg.Sampling.MaxNewTokens)
			rows[i].masked = t.Cfg.Loss.Overlong.Filter && rows[i].truncated
		}
		b.prompts, b.rows = append(b.prompts, prompts...), append(b.rows, rows...)
		plans = append(plans, plan)
		met.ScoreSeconds += time.Since(t0).Seconds()
		b.rounds = round + 1
		if !ds.Enabled || informativeGroups(b.rows) >= t.Cfg.Train.PromptsPerStep {
			break
		}
		if round+1 >= ds.MaxRounds {
			met.dsCapHit = true
			t.Log.Printf("step %d: dynamic sampling found %d informative groups of %d wanted in %d rounds (train.dynamic_sampling.max_rounds); training on those",
				t.step, informativeGroups(b.rows), t.Cfg.Train.PromptsPerStep, round+1)
			break
		}
		if cause := ctx.Err(); cause != nil {
			b.abandonable = true
			return b, cause
		}
	}
	var err error
	b.plan, err = gdro.MergePlans(plans)
	return b, err
}

// roundSeed is the sampling key of a generation round: round 0 draws with
// the run's seed; a dynamic sampling round r > 0 with a key of its own, so
// a prompt drawn twice in one step gets fresh rollouts.
func (t *Trainer) roundSeed(round int) uint64 {
	if round > 0 {
		return rng.Key(t.Cfg.Run.Seed, rng.HashString("dynamic sampling"), uint64(round))
	}
	return t.Cfg.Run.Seed
}

// generate samples plan.N[i] rollouts of each prompt i in [lo, hi) (every
// prompt in one process), drawing with seed (roundSeed, versionSeed) and
// the step, prompt UID and rollout index.
func (t *Trainer) generate(ctx context.Context, prompts []data.Prompt, n []int, lo, hi int, seed uint64) ([]rowData, sampler.Stats, error) {
	return t.maker().generate(ctx, prompts, n, lo, hi, seed, t.step)
}

// maker is the training policy's rollout maker.
func (t *Trainer) maker() rolloutMaker {
	return newRolloutMaker(&t.Cfg, t.Policy, t.Tok, t.stops, t.train.ids, t.scorers)
}

// newRolloutMaker is the one place a rollout maker reads the run's
// sampling and precision settings, so a training rank and a generation
// rank cannot derive them differently (they once did: a generation rank
// left out the vocabulary digests precision.exact_logprobs_check needs).
func newRolloutMaker(cfg *Config, policy *model.Model, tok *tokenizer.Tokenizer, stops []int32,
	ids map[string][]int32, scorers map[string]reward.Scorer) rolloutMaker {
	pc := cfg.Precision
	return rolloutMaker{s: cfg.Sampling, exact: pc.ExactLogProbs, vocab: pc.ExactLogProbs && pc.ExactLogProbsCheck,
		policy: policy, tok: tok, stops: stops, ids: ids, scorers: scorers}
}

// rolloutMaker generates and scores rollouts of training prompts: what a
// training rank (localRollouts) and a generation rank (Generator) share.
type rolloutMaker struct {
	s       SamplingConfig
	exact   bool // precision.exact_logprobs: the sampler's log-probs are π_old
	vocab   bool // precision.exact_logprobs_check: the sampler's rows' digests too
	policy  *model.Model
	tok     *tokenizer.Tokenizer
	stops   []int32
	ids     map[string][]int32       // the prompts' tokens by UID
	scorers map[string]reward.Scorer // by data_source
}

// generate is Trainer.generate for step.
func (m rolloutMaker) generate(ctx context.Context, prompts []data.Prompt, n []int, lo, hi int, seed uint64, step int) ([]rowData, sampler.Stats, error) {
	if lo == hi {
		return nil, sampler.Stats{}, nil
	}
	reqs := make([]sampler.Request, hi-lo)
	for i, p := range prompts[lo:hi] {
		reqs[i] = sampler.Request{UID: p.UID, Prompt: m.ids[p.UID], N: n[lo+i]}
	}
	s := m.s
	params := sampler.Params{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, MaxNewTokens: s.MaxNewTokens,
		StopIDs: m.stops, Seed: seed, Step: step, MaxSlots: s.MaxSlots, // continuous batching: n_i may exceed it
		Graphs: s.CUDAGraphs, KVBudgetBytes: s.KVBudgetBytes(), ExactLogProbs: m.exact, VocabDigests: m.vocab}
	out, st, err := sampler.GenerateStats(ctx, m.policy, reqs, params, nil)
	if err != nil {
		return nil, st, fmt.Errorf("generate: %w", err)
	}
	var rows []rowData
	for i, comps := range out {
		prompt := reqs[i].Prompt
		for _, c := range comps {
			seq := append(append([]int32(nil), prompt...), c.Tokens...)
			rows = append(rows, rowData{prompt: lo + i, tokens: seq, start: len(prompt), group: len(comps),
				truncated: c.Truncated, sampler: c.LogProbs, samplerEnt: c.Entropy, samplerVocab: c.VocabDigests})
		}
	}
	return rows, st, nil
}

// rolloutMetrics fills the response-length and reward metrics of the
// step's rows and returns the number of generated tokens.
func rolloutMetrics(rows []rowData, met *StepMetrics) int {
	tokens, truncated := 0, 0
	var sum, acc, none float64
	for _, r := range rows {
		tokens += len(r.tokens) - r.start
		met.ResponseLenMax = max(met.ResponseLenMax, len(r.tokens)-r.start)
		if r.truncated {
			truncated++
		}
		sum += r.result.Score
		if r.result.Correct {
			acc++
		}
		if r.result.Status == reward.StatusNoAnswer {
			none++
		}
	}
	n := float64(max(len(rows), 1))
	met.ResponseLenMean = float64(tokens) / n
	met.TruncationRate = float64(truncated) / n
	met.RewardMean, met.AccMean, met.NoAnswerRate = sum/n, acc/n, none/n
	return tokens
}

// score runs the verifier on each response (special tokens dropped, docs/algorithm.md §2.3).
func (t *Trainer) score(prompts []data.Prompt, rows []rowData) { t.maker().score(prompts, rows) }

func (m rolloutMaker) score(prompts []data.Prompt, rows []rowData) {
	for i := range rows {
		r := &rows[i]
		p := prompts[r.prompt]
		text := m.tok.Decode32(r.tokens[r.start:], true)
		r.result = m.scorers[p.DataSource].Score(text, p.GroundTruth)
	}
}

// logProbs fills old (current policy) and reference log-probs of every
// response token, micro-batch by micro-batch; in a data-parallel run only
// of the rows of this rank's micro-batches (spans).
func (t *Trainer) logProbs(rows []rowData, spans []microSpan) error {
	for _, s := range t.group.forwardBatches(spans, len(rows), t.Cfg.Train.MicroBatchRows) {
		if err := t.logProbsOf(rows[s.lo:s.hi]); err != nil {
			return err
		}
	}
	return nil
}

// logProbsOf fills the log-probs of one micro-batch. With
// precision.exact_logprobs the sampler's log-probs are π_old, bit for bit
// (docs/algorithm.md §5.10), and the π_old forward runs only to check that
// (precision.exact_logprobs_check).
func (t *Trainer) logProbsOf(rows []rowData) error {
	seqs := sequences(rows)
	pc := t.Cfg.Precision
	if pc.ExactLogProbs {
		if err := samplerOld(rows); err != nil {
			return err
		}
	}
	if !pc.ExactLogProbs || pc.ExactLogProbsCheck {
		p, err := t.oldForward(seqs, rows)
		if err != nil {
			return fmt.Errorf("old log-probs: %w", err)
		}
		p.Release() // only the log-probs are wanted
		for i := range rows {
			if pc.ExactLogProbs {
				if err := sameBits(i, rows[i], p.LogProbs[i], p.Entropy[i]); err != nil {
					return err
				}
			}
			rows[i].old, rows[i].entropy = p.LogProbs[i], p.Entropy[i]
		}
	}
	if err := t.correct(rows); err != nil {
		return err
	}
	if t.Ref == nil {
		for i := range rows {
			rows[i].ref = rows[i].old
		}
		return nil
	}
	resume := model.PauseExact(t.Ref.B) // the reference's log-probs need no batch invariance
	rp, err := t.Ref.Forward(seqs)
	resume()
	if err != nil {
		return fmt.Errorf("reference log-probs: %w", err)
	}
	rp.Release()
	for i := range rows {
		rows[i].ref = rp.LogProbs[i]
	}
	return nil
}

// samplerOld makes the sampler's log-probs and entropies the rows' π_old
// (precision.exact_logprobs).
func samplerOld(rows []rowData) error {
	for i := range rows {
		r := &rows[i]
		n := len(r.tokens) - r.start
		if len(r.sampler) != n || len(r.samplerEnt) != n {
			return fmt.Errorf("precision.exact_logprobs: row %d of the micro-batch has %d response tokens but %d sampler log-probs and %d entropies", i, n, len(r.sampler), len(r.samplerEnt))
		}
		r.old, r.entropy = r.sampler, r.samplerEnt
	}
	return nil
}

// sameBits checks (precision.exact_logprobs_check) that the π_old forward's
// log-probs and entropies of row i equal the sampler's bit for bit.
func sameBits(i int, r rowData, lp, ent []float32) error {
	for k := range lp {
		if math.Float32bits(lp[k]) != math.Float32bits(r.sampler[k]) || math.Float32bits(ent[k]) != math.Float32bits(r.samplerEnt[k]) {
			return fmt.Errorf("precision.exact_logprobs_check: row %d of the micro-batch, response token %d: the sampler's log-prob %v (entropy %v), the π_old forward's %v (%v); the two paths are not batch-invariant",
				i, k, r.sampler[k], r.samplerEnt[k], lp[k], ent[k])
		}
	}
	return nil
}

func sequences(rows []rowData) []model.Sequence {
	seqs := make([]model.Sequence, len(rows))
	for i, r := range rows {
		seqs[i] = model.Sequence{Tokens: r.tokens, Start: r.start}
	}
	return seqs
}

// update runs the PPO epochs over mini-batches (consecutive slices of
// mini_batch_prompts prompts) of micro-batches (spans), and returns the
// per-row loss signal ℓ_r and KL (means over epochs) and the number of
// tokens trained on. In a data-parallel run this rank runs its
// micro-batches, the optimizer's strategy (optim.Strategy) sums the
// gradients over the ranks before the clip, and the rows' signals and the
// logging sums are gathered afterwards.
func (t *Trainer) update(spans []microSpan, rows []rowData, met *StepMetrics) ([]float64, []float64, int, error) {
	signal, kl := make([]float64, len(rows)), make([]float64, len(rows))
	var recs []microRec
	var normSum float64
	var norms int
	epochs := t.Cfg.Train.PPOEpochs
	for epoch := 0; epoch < epochs; epoch++ {
		for k := 0; k < len(spans); {
			// Micro-batches k … end−1 form one mini-batch.
			end := k
			for end < len(spans) && spans[end].mini == spans[k].mini {
				end++
			}
			t.Opt.ZeroGrads()
			k0 := k
			for ; k < end; k++ {
				if !owns(k, t.group.rank(), t.group.size()) {
					continue
				}
				s := spans[k]
				st, err := t.microStep(rows[s.lo:s.hi], s.ga)
				if err != nil {
					return nil, nil, 0, err
				}
				for i := range st.RowSignal {
					signal[s.lo+i] += st.RowSignal[i] / float64(epochs)
					kl[s.lo+i] += st.RowKL[i] / float64(epochs)
				}
				recs = append(recs, microRec{Epoch: epoch, Index: k, Tokens: st.Tokens, Clip: st.ClipCount,
					Lower: st.LowerClipCount, KL: st.KL, PPOKL: st.PPOKL, Policy: st.PolicyLoss})
			}
			if err := t.Opt.Reduce(roundsMissing(k0, end, t.group.rank(), t.group.size())); err != nil {
				return nil, nil, 0, fmt.Errorf("mini-batch %d: %w", spans[end-1].mini, err)
			}
			norm, err := t.Opt.Clip()
			if err != nil {
				return nil, nil, 0, fmt.Errorf("mini-batch %d: %w (stopping; the last checkpoint is kept)", spans[end-1].mini, err)
			}
			lr := t.lr(t.updates)
			if err := t.Opt.Update(lr); err != nil {
				return nil, nil, 0, err
			}
			t.updates++
			met.LR = lr
			normSum += norm
			norms++
		}
	}
	recs, err := t.group.shareUpdate(spans, rows, signal, kl, recs, epochs)
	if err != nil {
		return nil, nil, 0, err
	}
	// The sums in the one-process order (epoch, micro-batch).
	var tokens, clip, lower int
	var klSum, ppoKL, pol float64
	for _, r := range recs {
		tokens += r.Tokens
		clip += r.Clip
		lower += r.Lower
		klSum += r.KL
		ppoKL += r.PPOKL
		pol += r.Policy
	}
	var entSum float64
	var entTokens int
	for _, r := range rows {
		for _, e := range r.entropy {
			entSum += float64(e)
			entTokens++
		}
	}
	tk := float64(max(tokens, 1))
	met.KL, met.PPOKL, met.PolicyLoss = klSum/tk, ppoKL/tk, pol/tk
	met.ClipFrac, met.LowerClipFrac = float64(clip)/tk, float64(lower)/tk
	met.GradNorm = normSum / float64(max(norms, 1))
	met.Entropy = entSum / float64(max(entTokens, 1))
	return signal, kl, tokens, nil
}

// microStep runs forward, loss and backward for one micro-batch,
// accumulating gradients. With train.fused_head the LM head's backward runs
// in the forward, from the loss's per-token derivative computed on the
// backend (model.ForwardLoss); the host's own derivative, computed here for
// the statistics, must match it token for token.
func (t *Trainer) microStep(rows []rowData, ga int) (grpo.MicroStats, error) {
	lr := make([]grpo.Row, len(rows))
	for i, r := range rows {
		lr[i] = grpo.Row{Old: r.old, Ref: r.ref, Adv: r.adv, Weight: r.weight, GroupSize: r.group, IS: r.is, Masked: r.masked}
	}
	var (
		loss *grpo.TokenLoss
		p    *model.Pass
		err  error
	)
	if t.Cfg.Train.FusedHead {
		loss = t.Cfg.Loss.TokenLoss(lr, ga)
		p, err = t.Policy.ForwardLoss(sequences(rows), loss, t.Opt.Grads())
	} else {
		p, err = t.Policy.Forward(sequences(rows))
	}
	if err != nil {
		return grpo.MicroStats{}, fmt.Errorf("policy forward: %w", err)
	}
	for i := range lr {
		lr[i].LogProbs = p.LogProbs[i]
	}
	grads, st := t.Cfg.Loss.MicroBatch(lr, ga)
	if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
		p.Release()
		return st, fmt.Errorf("loss is %v (stopping; the last checkpoint is kept)", st.Loss)
	}
	if loss != nil {
		if err := sameTokenGrads(p.DLogp, grads); err != nil {
			p.Release()
			return st, err
		}
		grads = nil // the head's backward has run
	}
	if err := t.Policy.BackwardFlush(p, grads, t.Opt.Grads(), t.Opt.Flush()); err != nil {
		return st, fmt.Errorf("policy backward: %w", err)
	}
	return st, nil
}

// sameTokenGrads checks the fused head's per-token derivatives (computed
// where the logits are, in float64 as the host does) against the host's:
// within 4 float32 ulps, since a GPU's exp may round its last bit
// differently from Go's. That last bit can also move a ratio or a KL value
// lying within a rounding of a clip bound to the other side, where the two
// branches' derivatives are both valid (the tie of docs/algorithm.md §5.4),
// so up to maxTokenGradFlips tokens a micro-batch may differ; a wrong
// kernel differs on many more.
func sameTokenGrads(dev, host [][]float32) error {
	var first error
	n := 0
	for i := range host {
		for k, h := range host[i] {
			d := dev[i][k]
			if d == h || (d != d && h != h) {
				continue
			}
			m := float32(math.Max(math.Abs(float64(d)), math.Abs(float64(h))))
			ulp := math.Nextafter32(m, float32(math.Inf(1))) - m
			if math.Abs(float64(d-h)) <= 4*float64(ulp) {
				continue
			}
			if n++; first == nil {
				first = fmt.Errorf("sequence %d of the micro-batch, response token %d: the backend's ∂loss/∂log π is %g, the host's %g", i, k, d, h)
			}
		}
	}
	if n > maxTokenGradFlips {
		return fmt.Errorf("fused head: %d tokens' derivatives differ from the host's (train.fused_head: false runs the two-pass head); the first: %w", n, first)
	}
	return nil
}

// maxTokenGradFlips is how many tokens of a micro-batch sameTokenGrads lets
// differ (clip-bound ties).
const maxTokenGradFlips = 2
