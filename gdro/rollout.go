package gdro

// rollout.go: Rollout-GDRO (docs/algorithm.md §7) in two modes.
//
// paper (default) — what the paper describes and the reference intended,
// fixed (docs/algorithm.md §11 items 1–5):
//
//   - The current prompts are classified before generation and every prompt
//     gets its own class's arm (no stale positional labels).
//   - Each class b keeps an estimate û_b(a) of every arm's utility, pooled
//     over the class so that one stale draw cannot pin an arm:
//     variance (default): û_b(a) = 4·v̄_b·(1 − n̄/a) for every arm, v̄_b an
//     EMA (weight β, first observation initializes) of the unbiased
//     within-prompt variance of correctness over all the class's prompts,
//     whatever arm they used (the estimate of σ² does not depend on the
//     arm that measured it); neg_loss / loss: û_b(a) = L_b + δ_b(a), with
//     L_b an EMA of the class's pooled utility (∓ its mean row loss over
//     all its rows) and δ_b(a) an EMA, over the steps arm a was used, of
//     its utility minus the class's level before that step. An arm that has
//     not been used for a while follows its class's level instead of
//     keeping a stale value, and an arm never used reads the level. A
//     class never observed reads 0 for every arm. (Each step a class uses
//     one arm, so a per-arm EMA alone would freeze every other arm.)
//   - Arm probabilities use the Lagrangian score
//     s_b(a) = û_b(a) − μ·(a − n̄):  p_b = (1 − γ)·softmax(η·s_b) + γ/K.
//     This is the paper's arm loss L_b(a) = −Ĵ_b(a) + μ·a up to the
//     per-class constant μ·n̄, which the softmax ignores.
//   - The step's arms come from the DP of dp.go. dp_weight bin (default,
//     the paper's): the configuration of highest joint probability
//     Π_b p_b(n_b) under the exact budget, cost −ln max(p_b(a), 1e−12) per
//     class. Its μ terms add up to −η·μ·Σ_b n_b, which the budget does not
//     fix, so μ shapes the allocation: at the dual equilibrium (the
//     unconstrained choices spend n̄ on average) the DP returns them, while
//     a μ held at 0 leaves every class at its largest useful arm and the DP
//     cuts the classes with the most prompts hardest. dp_weight prompt:
//     cost c_b·(−ln p), each class weighted by its prompt count; the μ terms
//     then sum to μ·(T − N·n̄) = 0 and cancel, and the DP maximizes
//     Σ_b c_b·û_b(n_b) (up to the γ floor), the exact primal solution for
//     the current estimates, whatever μ.
//   - μ moves by projected dual ascent on the violation of the unconstrained
//     per-class choices n_b^u (argmax_a s_b(a), ties to the arm nearest n̄,
//     or E_{p_b}[n] with dual_signal: expected):
//     v = Σ_b q̂_b·n_b^u − n̄,  μ ← clip(μ + α_μ·v, 0, μ_max).
//     μ rises when the unconstrained choices overspend and falls when they
//     underspend; the DP keeps every step exactly on budget.
//   - Utility (RolloutConfig.Utility). variance: u = 4·σ̂²·(1 − n̄/a) is the
//     reduction of the variance proxy σ²/n relative to n̄ rollouts, scaled so
//     a prompt with solve rate ½ gives u ∈ [1 − n̄/n_min, 1 − n̄/n_max]. Its
//     best response is a* = 2σ·√(n̄/μ) ∝ σ (the square-root law), which gives
//     classes that are never or always solved (σ = 0) the smallest arm.
//     neg_loss: u = −mean ℓ_r, the paper's main-text utility Ĵ_b = −mean
//     loss (with the reference's surrogate ℓ it is near 0 at ρ = 1, so its
//     allocation follows μ and the within-step drift); loss: u = +mean ℓ_r
//     (the reference's dead adversarial sign).
//
// reference_compat — bug for bug (docs/algorithm.md §7.4, §7.6, §7.7):
//
//   - Class counts come from the previous step's stored labels, in their
//     first-appearance order, and prompt i of this step gets the arm of the
//     previous step's label i. Step 1, or a stored list of another length:
//     every prompt gets n̄.
//   - The stored labels are those of rows 0, n̄, 2n̄, …, (N−1)·n̄ of this step's
//     prompt-contiguous row list (stride = the configured n̄, not n_i).
//   - Arm scores and μ are never updated: probabilities stay uniform, μ stays
//     at mu_init, and the DP returns the lexicographically smallest
//     exact-budget arm vector. The DP cost is unweighted, −ln max(p, 1e−12).
//   - Not reproduced: the proportional fallback allocator of docs/algorithm.md §7.9 (never
//     reached with contiguous arms; an inexact DP result is returned as is
//     with Exact = false) and the double Prompt-GDRO EMA update (docs/algorithm.md §11 item 20).

import (
	"fmt"
	"math"
)

// RolloutState is the serializable state of Rollout-GDRO.
type RolloutState struct {
	Mu float64 `json:"mu"` // shadow price μ
	// Score (C, K): paper mode with a loss utility, the EMA offset δ_b(a) of
	// arm a's utility from its class's level (û_b(a) = Level_b + δ_b(a));
	// unused (0) with the variance utility; reference_compat, the
	// reference's arm sums, which it never updates (0).
	Score [][]float64 `json:"score"`
	Count [][]int     `json:"count"` // (C, K) steps each arm was used in each class
	Var   []float64   `json:"var"`   // (C) EMA v̄_b of the class's within-prompt variance of correctness (variance utility)
	// Level (C) is the EMA of the class's pooled utility, ∓ its mean row
	// loss (loss utilities). Absent in checkpoints written before it
	// existed; Restore reads those as 0.
	Level []float64 `json:"level,omitempty"`
	// PrevLabels (reference_compat) are the labels stored by the last step
	// for the next allocation (N); nil before the first step.
	PrevLabels []int `json:"prev_labels,omitempty"`
}

// Rollout is the Rollout-GDRO allocator.
type Rollout struct {
	cfg      RolloutConfig
	arms     []int // (K)
	nClasses int
	st       RolloutState
	dp       dpScratch
}

// NewRollout returns Rollout-GDRO over nClasses classes.
func NewRollout(cfg RolloutConfig, nClasses int) (*Rollout, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if nClasses < 1 {
		return nil, fmt.Errorf("gdro rollout: need ≥ 1 class, got %d", nClasses)
	}
	r := &Rollout{cfg: cfg, arms: cfg.ArmList(), nClasses: nClasses}
	r.st = RolloutState{Mu: cfg.MuInit, Score: zeros2(nClasses, len(r.arms)), Count: izeros2(nClasses, len(r.arms)),
		Var: make([]float64, nClasses), Level: make([]float64, nClasses)}
	return r, nil
}

func zeros2(a, b int) [][]float64 {
	m := make([][]float64, a)
	for i := range m {
		m[i] = make([]float64, b)
	}
	return m
}

func izeros2(a, b int) [][]int {
	m := make([][]int, a)
	for i := range m {
		m[i] = make([]int, b)
	}
	return m
}

// Arms returns the arm list (K).
func (r *Rollout) Arms() []int { return append([]int(nil), r.arms...) }

// Mu returns the shadow price μ.
func (r *Rollout) Mu() float64 { return r.st.Mu }

// Allocation is Rollout-GDRO's decision for one step.
type Allocation struct {
	// N is the rollout count of each prompt (N).
	N []int `json:"n"`
	// BinN is the arm of each class (C); 0 for classes the DP did not see.
	BinN []int `json:"bin_n"`
	// BinCount is the number of prompts per class that drove the DP (C): the
	// current labels in paper mode, the previous step's in reference_compat.
	BinCount []int `json:"bin_count"`
	// Order lists the classes in DP order (first appearance).
	Order []int `json:"order"`
	// ArmProb are the arm probabilities at decision time (C, K).
	ArmProb [][]float64 `json:"arm_prob"`
	// Unconstrained is each class's unconstrained choice n_b^u (C), 0 if absent.
	Unconstrained []float64 `json:"unconstrained"`
	// Violation is Σ_b q̂_b·n_b^u − n̄ (paper mode; 0 in reference_compat).
	Violation float64 `json:"violation"`
	// Mu is μ used for this decision.
	Mu float64 `json:"mu"`
	// Target is N·n̄, Total is Σ n_i, Exact is Total == Target.
	Target int  `json:"target"`
	Total  int  `json:"total"`
	Exact  bool `json:"exact"`
	// UsingPrev (reference_compat) is true when stored labels drove the DP.
	UsingPrev bool `json:"using_prev"`
}

// armProbs returns p_b (K) for class b (docs/algorithm.md §7.2 form, paper-mode scores).
func (r *Rollout) armProbs(b int, p []float64) {
	K := len(r.arms)
	zmax := math.Inf(-1)
	for j, a := range r.arms {
		s := r.st.Score[b][j]
		if r.cfg.Mode == ModePaper {
			s = r.utility(b, j) - r.st.Mu*float64(a-r.cfg.NMean)
		}
		p[j] = r.cfg.Eta * s
		zmax = math.Max(zmax, p[j])
	}
	sum := 0.0
	for j := range p {
		p[j] = math.Exp(p[j] - zmax)
		sum += p[j]
	}
	for j := range p {
		soft := 1 / float64(K)
		if sum > 0 && !math.IsInf(sum, 0) {
			soft = p[j] / sum
		}
		p[j] = (1-r.cfg.Gamma)*soft + r.cfg.Gamma/float64(K)
	}
}

// unconstrained is class b's unconstrained choice under the dual signal.
func (r *Rollout) unconstrained(b int, p []float64) float64 {
	if r.cfg.DualSignal == DualExpected {
		e := 0.0
		for j, a := range r.arms {
			e += p[j] * float64(a)
		}
		return e
	}
	best, bestS := 0, math.Inf(-1)
	for j, a := range r.arms {
		s := r.utility(b, j) - r.st.Mu*float64(a-r.cfg.NMean)
		// ties go to the arm nearest n̄, then to the smaller arm
		if s > bestS || (s == bestS && absInt(a-r.cfg.NMean) < absInt(r.arms[best]-r.cfg.NMean)) {
			best, bestS = j, s
		}
	}
	return float64(r.arms[best])
}

// utility is û_b(a) for arm index j, pooled over class b (see the file
// doc): 4·v̄_b·(1 − n̄/a) for the variance utility, the class's level plus
// the arm's offset for the loss utilities; 0 for a class never observed.
func (r *Rollout) utility(b, j int) float64 {
	if r.cfg.Utility == UtilityVariance {
		return 4 * r.st.Var[b] * (1 - float64(r.cfg.NMean)/float64(r.arms[j]))
	}
	return r.st.Level[b] + r.st.Score[b][j]
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Allocate decides the rollout counts for a step whose prompts have the
// given classes (N), classified before generation. It does not change the
// state.
func (r *Rollout) Allocate(classes []int) (*Allocation, error) {
	N := len(classes)
	if N == 0 {
		return nil, fmt.Errorf("gdro rollout: empty batch")
	}
	for i, c := range classes {
		if c < 0 || c >= r.nClasses {
			return nil, fmt.Errorf("gdro rollout: prompt %d has class %d, outside [0, %d)", i, c, r.nClasses)
		}
	}
	al := r.newAllocation(N)
	drive := classes
	if r.cfg.Mode == ModeReferenceCompat {
		if r.st.PrevLabels == nil || len(r.st.PrevLabels) != N {
			for i := range al.N {
				al.N[i] = r.cfg.NMean
			}
			al.Total, al.Exact, al.Order = al.Target, true, []int{}
			return al, nil
		}
		drive = r.st.PrevLabels
		al.UsingPrev = true
	}
	for _, c := range drive {
		if al.BinCount[c] == 0 {
			al.Order = append(al.Order, c)
		}
		al.BinCount[c]++
	}
	counts, cost := r.dpCosts(al)
	res, err := r.dp.match(counts, r.arms, cost, al.Target)
	if err != nil {
		return nil, err
	}
	for k, b := range al.Order {
		al.BinN[b] = res.Arms[k]
	}
	for i, c := range drive {
		al.N[i] = al.BinN[c]
	}
	al.Total, al.Exact = res.Total, res.Exact
	if r.cfg.Mode == ModePaper {
		for _, b := range al.Order {
			al.Unconstrained[b] = r.unconstrained(b, al.ArmProb[b])
			al.Violation += float64(al.BinCount[b]) / float64(N) * al.Unconstrained[b]
		}
		al.Violation -= float64(r.cfg.NMean)
	}
	return al, nil
}

// newAllocation is an empty allocation for N prompts with the current
// arm probabilities and μ.
func (r *Rollout) newAllocation(N int) *Allocation {
	al := &Allocation{
		N:             make([]int, N),
		BinN:          make([]int, r.nClasses),
		BinCount:      make([]int, r.nClasses),
		ArmProb:       make([][]float64, r.nClasses),
		Unconstrained: make([]float64, r.nClasses),
		Mu:            r.st.Mu,
		Target:        N * r.cfg.NMean,
	}
	for b := range al.ArmProb {
		al.ArmProb[b] = make([]float64, len(r.arms))
		r.armProbs(b, al.ArmProb[b])
	}
	return al
}

// dpCosts are the DP's groups, al's classes in al.Order: their prompt
// counts and arm costs −ln max(p_b(a), 1e−12), times the prompt count
// under dp_weight prompt (paper mode).
func (r *Rollout) dpCosts(al *Allocation) ([]int, [][]float64) {
	counts := make([]int, len(al.Order))
	cost := make([][]float64, len(al.Order))
	for k, b := range al.Order {
		counts[k] = al.BinCount[b]
		cost[k] = make([]float64, len(r.arms))
		w := 1.0 // the paper's joint probability: one factor per class
		if r.cfg.Mode == ModePaper && r.cfg.DPWeight == DPWeightPrompt {
			w = float64(counts[k])
		}
		for j := range r.arms {
			cost[k][j] = w * -math.Log(math.Max(al.ArmProb[b][j], 1e-12))
		}
	}
	return counts, cost
}

// RolloutUpdate is what Rollout.Observe changed.
type RolloutUpdate struct {
	// Utility is the utility observed per class and arm this step (C, K);
	// NaN-free: entries without an observation are 0 and Observed is false.
	Utility  [][]float64 `json:"utility"`
	Observed [][]bool    `json:"observed"`
	// DMu is μ_{t+1} − μ_t.
	DMu float64 `json:"dmu"`
}

// Observe updates arm utilities and μ (paper mode) or stores the next
// step's positional labels (reference_compat). classes and n are the step's
// labels and realized rollout counts (N), al the step's allocation, rows the
// outcomes (R = Σ n).
func (r *Rollout) Observe(classes, n []int, al *Allocation, rows Rows) (*RolloutUpdate, error) {
	R, err := checkBatch(classes, n, r.nClasses)
	if err != nil {
		return nil, err
	}
	if al == nil {
		return nil, fmt.Errorf("gdro rollout: Observe needs the step's allocation")
	}
	if len(rows.Correct) != R {
		return nil, fmt.Errorf("gdro rollout: %d rows but %d correctness values", R, len(rows.Correct))
	}
	K := len(r.arms)
	up := &RolloutUpdate{Utility: zeros2(r.nClasses, K), Observed: make([][]bool, r.nClasses)}
	for b := range up.Observed {
		up.Observed[b] = make([]bool, K)
	}
	if r.cfg.Mode == ModeReferenceCompat {
		r.st.PrevLabels = positionalLabels(classes, n, r.cfg.NMean, R)
		return up, nil
	}
	needLoss := r.cfg.Utility == UtilityNegLoss || r.cfg.Utility == UtilityLoss
	if needLoss && len(rows.Loss) != R {
		return nil, fmt.Errorf("gdro rollout: utility %q needs %d per-row losses, got %d", r.cfg.Utility, R, len(rows.Loss))
	}
	obs, err := r.gather(classes, n, rows)
	if err != nil {
		return nil, err
	}
	for b := 0; b < r.nClasses; b++ {
		if obs.pooledN[b] > 0 { // absent classes keep their estimates
			r.updateClass(b, obs, up)
		}
	}
	old := r.st.Mu
	r.st.Mu = math.Max(0, math.Min(r.cfg.MuMax, old+r.cfg.DualLR*al.Violation))
	up.DMu = r.st.Mu - old
	return up, nil
}

// positionalLabels are the labels reference_compat stores (N): those of
// rows 0, n̄, 2n̄, … of the prompt-contiguous row list (R rows).
func positionalLabels(classes, n []int, nbar, R int) []int {
	owner := make([]int, 0, R) // (R) class of each row
	for i, c := range classes {
		for j := 0; j < n[i]; j++ {
			owner = append(owner, c)
		}
	}
	prev := make([]int, len(classes))
	for i := range prev {
		pos := i * nbar
		if pos >= R {
			pos = R - 1 // cannot happen when Σ n_i = N·n̄
		}
		prev[i] = owner[pos]
	}
	return prev
}

// armObs is a step's observations per (class, arm): Σ of the utility's
// raw terms and their number — the unbiased within-prompt variance per
// prompt (variance), the row loss per row (neg_loss, loss) — and the same
// pooled per class over its arms.
type armObs struct {
	acc     [][]float64 // (C, K)
	cnt     [][]int     // (C, K)
	pooled  []float64   // (C)
	pooledN []int       // (C)
}

func (o *armObs) add(c, j int, x float64) {
	o.acc[c][j] += x
	o.cnt[c][j]++
	o.pooled[c] += x
	o.pooledN[c]++
}

// gather collects the step's observations, prompt by prompt; a prompt
// whose count is not an arm, or a non-finite loss, is an error.
func (r *Rollout) gather(classes, n []int, rows Rows) (*armObs, error) {
	K := len(r.arms)
	armIdx := make(map[int]int, K)
	for j, a := range r.arms {
		armIdx[a] = j
	}
	o := &armObs{acc: zeros2(r.nClasses, K), cnt: izeros2(r.nClasses, K),
		pooled: make([]float64, r.nClasses), pooledN: make([]int, r.nClasses)}
	row := 0
	for i, c := range classes {
		j, ok := armIdx[n[i]]
		if !ok {
			return nil, fmt.Errorf("gdro rollout: prompt %d used %d rollouts, which is not an arm %v", i, n[i], r.arms)
		}
		switch r.cfg.Utility {
		case UtilityVariance:
			o.add(c, j, withinVariance(rows.Correct[row:row+n[i]]))
		default:
			for _, l := range rows.Loss[row : row+n[i]] {
				if !finite(l) {
					return nil, fmt.Errorf("gdro rollout: row of prompt %d has non-finite loss %v", i, l)
				}
				o.add(c, j, l)
			}
		}
		row += n[i]
	}
	return o, nil
}

// withinVariance is the unbiased variance of one prompt's correctness
// over its rollouts.
func withinVariance(correct []bool) float64 {
	k := 0
	for _, ok := range correct {
		if ok {
			k++
		}
	}
	m := float64(len(correct))
	return float64(k) * (m - float64(k)) / (m * (m - 1))
}

// updateClass moves class b's estimates by the step's observations: its
// pooled value (v̄_b, or the level L_b), then each arm it used — the
// utility reported in up and, for the loss utilities, the arm's offset
// δ_b(a) from the class's level before this step (from this step's
// pooled value on the class's first step).
func (r *Rollout) updateClass(b int, o *armObs, up *RolloutUpdate) {
	sign := 1.0 // loss utilities: u = sign · mean ℓ
	if r.cfg.Utility == UtilityNegLoss {
		sign = -1
	}
	first := true
	for _, k := range r.st.Count[b] {
		first = first && k == 0
	}
	pm := o.pooled[b] / float64(o.pooledN[b])
	prevLevel := r.st.Level[b]
	switch r.cfg.Utility {
	case UtilityVariance:
		r.st.Var[b] = r.ema(r.st.Var[b], pm, first)
	default:
		r.st.Level[b] = r.ema(prevLevel, sign*pm, first)
	}
	for j, a := range r.arms {
		if o.cnt[b][j] == 0 {
			continue
		}
		mean := o.acc[b][j] / float64(o.cnt[b][j])
		u := sign * mean
		if r.cfg.Utility == UtilityVariance {
			u = 4 * mean * (1 - float64(r.cfg.NMean)/float64(a))
		} else {
			ref := prevLevel
			if first {
				ref = r.st.Level[b]
			}
			r.st.Score[b][j] = r.ema(r.st.Score[b][j], u-ref, r.st.Count[b][j] == 0)
		}
		up.Utility[b][j], up.Observed[b][j] = u, true
		r.st.Count[b][j]++
	}
}

// ema is the EMA step of weight β from old towards x; x itself on a first
// observation.
func (r *Rollout) ema(old, x float64, first bool) float64 {
	if first {
		return x
	}
	beta := r.cfg.EMABeta
	return (1-beta)*old + beta*x
}

// ArmProbs returns the current arm probabilities of every class (C, K).
func (r *Rollout) ArmProbs() [][]float64 {
	p := zeros2(r.nClasses, len(r.arms))
	for b := range p {
		r.armProbs(b, p[b])
	}
	return p
}

// State returns a deep copy of the state.
func (r *Rollout) State() RolloutState {
	s := RolloutState{Mu: r.st.Mu, Score: make([][]float64, r.nClasses), Count: make([][]int, r.nClasses),
		Var: append([]float64(nil), r.st.Var...), Level: append([]float64(nil), r.st.Level...)}
	for b := range s.Score {
		s.Score[b] = append([]float64(nil), r.st.Score[b]...)
		s.Count[b] = append([]int(nil), r.st.Count[b]...)
	}
	if r.st.PrevLabels != nil {
		s.PrevLabels = append([]int{}, r.st.PrevLabels...)
	}
	return s
}

// Restore replaces the state, checking shapes and values.
func (r *Rollout) Restore(s RolloutState) error {
	K := len(r.arms)
	if len(s.Score) != r.nClasses || len(s.Count) != r.nClasses || len(s.Var) != r.nClasses {
		return fmt.Errorf("gdro rollout state: want %d classes, got score %d, count %d, var %d", r.nClasses, len(s.Score), len(s.Count), len(s.Var))
	}
	for b, v := range s.Var {
		if !finite(v) || v < 0 {
			return fmt.Errorf("gdro rollout state: class %d has variance %v", b, v)
		}
	}
	level := s.Level
	if level == nil { // a checkpoint written before Level existed
		level = make([]float64, r.nClasses)
	}
	if len(level) != r.nClasses {
		return fmt.Errorf("gdro rollout state: want %d classes, got level %d", r.nClasses, len(level))
	}
	for b, v := range level {
		if !finite(v) {
			return fmt.Errorf("gdro rollout state: class %d has level %v", b, v)
		}
	}
	if !(s.Mu >= 0 && s.Mu <= r.cfg.MuMax) {
		return fmt.Errorf("gdro rollout state: mu = %v outside [0, %v]", s.Mu, r.cfg.MuMax)
	}
	for b := 0; b < r.nClasses; b++ {
		if len(s.Score[b]) != K || len(s.Count[b]) != K {
			return fmt.Errorf("gdro rollout state: class %d has %d scores and %d counts, want %d arms", b, len(s.Score[b]), len(s.Count[b]), K)
		}
		for j := 0; j < K; j++ {
			if !finite(s.Score[b][j]) || s.Count[b][j] < 0 {
				return fmt.Errorf("gdro rollout state: class %d arm %d has score %v, count %d", b, r.arms[j], s.Score[b][j], s.Count[b][j])
			}
		}
	}
	for i, c := range s.PrevLabels {
		if c < 0 || c >= r.nClasses {
			return fmt.Errorf("gdro rollout state: prev_labels[%d] = %d outside [0, %d)", i, c, r.nClasses)
		}
	}
	r.st = RolloutState{Mu: s.Mu, Score: zeros2(r.nClasses, K), Count: izeros2(r.nClasses, K),
		Var: append([]float64(nil), s.Var...), Level: append([]float64(nil), level...)}
	for b := range s.Score {
		copy(r.st.Score[b], s.Score[b])
		copy(r.st.Count[b], s.Count[b])
	}
	if s.PrevLabels != nil {
		r.st.PrevLabels = append([]int{}, s.PrevLabels...)
	}
	return nil
}
