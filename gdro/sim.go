package gdro

// sim.go: gdro-sim, a model-free simulator that drives the controllers.
//
// Population: P prompts in D sub-domains. Prompt i (domain d = i mod D) has a
// latent logit θ_i = a_d + 2·z_i − 2·e_i, with a_d spread evenly over
// [1, −1.5], z_i ~ N(0, 1) and e_i ~ Exp(1): a heavy tail of hard prompts.
// Its solve probability is p_i = σ(θ_i).
//
// Step t: the next BatchSize prompts of a per-epoch permutation (a stream, no
// drop_last) are planned by the Controller; rollout j of prompt i is correct
// iff U(seed, t, uid, j) < p_i (counter-based, keyed by step, UID and rollout
// index). GRPO advantages A_ij (rewards ±1, unbiased std, ε = 1e−6) give the
// training pressure g_i = Σ_j A_ij·(c_ij − p_i), c_ij ∈ {0, 1} (the policy
// gradient of a Bernoulli policy with logit θ_i), and the policy moves
//
//	θ_i += LR·w_i·g_i/n̄                          (w_i: Prompt-GDRO multiplier)
//	θ_k += Transfer·mean_{i ∈ batch ∩ d}(Δθ_i)    for every prompt k of domain d
//
// so more rollouts on a prompt with mixed outcomes (token-mean weighting,
// docs/algorithm.md §11 item 14) and larger multipliers push harder, and learning spreads
// within a sub-domain. The per-row loss signal fed to Prompt-GDRO is the
// reference's surrogate with a synthetic ratio drift,
// ℓ_ij = −A_ij·(1 + RatioNoise·ξ_ij), ξ ~ N(0, 1): near zero per bin, as in
// the real reference signal (docs/algorithm.md §6.2).
//
// The JSONL records are Controller.Observe's StepRecords with the WSE fields
// recomputed from the true σ_i² = p_i(1 − p_i) at generation time (the
// estimate from sampled rows is kept in sim_wse_estimated).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/rng"
)

// SimConfig configures the simulator; DefaultSimConfig has the defaults.
type SimConfig struct {
	Steps      int     `yaml:"steps" json:"steps"`
	BatchSize  int     `yaml:"batch_size" json:"batch_size"`
	Population int     `yaml:"population" json:"population"`
	Domains    int     `yaml:"domains" json:"domains"`
	Seed       uint64  `yaml:"seed" json:"seed"`
	LR         float64 `yaml:"lr" json:"lr"`
	Transfer   float64 `yaml:"transfer" json:"transfer"`
	RatioNoise float64 `yaml:"ratio_noise" json:"ratio_noise"`
}

// DefaultSimConfig: 300 steps of 256 prompts from 4096 prompts in 4
// sub-domains, seed 1.
func DefaultSimConfig() SimConfig {
	return SimConfig{Steps: 300, BatchSize: 256, Population: 4096, Domains: 4, Seed: 1,
		LR: 0.3, Transfer: 0.1, RatioNoise: 0.02}
}

// Validate checks the simulator fields.
func (s SimConfig) Validate() error {
	switch {
	case s.Steps < 1 || s.Steps > 1_000_000:
		return fmt.Errorf("gdro sim: steps = %d must be in [1, 1000000]", s.Steps)
	case s.BatchSize < 1 || s.BatchSize > 1<<16:
		return fmt.Errorf("gdro sim: batch_size = %d must be in [1, 65536]", s.BatchSize)
	case s.Population < s.BatchSize || s.Population > 1<<24:
		return fmt.Errorf("gdro sim: population = %d must be in [batch_size = %d, 16777216]", s.Population, s.BatchSize)
	case s.Domains < 1 || s.Domains > s.Population:
		return fmt.Errorf("gdro sim: domains = %d must be in [1, population]", s.Domains)
	case !finite(s.LR) || s.LR < 0:
		return fmt.Errorf("gdro sim: lr = %v must be finite and ≥ 0", s.LR)
	case !finite(s.Transfer) || s.Transfer < 0 || s.Transfer > 1:
		return fmt.Errorf("gdro sim: transfer = %v must be in [0, 1]", s.Transfer)
	case !finite(s.RatioNoise) || s.RatioNoise < 0:
		return fmt.Errorf("gdro sim: ratio_noise = %v must be finite and ≥ 0", s.RatioNoise)
	}
	return nil
}

// stream tags keep the simulator's draws independent of each other.
const (
	tagPop uint64 = iota + 1
	tagPerm
	tagRoll
	tagRatio
)

// SimRecord holds simulator-only fields of a StepRecord.
type SimRecord struct {
	SolveMean      float64 `json:"sim_solve_mean"`       // mean latent solve probability over the population
	BatchSolveMean float64 `json:"sim_batch_solve_mean"` // same over the step's prompts
	WSEEstimated   float64 `json:"sim_wse_estimated"`    // WSE from the sampled rows, as the trainer sees it
	// WSEBestRatio is the smallest wse_ratio any per-class allocation could
	// reach this step (n_b ∝ σ_b, continuous, arm bounds ignored).
	WSEBestRatio float64 `json:"sim_wse_best_ratio"`
}

// SimSummary condenses a simulation.
type SimSummary struct {
	Steps       int    `json:"steps"`
	Method      string `json:"method"`
	RolloutMode string `json:"rollout_mode,omitempty"`
	// WSEReduction is the mean over steps of 1 − wse/wse_uniform;
	// WSEReductionLate the same over the second half of the run.
	WSEReduction     float64 `json:"wse_reduction"`
	WSEReductionLate float64 `json:"wse_reduction_late"`
	// WSEReductionBest is the mean of 1 − sim_wse_best_ratio: what the
	// best per-class allocation (square-root law, arm bounds ignored) would
	// have reached with the same bins.
	WSEReductionBest float64 `json:"wse_reduction_best"`
	// MeanBinFirst/Last average mean_bin over the first and last tenth of
	// the steps; MeanBinSlope is its least-squares slope per 100 steps.
	MeanBinFirst float64 `json:"mean_bin_first"`
	MeanBinLast  float64 `json:"mean_bin_last"`
	MeanBinSlope float64 `json:"mean_bin_slope_per100"`
	// SolveFirst/Last are the population's mean solve probability at the
	// first and last step.
	SolveFirst float64 `json:"solve_first"`
	SolveLast  float64 `json:"solve_last"`
	// MuFinal is μ after the last step, MuMeanLate its mean over the second half.
	MuFinal    float64 `json:"mu_final"`
	MuMeanLate float64 `json:"mu_mean_late"`
	// ArmProbMaxDev is the largest |p_b(a) − 1/K| seen over all steps and
	// classes in the DP.
	ArmProbMaxDev float64 `json:"arm_prob_max_dev"`
	// FinalArmProb, FinalBinN: the last step's arm probabilities (C, K) and
	// arms (C); FinalBinCount its prompts per class.
	FinalArmProb  [][]float64 `json:"final_arm_prob,omitempty"`
	FinalBinN     []int       `json:"final_bin_n,omitempty"`
	FinalBinCount []int       `json:"final_bin_count"`
	Arms          []int       `json:"arms,omitempty"`
	BinLabels     []string    `json:"bin_labels"`
	// BudgetExactFrac is the fraction of steps whose total hit N·n̄ exactly.
	BudgetExactFrac float64 `json:"budget_exact_frac"`
	// LeadLag[k+3] is corr(Δμ_t, Δmean_bin_{t+k}) for k = −3…3 (Δμ leads for
	// k > 0).
	LeadLag []float64 `json:"lead_lag,omitempty"`
	// Prompt-GDRO: the last step's multiplier per class (C) and the largest
	// row multiplier over the run.
	FinalBinMult []float64 `json:"final_bin_mult,omitempty"`
	MultMax      float64   `json:"mult_max,omitempty"`
}

// Simulate runs the simulator with the controller configuration cfg, writes
// one StepRecord per line to out (nil: none) and, when trace is non-nil, a
// replay trace with max-arm outcomes per prompt (see replay.go). Two runs
// with the same arguments produce identical bytes.
func Simulate(cfg Config, sc SimConfig, out, trace io.Writer) (*SimSummary, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	ctrl, err := New(cfg)
	if err != nil {
		return nil, err
	}
	sim := newSimulator(cfg, sc, ctrl)
	w := newSimWriters(out, trace)
	tally := newSimTally(cfg, sc.Steps, ctrl)
	for t := 1; t <= sc.Steps; t++ {
		st, rec, err := sim.step(t, w.trace != nil)
		if err != nil {
			return nil, err
		}
		tally.add(t, rec, st.plan)
		if err := w.write(rec, st.trace); err != nil {
			return nil, err
		}
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return tally.summary(cfg.Rollout.Enabled), nil
}

// simulator is the simulated population and policy, and the controller
// that plans its steps.
type simulator struct {
	sc        SimConfig
	ctrl      *Controller
	theta     []float64 // (P) latent logits
	nbar      int       // n̄
	maxArm    int       // rollouts per prompt in the trace: the largest arm (n̄ without Rollout-GDRO)
	perm      []int     // the permutation of epoch permEpoch
	permEpoch int
}

// simStep is one step's batch and what was drawn for it.
type simStep struct {
	t      int
	batch  []int    // (N) population indices
	uids   []string // (N)
	plan   *Plan
	rows   Rows       // (R) the step's rows, prompt-contiguous
	probs  []float64  // (N) solve probability p_i at generation
	sig2   []float64  // (N) σ_i² = p_i(1 − p_i)
	dTheta []float64  // (N) the prompt's own logit step
	trace  *TraceStep // nil without a trace
}

func newSimulator(cfg Config, sc SimConfig, ctrl *Controller) *simulator {
	s := &simulator{sc: sc, ctrl: ctrl, theta: population(sc), nbar: cfg.Rollout.NMean, permEpoch: -1}
	arms := cfg.Rollout.ArmList()
	s.maxArm = arms[len(arms)-1]
	if !cfg.Rollout.Enabled {
		s.maxArm = s.nbar
	}
	return s
}

// population draws the latent logits θ_i (P) of the file doc.
func population(sc SimConfig) []float64 {
	P, D := sc.Population, sc.Domains
	theta := make([]float64, P)
	for i := range theta {
		d := i % D
		a := 1.0
		if D > 1 {
			a = 1.0 - 2.5*float64(d)/float64(D-1)
		}
		s := rng.NewStream(sc.Seed, tagPop, uint64(i))
		theta[i] = a + 2*s.Normal() - 2*(-math.Log(1-s.Float64()))
	}
	return theta
}

func simUID(i int) string { return "sim:" + strconv.Itoa(i) }

// step simulates training step t: the controller plans the batch, its
// rollouts are drawn (with traced, also the trace's), the controller
// observes them, then the policy moves; the record's WSE fields are the
// oracle's (see oracle).
func (s *simulator) step(t int, traced bool) (*simStep, *StepRecord, error) {
	st, err := s.generate(t, traced)
	if err != nil {
		return nil, nil, err
	}
	rec, err := s.ctrl.Observe(st.plan, st.rows)
	if err != nil {
		return nil, nil, err
	}
	// policy update after the step's data were generated
	s.updatePolicy(st.batch, st.dTheta)
	s.oracle(rec, st)
	return st, rec, nil
}

// generate plans step t's batch and draws its rollouts.
func (s *simulator) generate(t int, traced bool) (*simStep, error) {
	batch, uids := s.nextBatch(t)
	plan, err := s.ctrl.Plan(uids)
	if err != nil {
		return nil, err
	}
	w, err := s.ctrl.Weights(plan)
	if err != nil {
		return nil, err
	}
	R := plan.Rows()
	st := &simStep{t: t, batch: batch, uids: uids, plan: plan,
		rows:  Rows{Loss: make([]float64, 0, R), Correct: make([]bool, 0, R)},
		probs: make([]float64, len(batch)), sig2: make([]float64, len(batch)), dTheta: make([]float64, len(batch))}
	if traced {
		st.trace = &TraceStep{Step: t, Prompts: make([]TracePrompt, len(batch))}
	}
	for k := range batch {
		s.rollouts(st, k, w.Prompt[k])
	}
	return st, nil
}

// nextBatch is step t's prompts, the next BatchSize of the epochs'
// permutations read as one stream (no drop_last), and their UIDs.
func (s *simulator) nextBatch(t int) ([]int, []string) {
	sc, P := s.sc, s.sc.Population
	batch := make([]int, sc.BatchSize)
	uids := make([]string, sc.BatchSize)
	for k := range batch {
		pos := (t-1)*sc.BatchSize + k
		if e := pos / P; e != s.permEpoch {
			s.perm, s.permEpoch = permutation(P, rng.NewStream(sc.Seed, tagPerm, uint64(e))), e
		}
		batch[k] = s.perm[pos%P]
		uids[k] = simUID(batch[k])
	}
	return batch, uids
}

// rollouts draws the rollouts of st's prompt k, whose Prompt-GDRO
// multiplier is weight: its plan's n become the step's rows and give its
// logit step; with a trace, maxArm are drawn (the first n the same) and
// all go into the trace.
func (s *simulator) rollouts(st *simStep, k int, weight float64) {
	p := sigmoid(s.theta[st.batch[k]])
	st.probs[k], st.sig2[k] = p, p*(1-p)
	h := rng.HashString(st.uids[k])
	m := st.plan.N[k]
	if st.trace != nil && s.maxArm > m {
		m = s.maxArm
	}
	corr := make([]bool, m)
	for j := range corr {
		corr[j] = rng.UniformAt(s.sc.Seed, tagRoll, uint64(st.t), h, uint64(j)) < p
	}
	adv := grpoAdvantages(corr[:st.plan.N[k]])
	g := 0.0
	for j, a := range adv {
		r := 0.0
		if corr[j] {
			r = 1
		}
		g += a * (r - p)
		st.rows.Correct = append(st.rows.Correct, corr[j])
		st.rows.Loss = append(st.rows.Loss, surrogate(a, s.sc.RatioNoise, s.sc.Seed, st.t, h, j))
	}
	st.dTheta[k] = s.sc.LR * weight * g / float64(s.nbar)
	if st.trace != nil {
		tp := TracePrompt{UID: st.uids[k], Correct: corr, Loss: make([]float64, m)}
		for j, a := range grpoAdvantages(corr) {
			tp.Loss[j] = surrogate(a, s.sc.RatioNoise, s.sc.Seed, st.t, h, j)
		}
		st.trace.Prompts[k] = tp
	}
}

// updatePolicy moves each batch prompt's logit by its step and every
// prompt of a domain by Transfer times the mean step of the domain's
// batch prompts.
func (s *simulator) updatePolicy(batch []int, dTheta []float64) {
	D := s.sc.Domains
	domSum := make([]float64, D)
	domCnt := make([]int, D)
	for k, i := range batch {
		s.theta[i] += dTheta[k]
		domSum[i%D] += dTheta[k]
		domCnt[i%D]++
	}
	for i := range s.theta {
		if d := i % D; domCnt[d] > 0 {
			s.theta[i] += s.sc.Transfer * domSum[d] / float64(domCnt[d])
		}
	}
}

// oracle sets rec's WSE fields from the true σ_i² at generation (the
// controller's estimate from the rows goes to sim_wse_estimated) and its
// simulator fields, the population's after the policy update.
func (s *simulator) oracle(rec *StepRecord, st *simStep) {
	sr := &SimRecord{WSEEstimated: rec.WSE}
	rec.WSE, rec.WSEUniform, rec.WSERatio = wseOf(st.sig2, st.plan.N, s.nbar)
	for _, p := range st.probs {
		sr.BatchSolveMean += p
	}
	sr.BatchSolveMean /= float64(len(st.probs))
	sr.SolveMean = popSolveMean(s.theta)
	sr.WSEBestRatio = bestRatio(st.plan.Classes, st.sig2, s.ctrl.cls.NumClasses())
	rec.SimRecord = sr
}

// simWriters buffer the records and the trace (nil: not written).
type simWriters struct{ rec, trace *bufio.Writer }

func newSimWriters(out, trace io.Writer) simWriters {
	var w simWriters
	if out != nil {
		w.rec = bufio.NewWriter(out)
	}
	if trace != nil {
		w.trace = bufio.NewWriter(trace)
	}
	return w
}

// write writes a step's record and, when traced, its trace.
func (w simWriters) write(rec *StepRecord, tr *TraceStep) error {
	if w.rec != nil {
		if err := writeJSONLine(w.rec, rec); err != nil {
			return err
		}
	}
	if tr != nil {
		if err := writeJSONLine(w.trace, tr); err != nil {
			return err
		}
	}
	return nil
}

func (w simWriters) flush() error {
	for _, f := range []*bufio.Writer{w.rec, w.trace} {
		if f != nil {
			if err := f.Flush(); err != nil {
				return fmt.Errorf("gdro sim: %w", err)
			}
		}
	}
	return nil
}

// simTally gathers, step by step, what the summary is made of.
type simTally struct {
	sum      *SimSummary
	meanBins []float64 // (T) mean_bin
	mus      []float64 // (T+1) μ before each step, then after the last
	reds     []float64 // (T) 1 − wse_ratio
	bestReds []float64 // (T) 1 − sim_wse_best_ratio
	exact    int       // steps whose total hit N·n̄ exactly
	last     *StepRecord
}

func newSimTally(cfg Config, steps int, ctrl *Controller) *simTally {
	sum := &SimSummary{Steps: steps, Method: ctrl.Method(), BinLabels: ctrl.Labels()}
	if cfg.Rollout.Enabled {
		sum.RolloutMode, sum.Arms = cfg.Rollout.Mode, cfg.Rollout.ArmList()
	}
	return &simTally{sum: sum, meanBins: make([]float64, steps), mus: make([]float64, steps+1),
		reds: make([]float64, steps), bestReds: make([]float64, steps)}
}

// add takes in step t's record and plan.
func (y *simTally) add(t int, rec *StepRecord, plan *Plan) {
	sum, sr := y.sum, rec.SimRecord
	if t == 1 {
		sum.SolveFirst = sr.SolveMean
	}
	sum.SolveLast = sr.SolveMean
	if pr := rec.PromptRecord; pr != nil {
		sum.MultMax = math.Max(sum.MultMax, pr.MultMax)
		sum.FinalBinMult = pr.BinMult
	}
	y.meanBins[t-1] = rec.MeanBin
	y.reds[t-1] = 1 - rec.WSERatio
	y.bestReds[t-1] = 1 - sr.WSEBestRatio
	if rr := rec.RolloutRecord; rr != nil {
		y.mus[t-1] = rr.Mu
		y.mus[t] = rr.Mu + rr.DMu
		if rr.BudgetExact {
			y.exact++
		}
		K := float64(len(rr.Arms))
		for _, b := range plan.Alloc.Order {
			for _, p := range rr.ArmProb[b] {
				sum.ArmProbMaxDev = math.Max(sum.ArmProbMaxDev, math.Abs(p-1/K))
			}
		}
	}
	y.last = rec
}

// summary completes the summary after the last step.
func (y *simTally) summary(rollout bool) *SimSummary {
	summarize(y.sum, y.meanBins, y.mus, y.reds, y.exact, y.last, rollout)
	y.sum.WSEReductionBest = mean(y.bestReds)
	return y.sum
}

func summarize(sum *SimSummary, meanBins, mus, reds []float64, exact int, last *StepRecord, rollout bool) {
	T := len(meanBins)
	sum.WSEReduction = mean(reds)
	sum.WSEReductionLate = mean(reds[T/2:])
	tenth := max(1, T/10)
	sum.MeanBinFirst = mean(meanBins[:tenth])
	sum.MeanBinLast = mean(meanBins[T-tenth:])
	sum.MeanBinSlope = 100 * slope(meanBins)
	sum.FinalBinCount = last.BinCount
	if !rollout {
		return
	}
	sum.MuFinal = mus[T]
	sum.MuMeanLate = mean(mus[T/2+1 : T+1])
	sum.BudgetExactFrac = float64(exact) / float64(T)
	sum.FinalArmProb, sum.FinalBinN = last.ArmProb, last.BinN
	dmu := make([]float64, T)
	dbin := make([]float64, T)
	for t := 0; t < T; t++ {
		dmu[t] = mus[t+1] - mus[t]
		if t > 0 {
			dbin[t] = meanBins[t] - meanBins[t-1]
		}
	}
	sum.LeadLag = make([]float64, 7)
	for k := -3; k <= 3; k++ {
		var a, b []float64
		for t := 1; t < T; t++ {
			if u := t + k; u >= 1 && u < T {
				a = append(a, dmu[t])
				b = append(b, dbin[u])
			}
		}
		sum.LeadLag[k+3] = Pearson(a, b)
	}
}

// Format renders the summary for a terminal.
func (s *SimSummary) Format() string {
	var b strings.Builder
	mode := s.Method
	if s.RolloutMode != "" {
		mode += " (" + s.RolloutMode + ")"
	}
	fmt.Fprintf(&b, "gdro-sim: %d steps, method %s\n", s.Steps, mode)
	fmt.Fprintf(&b, "  WSE vs uniform n̄: mean relative reduction %.1f%% (second half %.1f%%; best per-bin allocation %.1f%%)\n",
		100*s.WSEReduction, 100*s.WSEReductionLate, 100*s.WSEReductionBest)
	fmt.Fprintf(&b, "  mean bin index: %.2f (first 10%%) → %.2f (last 10%%), slope %+.3f per 100 steps\n", s.MeanBinFirst, s.MeanBinLast, s.MeanBinSlope)
	fmt.Fprintf(&b, "  population solve rate: %.3f → %.3f\n", s.SolveFirst, s.SolveLast)
	if s.FinalBinMult != nil {
		fmt.Fprintf(&b, "  Prompt-GDRO: largest multiplier %.3f; last step's multipliers (bin 0 = hardest): %s\n",
			s.MultMax, fmtFloats(s.FinalBinMult, "%.2f"))
	}
	if s.RolloutMode == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "  mu: final %.4f, mean over second half %.4f; budget exact on %.0f%% of steps\n", s.MuFinal, s.MuMeanLate, 100*s.BudgetExactFrac)
	fmt.Fprintf(&b, "  arm probabilities: max |p − 1/K| over all steps %.4f\n", s.ArmProbMaxDev)
	fmt.Fprintf(&b, "  lead-lag corr(Δμ_t, Δmean_bin_t+k), k=-3..3: %s\n", fmtFloats(s.LeadLag, "%+.2f"))
	fmt.Fprintf(&b, "  last step (arms %d…%d):\n", s.Arms[0], s.Arms[len(s.Arms)-1])
	if s.RolloutMode == ModeReferenceCompat {
		b.WriteString("    (reference_compat: n_b goes to the prompts at the positions of the previous step's class-b prompts)\n")
	}
	for c, l := range s.BinLabels {
		if s.FinalBinCount[c] == 0 && s.FinalBinN[c] == 0 {
			continue
		}
		p := s.FinalArmProb[c]
		best, worst := 0, 0
		for j := range p {
			if p[j] > p[best] {
				best = j
			}
			if p[j] < p[worst] {
				worst = j
			}
		}
		probs := fmt.Sprintf("p uniform (%.3f)", p[0])
		if p[best]-p[worst] > 1e-12 {
			probs = fmt.Sprintf("argmax p: n=%d (p=%.3f, p(n_min)=%.3f, p(n_max)=%.3f)", s.Arms[best], p[best], p[0], p[len(p)-1])
		}
		fmt.Fprintf(&b, "    %-12s prompts %4d  n_b %2d  %s\n", l, s.FinalBinCount[c], s.FinalBinN[c], probs)
	}
	return b.String()
}

func fmtFloats(v []float64, f string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, " ")
}

// grpoAdvantages returns the GRPO advantages of one group for math_dapo
// rewards ±1 (ε = 1e−6, no clip), computed by grpo.Advantages — the function
// the trainer uses (docs/algorithm.md §5.2), so a single-rollout group keeps
// its raw reward here too.
func grpoAdvantages(correct []bool) []float64 {
	r := make([]float64, len(correct))
	for j, ok := range correct {
		r[j] = -1
		if ok {
			r[j] = 1
		}
	}
	return grpo.Group(r, 1e-6, 0)
}

// surrogate is the simulated loss signal −A·(1 + noise·ξ), ξ keyed by
// (step, UID, rollout index); +0 replaces −0 so the JSON stays tidy.
func surrogate(adv, noise float64, seed uint64, step int, uidHash uint64, j int) float64 {
	xi := rng.NewStream(seed, tagRatio, uint64(step), uidHash, uint64(j)).Normal()
	return -adv*(1+noise*xi) + 0
}

// permutation is a Fisher–Yates shuffle of 0..n−1 driven by s.
func permutation(n int, s *rng.Stream) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := s.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// bestRatio is Σ_b q_b σ_b / sqrt(Σ_b q_b σ_b²) with σ_b² the mean of σ_i²
// over class b: the WSE ratio of the square-root-law allocation n_b ∝ σ_b.
func bestRatio(classes []int, sig2 []float64, C int) float64 {
	s := make([]float64, C)
	k := make([]int, C)
	for i, c := range classes {
		s[c] += sig2[i]
		k[c]++
	}
	num, den := 0.0, 0.0
	N := float64(len(classes))
	for c := range s {
		if k[c] > 0 {
			q := float64(k[c]) / N
			num += q * math.Sqrt(s[c]/float64(k[c]))
			den += q * s[c] / float64(k[c])
		}
	}
	if den == 0 {
		return 1
	}
	return num / math.Sqrt(den)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func popSolveMean(theta []float64) float64 {
	s := 0.0
	for _, t := range theta {
		s += sigmoid(t)
	}
	return s / float64(len(theta))
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// slope is the least-squares slope of v against its index.
func slope(v []float64) float64 {
	n := float64(len(v))
	if n < 2 {
		return 0
	}
	mx, my := (n-1)/2, mean(v)
	num, den := 0.0, 0.0
	for i, y := range v {
		dx := float64(i) - mx
		num += dx * (y - my)
		den += dx * dx
	}
	return num / den
}

// Pearson is Pearson's correlation of a and b, 0 when either side is
// constant or shorter than 2 (the report's lead–lag figure uses it too).
func Pearson(a, b []float64) float64 {
	if len(a) < 2 {
		return 0
	}
	ma, mb := mean(a), mean(b)
	sab, saa, sbb := 0.0, 0.0, 0.0
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

func writeJSONLine(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("gdro: encoding record: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("gdro: writing record: %w", err)
	}
	return nil
}
