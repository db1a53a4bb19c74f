package report

// paper.go: the paper's measurements, by its definitions
// (docs/algorithm.md §8.1), computed from a run's logs: the lead–lag gap
// Δμ(t) = μ_weight(t) − μ_data(t), the weighted standard error with σ̂_b
// estimated once per run, Figure 1's tail averages, the share of the
// rollout budget that goes to the hard bins, and validation grouped by the
// initial model's pass rate (worst bin, AIME 24/25 averaged, the peak
// checkpoint). The figures are in paperfig.go.
//
// Two quantities the report also draws keep their own names because they
// are not the paper's: the correlation of Δμ_t (the shadow price's step
// change, dmu) with later changes of the mean bin (dyn_lead_lag_corr) and
// the per-step WSE proxy the controller logs (wse, wse_uniform, wse_ratio;
// dyn_wse_step).
//
// Dimension legend as in data.go: T steps, C classes, B accuracy bins
// (C − 1 with accbin_excl), P validation prompts.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/gdro"
)

// TailQuantile is where Figure 1's tail starts: the steps at or above the
// 60th percentile of the run's steps.
const TailQuantile = 0.6

// meanBinOf is Σ_{b<B} b·d_b / Σ_{b<B} d_b, the mean bin index under the
// distribution d over classes (accbin_excl, class B, not counted); ok is
// false when d has no mass on the bins.
func meanBinOf(d []float64, B int) (float64, bool) {
	num, den := 0.0, 0.0
	for b := 0; b < B && b < len(d); b++ {
		num += float64(b) * d[b]
		den += d[b]
	}
	if den <= 0 {
		return 0, false
	}
	return num / den, true
}

// Distributions over the classes that MeanBinUnder understands.
const (
	DistShare   = "share"   // the prompt share q̂_b (bin_share)
	DistWeight  = "weight"  // Prompt-GDRO's p_b (bin_weight)
	DistRollout = "rollout" // the share of the step's rollouts (RolloutShare)
)

// dist returns the distribution over classes of one record, nil when the
// record does not log it.
func dist(rec Record, which string) []float64 {
	switch which {
	case DistShare:
		return rec.Arrays["bin_share"]
	case DistWeight:
		return rec.Arrays["bin_weight"]
	case DistRollout:
		return RolloutShare(rec)
	}
	panic("report: unknown distribution " + which) // constant callers
}

// MeanBinUnder is μ_which(t), the mean bin index under a distribution over
// the bins renormalised without accbin_excl, at the steps that log it; ok
// is false when no step does.
func (r *Run) MeanBinUnder(which string) (s Series, ok bool) {
	s.Label = "μ_" + which
	B := r.NumBins()
	for _, rec := range r.Records {
		d := dist(rec, which)
		if d == nil {
			continue
		}
		if m, has := meanBinOf(d, B); has {
			s.X = append(s.X, float64(rec.Step))
			s.Y = append(s.Y, m)
		}
	}
	return s, s.Len() > 0
}

// LeadLagGap is the paper's lead–lag Δμ(t) = μ_which(t) − μ_data(t) at the
// steps that have both (which = DistWeight for Prompt-GDRO, DistRollout for
// Rollout-GDRO's budget); positive: the controller's mass sits on easier
// bins than the data, negative: on harder ones.
func (r *Run) LeadLagGap(which string) (Series, bool) {
	w, ok := r.MeanBinUnder(which)
	if !ok {
		return Series{}, false
	}
	data, _ := r.MeanBinUnder(DistShare)
	at := map[float64]float64{}
	for i, x := range data.X {
		at[x] = data.Y[i]
	}
	g := Series{Label: "Δμ = μ_" + which + " − μ_data"}
	for i, x := range w.X {
		if d, has := at[x]; has {
			g.X = append(g.X, x)
			g.Y = append(g.Y, w.Y[i]-d)
		}
	}
	return g, g.Len() > 0
}

// binRows is the number of rollouts class c had at a step,
// bin_count·bin_n_mean (bin_share·num_prompts when bin_count is absent).
func binRows(rec Record, c int) float64 {
	n := rec.Arrays["bin_n_mean"][c]
	if cnt, ok := rec.Arrays["bin_count"]; ok {
		return cnt[c] * n
	}
	return rec.Arrays["bin_share"][c] * rec.Scalars["num_prompts"] * n
}

// SigmaHat estimates σ̂_b once for the whole run, as the paper does: p̄_b is
// bin b's correctness over every rollout it had in the run (Σ_t rows·acc /
// Σ_t rows, rows = bin_count·bin_n_mean) and σ̂_b = sqrt(p̄_b·(1 − p̄_b)),
// the standard deviation of one 0/1 reward in the bin. A ±1 reward has
// twice this spread, a factor every WSE ratio cancels. Classes with no
// rollouts get NaN. ok is false without bin_acc or bin_n_mean.
func (r *Run) SigmaHat() (sigma, pbar []float64, ok bool) {
	if !r.hasArray("bin_acc") || !r.hasArray("bin_n_mean") {
		return nil, nil, false
	}
	C := len(r.Labels)
	rows, hits := make([]float64, C), make([]float64, C)
	for _, rec := range r.Records {
		acc, nm := rec.Arrays["bin_acc"], rec.Arrays["bin_n_mean"]
		if acc == nil || nm == nil {
			continue
		}
		for c := 0; c < C; c++ {
			if rec.Arrays["bin_share"][c] <= 0 {
				continue
			}
			n := binRows(rec, c)
			rows[c] += n
			hits[c] += n * acc[c]
		}
	}
	sigma, pbar = make([]float64, C), make([]float64, C)
	for c := range sigma {
		if rows[c] <= 0 {
			sigma[c], pbar[c] = math.NaN(), math.NaN()
			continue
		}
		p := hits[c] / rows[c]
		pbar[c] = p
		sigma[c] = math.Sqrt(math.Max(0, p*(1-p)))
	}
	return sigma, pbar, true
}

// WeightsNotApplied is the number of steps whose Prompt-GDRO weights were
// computed and logged but not applied to the advantages (weights_applied
// false: a Rollout-GDRO run, or prompt.apply off).
func (r *Run) WeightsNotApplied() int {
	n := 0
	for _, rec := range r.Records {
		if applied, ok := rec.Flags["weights_applied"]; ok && !applied && rec.Arrays["bin_weight"] != nil {
			n++
		}
	}
	return n
}

// hasArray reports whether any record has the per-class array key.
func (r *Run) hasArray(key string) bool {
	for _, rec := range r.Records {
		if _, ok := rec.Arrays[key]; ok {
			return true
		}
	}
	return false
}

// PaperWSE is the paper's weighted standard error per step,
//
//	WSE(t) = Σ_b q_t(b)·σ̂_b/√n_b(t),
//
// with q_t(b) the prompt share (bin_share), n_b(t) the rollouts per prompt
// the class received (bin_n_mean), σ̂_b from SigmaHat; uni is the same with
// every n_b = n̄(t) = Σ_b q_t(b)·n_b(t), the uniform allocation of the same
// budget (n̄ whenever the budget is met), and ratio = wse/uni (steps where
// uni is 0 are left out of ratio). Sums run over the classes with prompts.
func (r *Run) PaperWSE() (wse, uni, ratio Series, ok bool) {
	sigma, _, ok := r.SigmaHat()
	if !ok {
		return
	}
	wse.Label, uni.Label, ratio.Label = "WSE", "WSE uniform", "WSE / WSE uniform"
	for _, rec := range r.Records {
		q, nm := rec.Arrays["bin_share"], rec.Arrays["bin_n_mean"]
		if nm == nil {
			continue
		}
		w, nbar := 0.0, 0.0
		for c := range q {
			if q[c] > 0 && nm[c] > 0 {
				w += q[c] * sigma[c] / math.Sqrt(nm[c])
				nbar += q[c] * nm[c]
			}
		}
		if nbar <= 0 {
			continue
		}
		u := 0.0
		for c := range q {
			if q[c] > 0 && nm[c] > 0 {
				u += q[c] * sigma[c] / math.Sqrt(nbar)
			}
		}
		x := float64(rec.Step)
		wse.X, wse.Y = append(wse.X, x), append(wse.Y, w)
		uni.X, uni.Y = append(uni.X, x), append(uni.Y, u)
		if u > 0 {
			ratio.X, ratio.Y = append(ratio.X, x), append(ratio.Y, w/u)
		}
	}
	return wse, uni, ratio, wse.Len() > 0
}

// TailStart is the q-th percentile of the run's steps with linear
// interpolation between order statistics (numpy's default): for steps
// 1…T it is 1 + q·(T − 1). Figure 1 averages the steps ≥ TailStart(0.6).
func (r *Run) TailStart(q float64) float64 {
	x := make([]float64, len(r.Records))
	for i, rec := range r.Records {
		x[i] = float64(rec.Step)
	}
	sort.Float64s(x)
	pos := q * float64(len(x)-1)
	i := int(math.Floor(pos))
	if i >= len(x)-1 {
		return x[len(x)-1]
	}
	return x[i] + (pos-float64(i))*(x[i+1]-x[i])
}

// tail returns the records at or above TailStart(TailQuantile).
func (r *Run) tail() []Record {
	from := r.TailStart(TailQuantile)
	var out []Record
	for _, rec := range r.Records {
		if float64(rec.Step) >= from-1e-9 {
			out = append(out, rec)
		}
	}
	return out
}

// TailBars are Figure 1's bars: per class, a tail average over the steps
// at or above the 60th percentile, and the uniform reference.
type TailBars struct {
	From  float64   // first step of the tail (TailStart)
	Steps int       // steps averaged
	Mean  []float64 // (C) the tail average per class
	// Uniform is the uniform line: 1/C for the weights, n̄ for rollouts.
	Uniform float64
	// UniformPresent is, for the weights, the tail average of the uniform
	// distribution over the classes present at each step (1/K_t where the
	// class is present, 0 where absent): what Mean would be if Prompt-GDRO
	// weighted the present classes equally. nil for rollouts.
	UniformPresent []float64 // (C)
}

// TailWeights is Figure 1's Prompt-GDRO panel: the tail average of p_b
// (bin_weight; 0 at the steps class b has no prompts, so the bars sum to
// 1) against the uniform 1/C. ok is false without Prompt-GDRO fields.
func (r *Run) TailWeights() (TailBars, bool) {
	if !r.hasArray("bin_weight") {
		return TailBars{}, false
	}
	C := len(r.Labels)
	tb := TailBars{From: r.TailStart(TailQuantile), Mean: make([]float64, C), UniformPresent: make([]float64, C), Uniform: 1 / float64(C)}
	for _, rec := range r.tail() {
		w := rec.Arrays["bin_weight"]
		if w == nil {
			continue
		}
		tb.Steps++
		K := 0
		for _, q := range rec.Arrays["bin_share"] {
			if q > 0 {
				K++
			}
		}
		for c := range tb.Mean {
			tb.Mean[c] += w[c]
			if rec.Arrays["bin_share"][c] > 0 {
				tb.UniformPresent[c] += 1 / float64(K)
			}
		}
	}
	if tb.Steps == 0 {
		return TailBars{}, false
	}
	for c := range tb.Mean {
		tb.Mean[c] /= float64(tb.Steps)
		tb.UniformPresent[c] /= float64(tb.Steps)
	}
	return tb, true
}

// TailRollouts is Figure 1's Rollout-GDRO panel: per class the tail
// average of the rollouts per prompt it received (bin_n_mean), over the
// tail steps where the class has prompts (NaN if none), against n̄, the
// tail average of Σ_b q̂_b·n_b(t). ok is false without Rollout-GDRO fields.
func (r *Run) TailRollouts() (TailBars, bool) {
	if !r.hasArray("bin_n") || !r.hasArray("bin_n_mean") {
		return TailBars{}, false
	}
	C := len(r.Labels)
	tb := TailBars{From: r.TailStart(TailQuantile), Mean: make([]float64, C)}
	cnt := make([]int, C)
	for _, rec := range r.tail() {
		nm := rec.Arrays["bin_n_mean"]
		if nm == nil {
			continue
		}
		tb.Steps++
		for c, q := range rec.Arrays["bin_share"] {
			if q > 0 {
				tb.Mean[c] += nm[c]
				cnt[c]++
				tb.Uniform += q * nm[c]
			}
		}
	}
	if tb.Steps == 0 {
		return TailBars{}, false
	}
	tb.Uniform /= float64(tb.Steps)
	for c := range tb.Mean {
		if cnt[c] == 0 {
			tb.Mean[c] = math.NaN()
		} else {
			tb.Mean[c] /= float64(cnt[c])
		}
	}
	return tb, true
}

// HighBins is H, the number of "high" (hard) bins: the hardest half,
// bins 0 … ⌊B/2⌋ − 1 (the middle bin of an odd B not counted). The paper
// numbers its bins the other way round, so its high bins are our low ones
// (docs/algorithm.md §11 item 22).
func (r *Run) HighBins() int { return r.NumBins() / 2 }

// HighBinBudget is the share of each step's rollouts that goes to the
// high (hardest) bins, Σ_{b<H} RolloutShare_b, beside the prompt share of
// the same bins (what the budget share would be with n̄ rollouts for every
// prompt). ok is false without Rollout-GDRO fields or with fewer than 2
// bins.
func (r *Run) HighBinBudget() (budget, prompts Series, ok bool) {
	H := r.HighBins()
	if H < 1 {
		return
	}
	budget.Label = fmt.Sprintf("share of the rollouts to bins 0–%d", H-1)
	prompts.Label = fmt.Sprintf("share of the prompts in bins 0–%d", H-1)
	if H == 1 {
		budget.Label, prompts.Label = "share of the rollouts to bin 0", "share of the prompts in bin 0"
	}
	for _, rec := range r.Records {
		rs := RolloutShare(rec)
		if rs == nil {
			continue
		}
		x := float64(rec.Step)
		b, p := 0.0, 0.0
		for c := 0; c < H; c++ {
			b += rs[c]
			p += rec.Arrays["bin_share"][c]
		}
		budget.X, budget.Y = append(budget.X, x), append(budget.Y, b)
		prompts.X, prompts.Y = append(prompts.X, x), append(prompts.Y, p)
	}
	return budget, prompts, budget.Len() > 0
}

// ---------------------------------------------------------------------------
// Validation by difficulty bin.

// runClassifier is the part of config.yaml the report reads.
type runClassifier struct {
	GDRO struct {
		Classifier gdro.ClassifierConfig `yaml:"classifier"`
	} `yaml:"gdro"`
}

// ClassifierEdges are the bin edges of the run's classifier from
// config.yaml (gdro.classifier.edges, or j/B for num_bins B), or an error
// saying why there are none.
func (r *Run) ClassifierEdges() ([]float64, error) {
	if r.Config == "" {
		return nil, errors.New("no " + ConfigFile + " (it holds the classifier's bin edges)")
	}
	var rc runClassifier
	if err := yaml.Unmarshal([]byte(r.Config), &rc); err != nil {
		return nil, fmt.Errorf("%s: %w", r.ConfigPath, err)
	}
	c := rc.GDRO.Classifier
	if len(c.Edges) == 0 && c.NumBins >= 2 {
		for j := 1; j < c.NumBins; j++ {
			c.Edges = append(c.Edges, float64(j)/float64(c.NumBins))
		}
	}
	if len(c.Edges) == 0 {
		return nil, fmt.Errorf("no gdro.classifier.edges or num_bins in %s", r.ConfigPath)
	}
	return c.Edges, nil
}

// binOf is the classifier's raw bin of a solve rate (docs/algorithm.md
// §4.4): the first j with acc < e_j, else len(edges).
func binOf(acc float64, edges []float64) int {
	for j, e := range edges {
		if acc < e {
			return j
		}
	}
	return len(edges)
}

// ValBins is the validation set grouped by difficulty: each prompt's bin is
// the classifier's bin of its pass rate c/n at the first validation (step
// 0, before any training), and every later validation is read per bin.
type ValBins struct {
	Edges  []float64 // the classifier's edges (B − 1)
	Bin    []int     // (P) bin of each validation prompt
	Count  []int     // (B) prompts per bin
	Acc    []Series  // (B) mean accuracy c/n of the bin's prompts per validation step (empty for a bin with no prompts)
	Worst  Series    // the lowest bin accuracy at each validation step
	WorstB []int     // the bin that was worst, per point of Worst
	// Skipped notes validation lines left out (a different prompt count).
	Skipped []string
}

// ValByBin groups the validation prompts by the initial model's pass rate
// (see ValBins); err says why it cannot (no step-0 validation, no
// prompt_correct, no bin edges).
func (r *Run) ValByBin() (*ValBins, error) {
	if len(r.Val) == 0 {
		return nil, errors.New("no " + ValidationFile)
	}
	ref := r.Val[0]
	if *ref.Step != 0 {
		return nil, fmt.Errorf("no step-0 validation (the first is at step %d; validation.before_training gives one)", *ref.Step)
	}
	if len(ref.PromptCorrect) == 0 || ref.N <= 0 {
		return nil, errors.New("the step-0 validation has no prompt_correct (written by newer trainers)")
	}
	edges, err := r.ClassifierEdges()
	if err != nil {
		return nil, err
	}
	B := len(edges) + 1
	vb := &ValBins{Edges: edges, Bin: make([]int, len(ref.PromptCorrect)), Count: make([]int, B), Acc: make([]Series, B)}
	for i, c := range ref.PromptCorrect {
		vb.Bin[i] = binOf(float64(c)/float64(ref.N), edges)
		vb.Count[vb.Bin[i]]++
	}
	for b := range vb.Acc {
		lo, hi := 0.0, 1.0
		if b > 0 {
			lo = edges[b-1]
		}
		rng := fmt.Sprintf("[%g, 1]", lo)
		if b < len(edges) {
			hi = edges[b]
			rng = fmt.Sprintf("[%g, %g)", lo, hi)
		}
		vb.Acc[b].Label = fmt.Sprintf("bin %d, pass rate %s (%d prompts)", b, rng, vb.Count[b])
	}
	vb.Worst.Label = "worst bin"
	for _, v := range r.Val {
		if len(v.PromptCorrect) != len(ref.PromptCorrect) || v.N <= 0 {
			vb.Skipped = append(vb.Skipped, fmt.Sprintf("step %d: %d prompts, the step-0 validation has %d", *v.Step, len(v.PromptCorrect), len(ref.PromptCorrect)))
			continue
		}
		sum := make([]float64, B)
		for i, c := range v.PromptCorrect {
			sum[vb.Bin[i]] += float64(c) / float64(v.N)
		}
		x := float64(*v.Step)
		worst, wb := math.Inf(1), -1
		for b := range sum {
			if vb.Count[b] == 0 {
				continue
			}
			a := sum[b] / float64(vb.Count[b])
			vb.Acc[b].X, vb.Acc[b].Y = append(vb.Acc[b].X, x), append(vb.Acc[b].Y, a)
			if a < worst {
				worst, wb = a, b
			}
		}
		vb.Worst.X, vb.Worst.Y = append(vb.Worst.X, x), append(vb.Worst.Y, worst)
		vb.WorstB = append(vb.WorstB, wb)
	}
	return vb, nil
}

// aimeYear is 2024 or 2025 for an AIME benchmark's data_source
// (HuggingFaceH4/aime_2024, MathArena/aime_2025, or the short names
// aime24 / aime25), else 0.
func aimeYear(source string) int {
	s := strings.ToLower(source)
	if i := strings.LastIndex(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	if !strings.Contains(s, "aime") {
		return 0
	}
	switch {
	case strings.HasSuffix(s, "2024") || strings.HasSuffix(s, "24"):
		return 2024
	case strings.HasSuffix(s, "2025") || strings.HasSuffix(s, "25"):
		return 2025
	}
	return 0
}

// AIMEAverage is the paper's "AIME" column: the mean of the AIME 2024 and
// AIME 2025 values at each validation that has both, for mean@n and for
// pass@n (k = n, the largest k). names are the two data_sources; ok is
// false unless both are in validation.jsonl.
func (r *Run) AIMEAverage() (mean, pass Series, names [2]string, ok bool) {
	for _, b := range r.Benchmarks() {
		switch aimeYear(b) {
		case 2024:
			names[0] = b
		case 2025:
			names[1] = b
		}
	}
	if names[0] == "" || names[1] == "" {
		return mean, pass, names, false
	}
	mean.Label, pass.Label = "AIME mean@n", "AIME pass@n"
	for _, v := range r.Val {
		a, b := v.Benchmarks[names[0]], v.Benchmarks[names[1]]
		if a == nil || b == nil {
			continue
		}
		x := float64(*v.Step)
		if a.MeanAcc != nil && b.MeanAcc != nil {
			mean.X, mean.Y = append(mean.X, x), append(mean.Y, (*a.MeanAcc+*b.MeanAcc)/2)
			if v.N > 0 {
				mean.Label = fmt.Sprintf("AIME mean@%d", v.N)
			}
		}
		k := fmt.Sprintf("pass@%d", v.N)
		pa, oka := a.PassAtK[k]
		pb, okb := b.PassAtK[k]
		if oka && okb {
			pass.X, pass.Y = append(pass.X, x), append(pass.Y, (pa+pb)/2)
			pass.Label = "AIME " + k
		}
	}
	return mean, pass, names, mean.Len() > 0 || pass.Len() > 0
}

// Peak is the validation with the best mean accuracy and its checkpoint.
type Peak struct {
	Step    int
	MeanAcc float64
	// Checkpoint is RUN/checkpoints/step_NNNNNNNN; Exists says whether the
	// folder is there (checkpoints are pruned to the last few, docs/checkpoints.md).
	Checkpoint string
	Exists     bool
}

// PeakCheckpoint is the validation step with the highest mean_acc (the
// earliest on ties); ok is false without validation.
func (r *Run) PeakCheckpoint() (Peak, bool) {
	var pk Peak
	found := false
	for _, v := range r.Val {
		if v.MeanAcc == nil {
			continue
		}
		if !found || *v.MeanAcc > pk.MeanAcc {
			pk.Step, pk.MeanAcc, found = *v.Step, *v.MeanAcc, true
		}
	}
	if !found {
		return pk, false
	}
	name := fmt.Sprintf("step_%08d", pk.Step)
	pk.Checkpoint = filepath.Join("checkpoints", name)
	if r.Dir != "" {
		pk.Checkpoint = filepath.Join(r.Dir, "checkpoints", name)
		_, err := os.Stat(pk.Checkpoint)
		pk.Exists = err == nil
	}
	return pk, true
}
