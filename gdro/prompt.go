package gdro

// prompt.go: Prompt-GDRO (docs/algorithm.md §6), as the reference computes it.
//
// Score update after step t (docs/algorithm.md §6.3), for every class c present among the
// step's rows (absent classes keep their scores):
//
//	x_c = mean_{r ∈ c} sig_r                  sig_r per PromptConfig.Signal
//	x_c = x_c / max(rows_c / R, floor)        if ShareNormOn (floor 0 = reference)
//	S_c = x_c on the first observation, else S_c = (1 − β)·S_c + β·x_c
//	U  += 1
//
// Bin distribution at step t over the set P of present classes (docs/algorithm.md §6.4):
//
//	s_c = clip(S_c, −C, C) (C = 0: no clip), 0 for a never-observed class
//	p_c = (1 − γ)·softmax_P(η·s)_c + γ/|P|,  p_c ← min(p_c, cap) · focus_c(U)
//
// Row multipliers (docs/algorithm.md §6.5): w_r = p_{label(r)}, rescaled to mean 1 over the
// step's R rows, then capped at MaxWeight (no renormalization after the cap).
// If focus zeroes every present class the multipliers fall back to all ones
// and Weights.FocusFallback reports it (docs/algorithm.md §11 item 27).
//
// The softmax subtracts the largest exponent first; this is the reference's
// value up to rounding and cannot overflow.
//
// Paper mode (PromptConfig.Mode, docs/algorithm.md §6.7) keeps the scores
// and replaces the distribution and the multipliers by the paper's:
//
//	ω_c = exp(η·clip(S_c, −C, C))          (S_c = 0 for a never-observed class)
//	q_c = (1 − γ)·ω_c/Σ_{c'} ω_{c'} + γ/B  over all B classes (logged as P)
//	w_r = min(ω_{label(r)}, max_weight)     unnormalised: the normaliser is a
//	                                        common factor of the step size

import (
	"fmt"
	"math"
)

// PromptState is the serializable state of Prompt-GDRO; arrays are (C).
type PromptState struct {
	Updates int       `json:"updates"` // U, completed score updates
	Score   []float64 `json:"score"`   // S_c (meaningful where Has)
	Has     []bool    `json:"has"`     // c has been observed
	Sum     []float64 `json:"sum"`     // Σ x_c over observations (logged only)
	Count   []int     `json:"count"`   // number of observations of c
}

// Prompt is the Prompt-GDRO adversary over difficulty classes.
type Prompt struct {
	cfg      PromptConfig
	nClasses int
	nBins    int // classes ≥ nBins (accbin_excl) are not affected by focus
	st       PromptState
}

// NewPrompt returns Prompt-GDRO over nClasses classes, of which the first
// nBins are accuracy bins.
func NewPrompt(cfg PromptConfig, nBins, nClasses int) (*Prompt, error) {
	if err := cfg.validate(nBins); err != nil {
		return nil, err
	}
	if nBins < 1 || nClasses < nBins {
		return nil, fmt.Errorf("gdro prompt: bad class counts: %d bins, %d classes", nBins, nClasses)
	}
	return &Prompt{cfg: cfg, nClasses: nClasses, nBins: nBins, st: PromptState{
		Score: make([]float64, nClasses),
		Has:   make([]bool, nClasses),
		Sum:   make([]float64, nClasses),
		Count: make([]int, nClasses),
	}}, nil
}

// Weights are Prompt-GDRO's decisions for one step.
type Weights struct {
	// P is the bin distribution p_c after cap and focus, 0 for absent classes (C).
	P []float64 `json:"p"`
	// BinMult is the multiplier of each present class's rows (C), 0 if absent.
	BinMult []float64 `json:"bin_mult"`
	// Prompt is the multiplier of each prompt (N).
	Prompt []float64 `json:"prompt"`
	// Row is the multiplier of each row (R), prompt-contiguous.
	Row []float64 `json:"row"`
	// Entropy is the entropy (nats) of p renormalized over present classes.
	Entropy float64 `json:"entropy"`
	// FocusFallback is true when focus zeroed every present class and the
	// multipliers fell back to all ones.
	FocusFallback bool `json:"focus_fallback,omitempty"`
	// Applied is false when Row and Prompt were reset to ones because
	// Prompt-GDRO is off or prompt.apply is false (set by Controller.Weights).
	Applied bool `json:"applied"`
}

// checkBatch validates class indices and rollout counts; it returns R.
func checkBatch(classes, n []int, nClasses int) (int, error) {
	if len(classes) != len(n) {
		return 0, fmt.Errorf("gdro: %d class labels but %d rollout counts", len(classes), len(n))
	}
	if len(classes) == 0 {
		return 0, fmt.Errorf("gdro: empty batch")
	}
	r := 0
	for i, c := range classes {
		if c < 0 || c >= nClasses {
			return 0, fmt.Errorf("gdro: prompt %d has class %d, outside [0, %d)", i, c, nClasses)
		}
		if n[i] < 1 {
			return 0, fmt.Errorf("gdro: prompt %d has %d rollouts (need ≥ 1)", i, n[i])
		}
		r += n[i]
	}
	return r, nil
}

// Weights computes the per-row advantage multipliers for a step whose
// prompts have classes (N) and rollout counts n (N). It does not change the
// state: the scores are those after the previous step's Observe.
func (p *Prompt) Weights(classes, n []int) (*Weights, error) {
	R, err := checkBatch(classes, n, p.nClasses)
	if err != nil {
		return nil, err
	}
	if p.cfg.Mode == ModePaper {
		return p.paperWeights(classes, n, R), nil
	}
	rowsPer := make([]int, p.nClasses) // (C)
	for i, c := range classes {
		rowsPer[c] += n[i]
	}
	present := make([]int, 0, p.nClasses)
	for c, k := range rowsPer {
		if k > 0 {
			present = append(present, c)
		}
	}
	K := float64(len(present))
	// softmax over present classes, largest exponent subtracted
	z := make([]float64, p.nClasses)
	zmax := math.Inf(-1)
	for _, c := range present {
		z[c] = p.exponent(c)
		zmax = math.Max(zmax, z[c])
	}
	sum := 0.0
	for _, c := range present {
		z[c] = math.Exp(z[c] - zmax)
		sum += z[c]
	}
	w := &Weights{P: make([]float64, p.nClasses), BinMult: make([]float64, p.nClasses)}
	for _, c := range present {
		soft := 1 / K
		if sum > 0 && !math.IsInf(sum, 0) {
			soft = z[c] / sum
		}
		pc := (1-p.cfg.Gamma)*soft + p.cfg.Gamma/K
		pc = math.Min(pc, p.cfg.MaxWeight)
		w.P[c] = pc * p.focus(c)
	}
	w.Entropy = entropyOver(w.P, present)
	// mean-1 renormalization over rows, then the cap
	tot := 0.0
	for _, c := range present {
		tot += float64(rowsPer[c]) * w.P[c]
	}
	for _, c := range present {
		m := 1.0
		if tot > 0 {
			m = w.P[c] * float64(R) / tot
		}
		w.BinMult[c] = math.Min(m, p.cfg.MaxWeight)
	}
	w.FocusFallback = !(tot > 0)
	w.expand(classes, n, R)
	return w, nil
}

// exponent is η·clip(S_c, −C, C), 0 for a never-observed class (C = 0: no
// clip).
func (p *Prompt) exponent(c int) float64 {
	s := 0.0
	if p.st.Has[c] {
		s = p.st.Score[c]
	}
	if C := p.cfg.ScoreClip; C > 0 {
		s = math.Max(-C, math.Min(C, s))
	}
	return p.cfg.Eta * s
}

// expand sets the prompts' and rows' multipliers from the classes'.
func (w *Weights) expand(classes, n []int, R int) {
	w.Prompt = make([]float64, len(classes))
	w.Row = make([]float64, 0, R)
	for i, c := range classes {
		w.Prompt[i] = w.BinMult[c]
		for j := 0; j < n[i]; j++ {
			w.Row = append(w.Row, w.BinMult[c])
		}
	}
}

// paperWeights are the paper's multipliers and distribution (package doc).
func (p *Prompt) paperWeights(classes, n []int, R int) *Weights {
	C := p.nClasses
	z := make([]float64, C) // η·clip(S_c)
	zmax := math.Inf(-1)
	for c := range z {
		z[c] = p.exponent(c)
		zmax = math.Max(zmax, z[c])
	}
	w := &Weights{P: make([]float64, C), BinMult: make([]float64, C)}
	sum := 0.0
	for c := range z {
		sum += math.Exp(z[c] - zmax)
	}
	all := make([]int, C)
	for c := range z {
		all[c] = c
		w.P[c] = (1-p.cfg.Gamma)*math.Exp(z[c]-zmax)/sum + p.cfg.Gamma/float64(C)
	}
	w.Entropy = entropyOver(w.P, all)
	for _, c := range classes {
		w.BinMult[c] = math.Min(math.Exp(z[c]), p.cfg.MaxWeight)
	}
	w.expand(classes, n, R)
	return w
}

// focus is focus_c(U) (docs/algorithm.md §6.4): 1 while U ≤ warmup, then linear from 1 to
// the target over ramp updates. accbin_excl and unlisted bins get 1.
func (p *Prompt) focus(c int) float64 {
	f := p.cfg.Focus
	if f == nil || c >= p.nBins {
		return 1
	}
	target, ok := f.Targets[c]
	if !ok {
		return 1
	}
	u := p.st.Updates
	if u <= f.Warmup {
		return 1
	}
	frac := 1.0
	if f.Ramp > 0 {
		frac = math.Max(0, math.Min(1, float64(u-f.Warmup)/float64(f.Ramp)))
	}
	return 1 + frac*(target-1)
}

// entropyOver is the entropy (nats) of v restricted to idx and renormalized.
func entropyOver(v []float64, idx []int) float64 {
	s := 0.0
	for _, i := range idx {
		s += v[i]
	}
	if !(s > 0) {
		return 0
	}
	h := 0.0
	for _, i := range idx {
		if q := v[i] / s; q > 0 {
			h -= q * math.Log(q)
		}
	}
	return h
}

// Rows carries one step's per-row outcomes, prompt-contiguous in plan order
// (prompt 0's n_0 rows, then prompt 1's, …); every slice is (R) or nil.
type Rows struct {
	// Loss is ℓ_r (docs/algorithm.md §6.2): the token-mean clipped surrogate computed with
	// the unweighted advantage, no dual-clip, KL or entropy. Needed by the
	// surrogate signals and the loss utilities.
	Loss []float64 `json:"loss,omitempty"`
	// KL is the row's token-mean KL to the reference policy (surrogate_kl).
	KL []float64 `json:"kl,omitempty"`
	// Correct is whether the row is correct (reward > 0.5, docs/algorithm.md §3.5). Always
	// required.
	Correct []bool `json:"correct"`
}

// Observation is what Prompt.Observe measured, per class (C).
type Observation struct {
	Signal []float64 `json:"signal"` // mean per-row signal before share normalization
	X      []float64 `json:"x"`      // the value fed to the EMA
}

// Observe updates the scores from one step (docs/algorithm.md §6.3). classes and n are the
// step's (N) labels and rollout counts, rows its outcomes.
func (p *Prompt) Observe(classes, n []int, rows Rows) (*Observation, error) {
	R, err := checkBatch(classes, n, p.nClasses)
	if err != nil {
		return nil, err
	}
	sig, err := p.rowSignal(rows, R)
	if err != nil {
		return nil, err
	}
	sum := make([]float64, p.nClasses)
	cnt := make([]int, p.nClasses)
	r := 0
	for i, c := range classes {
		for j := 0; j < n[i]; j++ {
			sum[c] += sig[r]
			cnt[c]++
			r++
		}
	}
	ob := &Observation{Signal: make([]float64, p.nClasses), X: make([]float64, p.nClasses)}
	beta := p.cfg.EMABeta
	for c := 0; c < p.nClasses; c++ {
		if cnt[c] == 0 {
			continue
		}
		x := sum[c] / float64(cnt[c])
		ob.Signal[c] = x
		if p.cfg.ShareNormOn() {
			x /= math.Max(float64(cnt[c])/float64(R), p.cfg.ShareFloor)
		}
		ob.X[c] = x
		if p.st.Has[c] {
			p.st.Score[c] = (1-beta)*p.st.Score[c] + beta*x
		} else {
			p.st.Score[c] = x
			p.st.Has[c] = true
		}
		p.st.Sum[c] += x
		p.st.Count[c]++
	}
	p.st.Updates++
	return ob, nil
}

// rowSignal builds sig_r (R) for the configured signal.
func (p *Prompt) rowSignal(rows Rows, R int) ([]float64, error) {
	sig := make([]float64, R)
	switch p.cfg.Signal {
	case SignalReward:
		if len(rows.Correct) != R {
			return nil, fmt.Errorf("gdro prompt: signal %q needs %d correctness values, got %d", SignalReward, R, len(rows.Correct))
		}
		for r, ok := range rows.Correct {
			if !ok {
				sig[r] = 1
			}
		}
	case SignalSurrogate, SignalSurrogateKL:
		if len(rows.Loss) != R {
			return nil, fmt.Errorf("gdro prompt: signal %q needs %d per-row losses, got %d", p.cfg.Signal, R, len(rows.Loss))
		}
		withKL := p.cfg.Signal == SignalSurrogateKL
		if withKL && len(rows.KL) != R {
			return nil, fmt.Errorf("gdro prompt: signal %q needs %d per-row KL values, got %d", p.cfg.Signal, R, len(rows.KL))
		}
		for r, l := range rows.Loss {
			if !finite(l) {
				return nil, fmt.Errorf("gdro prompt: row %d has non-finite loss %v", r, l)
			}
			sig[r] = l
			if withKL {
				if !finite(rows.KL[r]) {
					return nil, fmt.Errorf("gdro prompt: row %d has non-finite KL %v", r, rows.KL[r])
				}
				sig[r] += p.cfg.KLCoef * rows.KL[r]
			}
		}
	}
	return sig, nil
}

// Scores returns the current scores S_c (C), 0 where never observed.
func (p *Prompt) Scores() []float64 {
	s := make([]float64, p.nClasses)
	for c := range s {
		if p.st.Has[c] {
			s[c] = p.st.Score[c]
		}
	}
	return s
}

// State returns a deep copy of the state.
func (p *Prompt) State() PromptState {
	return PromptState{
		Updates: p.st.Updates,
		Score:   append([]float64(nil), p.st.Score...),
		Has:     append([]bool(nil), p.st.Has...),
		Sum:     append([]float64(nil), p.st.Sum...),
		Count:   append([]int(nil), p.st.Count...),
	}
}

// Restore replaces the state, checking shapes and values.
func (p *Prompt) Restore(s PromptState) error {
	C := p.nClasses
	if len(s.Score) != C || len(s.Has) != C || len(s.Sum) != C || len(s.Count) != C {
		return fmt.Errorf("gdro prompt state: arrays must have %d classes (score %d, has %d, sum %d, count %d)",
			C, len(s.Score), len(s.Has), len(s.Sum), len(s.Count))
	}
	if s.Updates < 0 {
		return fmt.Errorf("gdro prompt state: updates = %d < 0", s.Updates)
	}
	for c := 0; c < C; c++ {
		if !finite(s.Score[c]) || !finite(s.Sum[c]) || s.Count[c] < 0 {
			return fmt.Errorf("gdro prompt state: class %d has score %v, sum %v, count %d", c, s.Score[c], s.Sum[c], s.Count[c])
		}
	}
	p.st = PromptState{
		Updates: s.Updates,
		Score:   append([]float64(nil), s.Score...),
		Has:     append([]bool(nil), s.Has...),
		Sum:     append([]float64(nil), s.Sum...),
		Count:   append([]int(nil), s.Count...),
	}
	return nil
}
