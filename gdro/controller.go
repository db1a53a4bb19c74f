package gdro

// controller.go: the Controller that sequences the classifier, Prompt-GDRO
// and Rollout-GDRO in the order of docs/algorithm.md §1.2–1.3 (fixed as in §11 items 1–2),
// the per-step metrics record (the JSONL schema shared by gdro-sim,
// gdro-replay and the trainer's metrics.jsonl) and the checkpoint state.

import (
	"fmt"
	"math"
)

// StateVersion is the version of State's JSON layout.
const StateVersion = 1

// Controller runs the GDRO controllers for one training run. Per step:
//
//	plan, err := c.Plan(uids)           // classify (history < t), allocate n_i
//	// generate plan.N[i] rollouts of prompt i, score them, GRPO advantages
//	w, err := c.Weights(plan)           // advantage multipliers w.Row (R)
//	// actor update with advantages × w.Row; record ℓ_r (unweighted advantage)
//	rec, err := c.Observe(plan, rows)   // scores, arms, μ, classifier history
//
// Not safe for concurrent use.
type Controller struct {
	cfg     Config
	cls     *Classifier
	prompt  *Prompt  // nil when Prompt-GDRO is off
	rollout *Rollout // nil when Rollout-GDRO is off
	step    int      // completed steps
}

// New builds a Controller from a validated configuration.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cls, err := NewClassifier(cfg.Classifier)
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, cls: cls}
	if cfg.Prompt.Enabled {
		if c.prompt, err = NewPrompt(cfg.Prompt, cls.NumBins(), cls.NumClasses()); err != nil {
			return nil, err
		}
	}
	if cfg.Rollout.Enabled {
		if c.rollout, err = NewRollout(cfg.Rollout, cls.NumClasses()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Config returns the configuration.
func (c *Controller) Config() Config { return c.cfg }

// Labels returns the class labels, index 0 = accbin_0 (hardest).
func (c *Controller) Labels() []string { return c.cls.Labels() }

// Classifier, Prompt and Rollout expose the components (Prompt and Rollout
// are nil when disabled).
func (c *Controller) Classifier() *Classifier { return c.cls }
func (c *Controller) Prompt() *Prompt         { return c.prompt }
func (c *Controller) Rollout() *Rollout       { return c.rollout }

// Step is the number of completed (observed) steps.
func (c *Controller) Step() int { return c.step }

// Method names the active controllers: grpo, prompt, rollout or
// prompt+rollout.
func (c *Controller) Method() string {
	switch {
	case c.prompt != nil && c.rollout != nil:
		return "prompt+rollout"
	case c.prompt != nil:
		return "prompt"
	case c.rollout != nil:
		return "rollout"
	}
	return "grpo"
}

// Plan is one step's decisions before generation.
type Plan struct {
	Step    int         `json:"step"`            // 1-based step this plan is for
	UIDs    []string    `json:"uids"`            // (N)
	Classes []int       `json:"classes"`         // (N) class per prompt, 0 = hardest
	N       []int       `json:"n"`               // (N) rollouts per prompt
	Alloc   *Allocation `json:"alloc,omitempty"` // Rollout-GDRO details, nil when off
}

// Rows returns R = Σ_i N[i], the number of rows the step must produce.
func (p *Plan) Rows() int {
	r := 0
	for _, n := range p.N {
		r += n
	}
	return r
}

// Plan classifies the step's prompts (history of earlier steps only; the
// hysteresis memory is updated) and allocates their rollout counts.
func (c *Controller) Plan(uids []string) (*Plan, error) {
	if len(uids) == 0 {
		return nil, fmt.Errorf("gdro: step %d: empty batch", c.step+1)
	}
	classes, err := c.cls.Bins(uids)
	if err != nil {
		return nil, fmt.Errorf("gdro: step %d: %w", c.step+1, err)
	}
	p := &Plan{Step: c.step + 1, UIDs: append([]string(nil), uids...), Classes: classes}
	if c.rollout != nil {
		if p.Alloc, err = c.rollout.Allocate(classes); err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
		p.N = append([]int(nil), p.Alloc.N...)
	} else {
		p.N = make([]int, len(uids))
		for i := range p.N {
			p.N[i] = c.cfg.Rollout.NMean
		}
	}
	return p, nil
}

// Weights returns the advantage multipliers for a plan. Row (R) and Prompt
// (N) are what the trainer multiplies advantages by: all ones when
// Prompt-GDRO is off or prompt.apply is false (BinMult still shows the
// computed multipliers then). It does not change the state.
func (c *Controller) Weights(p *Plan) (*Weights, error) {
	if err := c.checkPlan(p); err != nil {
		return nil, err
	}
	if c.prompt == nil {
		return onesWeights(p), nil
	}
	w, err := c.prompt.Weights(p.Classes, p.N)
	if err != nil {
		return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
	}
	w.Applied = c.cfg.Prompt.Apply
	if !w.Applied {
		ones := onesWeights(p)
		w.Row, w.Prompt = ones.Row, ones.Prompt
	}
	return w, nil
}

func onesWeights(p *Plan) *Weights {
	w := &Weights{Prompt: make([]float64, len(p.N)), Row: make([]float64, p.Rows())}
	for i := range w.Prompt {
		w.Prompt[i] = 1
	}
	for r := range w.Row {
		w.Row[r] = 1
	}
	return w
}

func (c *Controller) checkPlan(p *Plan) error {
	if p == nil {
		return fmt.Errorf("gdro: nil plan")
	}
	if p.Step != c.step+1 {
		return fmt.Errorf("gdro: plan is for step %d but the controller is at step %d (each plan is observed once, in order)", p.Step, c.step+1)
	}
	if len(p.UIDs) != len(p.Classes) || len(p.UIDs) != len(p.N) {
		return fmt.Errorf("gdro: step %d: plan has %d UIDs, %d classes, %d counts", p.Step, len(p.UIDs), len(p.Classes), len(p.N))
	}
	if _, err := checkBatch(p.Classes, p.N, c.cls.NumClasses()); err != nil {
		return fmt.Errorf("gdro: step %d: plan: %w", p.Step, err)
	}
	for i, u := range p.UIDs {
		if u == "" {
			return fmt.Errorf("gdro: step %d: plan prompt %d has an empty UID", p.Step, i)
		}
	}
	if c.rollout != nil && p.Alloc == nil {
		return fmt.Errorf("gdro: step %d: plan has no allocation but Rollout-GDRO is on (make plans with Controller.Plan)", p.Step)
	}
	return nil
}

// Observe feeds one step's outcomes back, in the reference's order:
// Prompt-GDRO score update, Rollout-GDRO arm and μ update (or stored labels),
// then the classifier's any-correct indicators. rows are prompt-contiguous in
// plan order, R = plan.Rows(). It returns the step's metrics record.
func (c *Controller) Observe(p *Plan, rows Rows) (*StepRecord, error) {
	if err := c.checkPlan(p); err != nil {
		return nil, err
	}
	R := p.Rows()
	if len(rows.Correct) != R {
		return nil, fmt.Errorf("gdro: step %d: plan has %d rows but %d correctness values", p.Step, R, len(rows.Correct))
	}
	if rows.Loss != nil && len(rows.Loss) != R {
		return nil, fmt.Errorf("gdro: step %d: plan has %d rows but %d losses", p.Step, R, len(rows.Loss))
	}
	if rows.KL != nil && len(rows.KL) != R {
		return nil, fmt.Errorf("gdro: step %d: plan has %d rows but %d KL values", p.Step, R, len(rows.KL))
	}
	rec := c.baseRecord(p, rows)
	// Validate everything that can fail before any state changes, so a
	// failed Observe leaves the controller as it was.
	if c.prompt != nil {
		if _, err := c.prompt.rowSignal(rows, R); err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
	}
	if c.rollout != nil && c.cfg.Rollout.Mode == ModePaper {
		if err := c.rollout.checkObserve(p.N, rows); err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
	}
	if c.prompt != nil {
		w, err := c.prompt.Weights(p.Classes, p.N) // the weights this step used
		if err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
		ob, err := c.prompt.Observe(p.Classes, p.N, rows)
		if err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
		rec.PromptRecord = newPromptRecord(w, ob, c.prompt.Scores(), c.cfg.Prompt.Apply)
	}
	if c.rollout != nil {
		up, err := c.rollout.Observe(p.Classes, p.N, p.Alloc, rows)
		if err != nil {
			return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
		}
		rec.RolloutRecord = c.newRolloutRecord(p, up)
	}
	anyOK := make([]bool, len(p.UIDs)) // (N) any row of the prompt correct
	r := 0
	for i, n := range p.N {
		for _, ok := range rows.Correct[r : r+n] {
			anyOK[i] = anyOK[i] || ok
		}
		r += n
	}
	if err := c.cls.Observe(p.UIDs, anyOK); err != nil {
		return nil, fmt.Errorf("gdro: step %d: %w", p.Step, err)
	}
	c.step++
	return rec, nil
}

// checkObserve validates what Rollout.Observe will read, without changing
// anything.
func (r *Rollout) checkObserve(n []int, rows Rows) error {
	R := 0
	for i, k := range n {
		ok := false
		for _, a := range r.arms {
			ok = ok || a == k
		}
		if !ok {
			return fmt.Errorf("gdro rollout: prompt %d used %d rollouts, which is not an arm %v", i, k, r.arms)
		}
		R += k
	}
	if r.cfg.Utility != UtilityVariance {
		if len(rows.Loss) != R {
			return fmt.Errorf("gdro rollout: utility %q needs %d per-row losses, got %d", r.cfg.Utility, R, len(rows.Loss))
		}
		for i, l := range rows.Loss {
			if !finite(l) {
				return fmt.Errorf("gdro rollout: row %d has non-finite loss %v", i, l)
			}
		}
	}
	return nil
}

// State is the serializable state of a Controller (for checkpoints).
type State struct {
	Version    int             `json:"version"`
	Step       int             `json:"step"`
	Classifier ClassifierState `json:"classifier"`
	Prompt     *PromptState    `json:"prompt,omitempty"`
	Rollout    *RolloutState   `json:"rollout,omitempty"`
}

// State returns a deep copy of the controller state.
func (c *Controller) State() State {
	s := State{Version: StateVersion, Step: c.step, Classifier: c.cls.State()}
	if c.prompt != nil {
		ps := c.prompt.State()
		s.Prompt = &ps
	}
	if c.rollout != nil {
		rs := c.rollout.State()
		s.Rollout = &rs
	}
	return s
}

// Restore replaces the controller state with s, which must match the
// configuration (same classes, same arms, same controllers enabled).
func (c *Controller) Restore(s State) error {
	if s.Version != StateVersion {
		return fmt.Errorf("gdro state: version %d, this build reads version %d", s.Version, StateVersion)
	}
	if s.Step < 0 {
		return fmt.Errorf("gdro state: step %d < 0", s.Step)
	}
	if (s.Prompt != nil) != (c.prompt != nil) {
		return fmt.Errorf("gdro state: saved with Prompt-GDRO %s, config has it %s (HINT: resume with the run's saved config)", onOff(s.Prompt != nil), onOff(c.prompt != nil))
	}
	if (s.Rollout != nil) != (c.rollout != nil) {
		return fmt.Errorf("gdro state: saved with Rollout-GDRO %s, config has it %s (HINT: resume with the run's saved config)", onOff(s.Rollout != nil), onOff(c.rollout != nil))
	}
	// restore into fresh components so that a failure changes nothing
	fresh, err := New(c.cfg)
	if err != nil {
		return err
	}
	if err := fresh.cls.Restore(s.Classifier); err != nil {
		return err
	}
	if s.Prompt != nil {
		if err := fresh.prompt.Restore(*s.Prompt); err != nil {
			return err
		}
	}
	if s.Rollout != nil {
		if err := fresh.rollout.Restore(*s.Rollout); err != nil {
			return err
		}
	}
	fresh.step = s.Step
	*c = *fresh
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// StepRecord is one line of the per-step JSONL written by gdro-sim,
// gdro-replay and (with the same field names) the trainer's metrics. Per-class
// arrays have length C = len(bin_labels) and are indexed by class: 0 =
// accbin_0 = hardest, …, B−1 = easiest, then accbin_excl when enabled. The
// Prompt-GDRO and Rollout-GDRO fields are absent when that controller is off.
type StepRecord struct {
	Step       int       `json:"step"`        // 1-based
	Method     string    `json:"method"`      // grpo | prompt | rollout | prompt+rollout
	NumPrompts int       `json:"num_prompts"` // N
	NumRows    int       `json:"num_rows"`    // R = Σ n_i
	BinLabels  []string  `json:"bin_labels"`  // (C)
	BinCount   []int     `json:"bin_count"`   // (C) prompts per class (current labels)
	BinShare   []float64 `json:"bin_share"`   // (C) prompt share q̂_b
	BinAcc     []float64 `json:"bin_acc"`     // (C) mean row correctness, 0 if absent
	BinNMean   []float64 `json:"bin_n_mean"`  // (C) mean rollouts per prompt actually given, 0 if absent
	MeanBin    float64   `json:"mean_bin"`    // mean bin index over prompts (accbin_excl not counted)
	Acc        float64   `json:"acc"`         // mean row correctness
	// WSE is the weighted standard-error proxy sqrt((1/N)·Σ_i σ_i²/n_i) with
	// σ_i² the class's within-prompt variance of correctness (estimated from
	// this step's rows; the simulator uses the true p_i(1−p_i)); WSEUniform is
	// the same with every n_i = n̄, WSERatio = WSE / WSEUniform (1 when both 0).
	WSE        float64 `json:"wse"`
	WSEUniform float64 `json:"wse_uniform"`
	WSERatio   float64 `json:"wse_ratio"`

	*PromptRecord
	*RolloutRecord
	*SimRecord
}

// PromptRecord holds the Prompt-GDRO fields of a StepRecord.
type PromptRecord struct {
	BinWeight     []float64 `json:"bin_weight"`     // (C) p_b used this step (0 absent)
	BinMult       []float64 `json:"bin_mult"`       // (C) computed row multiplier (0 absent)
	BinSignal     []float64 `json:"bin_signal"`     // (C) raw mean signal before share normalization
	BinScore      []float64 `json:"bin_score"`      // (C) EMA score S_b after this step's update
	WeightEntropy float64   `json:"weight_entropy"` // nats, over present classes
	MultMin       float64   `json:"mult_min"`       // computed row multipliers
	MultMean      float64   `json:"mult_mean"`
	MultMax       float64   `json:"mult_max"`
	Applied       bool      `json:"weights_applied"`
	FocusFallback bool      `json:"focus_fallback,omitempty"`
}

// RolloutRecord holds the Rollout-GDRO fields of a StepRecord.
type RolloutRecord struct {
	RolloutMode       string      `json:"rollout_mode"`        // paper | reference_compat
	Arms              []int       `json:"arms"`                // (K)
	BinN              []int       `json:"bin_n"`               // (C) arm chosen per class by the DP (0 absent)
	BinNUnconstrained []float64   `json:"bin_n_unconstrained"` // (C) unconstrained choice n_b^u (0 absent)
	ArmProb           [][]float64 `json:"arm_prob"`            // (C, K) arm probabilities at decision time
	ArmEntropy        float64     `json:"arm_entropy"`         // mean over DP classes of H(p_b), nats
	Mu                float64     `json:"mu"`                  // μ used for this step's decision
	DMu               float64     `json:"dmu"`                 // μ_{t+1} − μ_t
	Violation         float64     `json:"violation"`           // Σ_b q̂_b·n_b^u − n̄
	BudgetTarget      int         `json:"budget_target"`       // N·n̄
	BudgetTotal       int         `json:"budget_total"`        // Σ n_i
	BudgetExact       bool        `json:"budget_exact"`
	UsingPrev         bool        `json:"using_prev_labels,omitempty"` // reference_compat
}

// baseRecord fills the fields common to every method.
func (c *Controller) baseRecord(p *Plan, rows Rows) *StepRecord {
	C := c.cls.NumClasses()
	N := len(p.UIDs)
	rec := &StepRecord{
		Step: p.Step, Method: c.Method(), NumPrompts: N, NumRows: p.Rows(),
		BinLabels: c.cls.Labels(), BinCount: make([]int, C), BinShare: make([]float64, C),
		BinAcc: make([]float64, C), BinNMean: make([]float64, C),
	}
	rowsPer := make([]int, C)
	corrPer := make([]int, C)
	excl := c.cls.ExclClass()
	binSum, binN, corr := 0, 0, 0
	r := 0
	for i, cl := range p.Classes {
		rec.BinCount[cl]++
		rec.BinNMean[cl] += float64(p.N[i])
		rowsPer[cl] += p.N[i]
		for _, ok := range rows.Correct[r : r+p.N[i]] {
			if ok {
				corrPer[cl]++
				corr++
			}
		}
		r += p.N[i]
		if cl != excl {
			binSum += cl
			binN++
		}
	}
	for b := 0; b < C; b++ {
		rec.BinShare[b] = float64(rec.BinCount[b]) / float64(N)
		if rec.BinCount[b] > 0 {
			rec.BinNMean[b] /= float64(rec.BinCount[b])
			rec.BinAcc[b] = float64(corrPer[b]) / float64(rowsPer[b])
		}
	}
	if binN > 0 {
		rec.MeanBin = float64(binSum) / float64(binN)
	}
	rec.Acc = float64(corr) / float64(r)
	rec.WSE, rec.WSEUniform, rec.WSERatio = estimatedWSE(p.Classes, p.N, rows.Correct, C, c.cfg.Rollout.NMean)
	return rec
}

// estimatedWSE pools the unbiased within-prompt variance of correctness per
// class (prompts with n_i ≥ 2) and returns WSE, its uniform-n̄ counterpart and
// their ratio (see StepRecord.WSE).
func estimatedWSE(classes, n []int, correct []bool, C, nbar int) (wse, uni, ratio float64) {
	vs := make([]float64, C)
	vn := make([]int, C)
	r := 0
	for i, c := range classes {
		if m := n[i]; m >= 2 {
			k := 0
			for _, ok := range correct[r : r+m] {
				if ok {
					k++
				}
			}
			vs[c] += float64(k) * float64(m-k) / float64(m*(m-1))
			vn[c]++
		}
		r += n[i]
	}
	sig2 := make([]float64, len(classes))
	for i, c := range classes {
		if vn[c] > 0 {
			sig2[i] = vs[c] / float64(vn[c])
		}
	}
	return wseOf(sig2, n, nbar)
}

// wseOf returns sqrt(mean σ²_i/n_i), sqrt(mean σ²_i/n̄) and their ratio.
func wseOf(sig2 []float64, n []int, nbar int) (wse, uni, ratio float64) {
	for i, s := range sig2 {
		wse += s / float64(n[i])
		uni += s / float64(nbar)
	}
	N := float64(len(sig2))
	wse, uni = math.Sqrt(wse/N), math.Sqrt(uni/N)
	ratio = 1
	if uni > 0 {
		ratio = wse / uni
	}
	return wse, uni, ratio
}

func newPromptRecord(w *Weights, ob *Observation, scores []float64, applied bool) *PromptRecord {
	pr := &PromptRecord{
		BinWeight: w.P, BinMult: w.BinMult, BinSignal: ob.Signal, BinScore: scores,
		WeightEntropy: w.Entropy, Applied: applied, FocusFallback: w.FocusFallback,
	}
	pr.MultMin, pr.MultMax = math.Inf(1), math.Inf(-1)
	for _, m := range w.Row {
		pr.MultMin = math.Min(pr.MultMin, m)
		pr.MultMax = math.Max(pr.MultMax, m)
		pr.MultMean += m
	}
	pr.MultMean /= float64(len(w.Row))
	return pr
}

func (c *Controller) newRolloutRecord(p *Plan, up *RolloutUpdate) *RolloutRecord {
	al := p.Alloc
	rr := &RolloutRecord{
		RolloutMode: c.cfg.Rollout.Mode, Arms: c.rollout.Arms(), BinN: al.BinN,
		BinNUnconstrained: al.Unconstrained, ArmProb: al.ArmProb, Mu: al.Mu, DMu: up.DMu,
		Violation: al.Violation, BudgetTarget: al.Target, BudgetTotal: al.Total,
		BudgetExact: al.Exact, UsingPrev: al.UsingPrev,
	}
	idx := make([]int, len(rr.Arms))
	for j := range idx {
		idx[j] = j
	}
	for _, b := range al.Order {
		rr.ArmEntropy += entropyOver(al.ArmProb[b], idx)
	}
	if len(al.Order) > 0 {
		rr.ArmEntropy /= float64(len(al.Order))
	}
	return rr
}
