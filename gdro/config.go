package gdro

// config.go: the typed configuration of the three controllers, its defaults
// (all in DefaultConfig, nowhere else), the named presets that reproduce the
// published run scripts, and Validate.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"gopkg.in/yaml.v3"
)

// Rollout-GDRO modes.
const (
	// ModePaper is the controller the paper describes, fixed (package doc).
	ModePaper = "paper"
	// ModeReferenceCompat reproduces the published code bug for bug
	// (docs/algorithm.md §7.4 stale positional labels, §7.6 arms and μ never updated).
	ModeReferenceCompat = "reference_compat"
)

// Prompt-GDRO loss signals (docs/algorithm.md §6.2, §11 item 6).
const (
	// SignalSurrogate is the reference signal: the per-row clipped
	// surrogate ℓ_r computed with the unweighted advantage, no KL.
	SignalSurrogate = "surrogate"
	// SignalSurrogateKL adds the paper's β_KL·KL_r term: ℓ_r + KLCoef·KL_r.
	SignalSurrogateKL = "surrogate_kl"
	// SignalReward uses 1 − correct_r, so a bin's signal is 1 − its mean
	// row correctness.
	SignalReward = "reward"
)

// Rollout-GDRO arm utilities (docs/algorithm.md §11 item 4), used in paper mode.
const (
	// UtilityVariance is the variance-reduction utility (package doc):
	// u_b(n) = 4·σ̂²_b·(1 − n̄/n), σ̂²_b the within-prompt variance of
	// correctness of the rows that used arm n.
	UtilityVariance = "variance"
	// UtilityNegLoss is the paper's main-text utility Ĵ_b = −mean ℓ_r.
	UtilityNegLoss = "neg_loss"
	// UtilityLoss is the reference's (dead) adversarial sign: +mean ℓ_r.
	UtilityLoss = "loss"
)

// Dual signals: what "the unconstrained per-bin choice" is (docs/algorithm.md §11 item 3).
const (
	// DualArgmax uses each bin's best response argmax_n [û_b(n) − μ(n − n̄)];
	// the violation is then a subgradient of the Lagrangian dual.
	DualArgmax = "argmax"
	// DualExpected uses the mean arm E_{p_b}[n] under the arm probabilities.
	DualExpected = "expected"
)

// DP objectives of paper mode: how the budget-exact DP weighs each class's
// arm log-probability (docs/algorithm.md §7.3, §11 item 3).
const (
	// DPWeightBin is the paper's: the configuration of highest joint
	// probability Π_b p_b(n_b), one factor per class present. The shadow
	// price μ shapes the allocation (its terms μ·Σ_b n_b do not cancel).
	DPWeightBin = "bin"
	// DPWeightPrompt weighs class b's log-probability by its prompt count
	// c_b: under the exact budget μ's terms sum to μ·(T − N·n̄) = 0 and
	// cancel, and the DP maximizes Σ_b c_b·û_b(n_b), the exact primal
	// solution for the current utility estimates.
	DPWeightPrompt = "prompt"
)

// Config configures the classifier and both controllers. The zero value is
// not useful: start from DefaultConfig or a Preset and override fields.
type Config struct {
	Classifier ClassifierConfig `yaml:"classifier" json:"classifier"`
	Prompt     PromptConfig     `yaml:"prompt" json:"prompt"`
	Rollout    RolloutConfig    `yaml:"rollout" json:"rollout"`
}

// ClassifierConfig configures the online difficulty classifier (docs/algorithm.md §4).
type ClassifierConfig struct {
	// Edges are the bin edges, strictly increasing inside (0, 1); B =
	// len(Edges)+1 bins, bin j covers [e_{j−1}, e_j), bin 0 is the hardest.
	Edges []float64 `yaml:"edges" json:"edges"`
	// NumBins gives uniform edges j/B when Edges is empty (docs/algorithm.md §11 item 10:
	// the same hysteresis rule as with edges, which fixes the reference's
	// uniform-mode bug). Must be 0 or len(Edges)+1 when Edges is set.
	NumBins int `yaml:"num_bins" json:"num_bins"`
	// HistoryLen is the window H of any-correct indicators per UID, counted in
	// appearances of the prompt; 0 = unbounded (cumulative counts).
	HistoryLen int `yaml:"history_len" json:"history_len"`
	// Hysteresis is the margin δ in [0, 0.49]; 0 disables hysteresis.
	Hysteresis float64 `yaml:"hysteresis" json:"hysteresis"`
	// ExcludeExtremes puts prompts with acc ≤ 0 or acc ≥ 1 (including
	// never-seen ones) into the separate class accbin_excl, as the reference
	// does (docs/algorithm.md §4.4, §11 item 9). It is a real class, not an exclusion.
	ExcludeExtremes bool `yaml:"exclude_extremes" json:"exclude_extremes"`
}

// PromptConfig configures Prompt-GDRO (docs/algorithm.md §6).
type PromptConfig struct {
	// Enabled turns the controller on (score updates, weights). It is not a
	// config key: a preset sets it, and a run derives it from train.method
	// (trainer.Config.Resolved).
	Enabled bool `yaml:"-" json:"-"`
	// Apply multiplies advantages by the weights; false computes and logs
	// them only. In a run, train.method prompt_gdro runs Prompt-GDRO either
	// way; rollout_gdro runs it beside Rollout-GDRO only with apply: false,
	// computed and logged but not applied (the reference's Rollout-GDRO
	// runs), and not at all with apply: true.
	Apply bool `yaml:"apply" json:"apply"`
	// Mode: reference_compat (the published code: softmax over the present
	// bins plus γ/K, rescaled to mean 1 over rows, then capped) or paper
	// (the paper's EMA-debiased exponential weights: each prompt's
	// advantage times min(exp(η·clip(S, −C, C)), max_weight), unnormalised;
	// docs/algorithm.md §6.7).
	Mode string `yaml:"mode" json:"mode"`
	// Eta is the exponential-weights rate η.
	Eta float64 `yaml:"eta" json:"eta"`
	// Gamma is the uniform mixing γ over present bins.
	Gamma float64 `yaml:"gamma" json:"gamma"`
	// EMABeta is the weight of a new observation: S ← (1−β)·S + β·x.
	EMABeta float64 `yaml:"ema_beta" json:"ema_beta"`
	// MaxWeight caps row multipliers after the mean-1 renormalization.
	MaxWeight float64 `yaml:"max_weight" json:"max_weight"`
	// ShareNorm divides a bin's mean signal by its row share (the reference's
	// loss_norm_by_class, docs/algorithm.md §6.3). Unset (null) means: on for the
	// surrogate signals (the reference), off for the reward signal, whose
	// per-bin value is already a mean in [0, 1] that 1/share would let any
	// rare bin push to the cap. See ShareNormOn.
	ShareNorm *bool `yaml:"share_norm" json:"share_norm"`
	// ShareFloor bounds the row share from below in ShareNorm; 0 = off.
	ShareFloor float64 `yaml:"share_floor" json:"share_floor"`
	// ScoreClip clips scores to [−C, C] before the softmax (the paper's
	// clip(S, −C, C)); 0 = off (the reference).
	ScoreClip float64 `yaml:"score_clip" json:"score_clip"`
	// Signal is the per-row loss signal: surrogate (default), surrogate_kl
	// (adds β_KL·KL, β_KL being loss.kl_coef in a run), reward.
	Signal string `yaml:"signal" json:"signal"`
	// KLCoef is β_KL in the surrogate_kl signal. It is not a config key: a
	// run sets it to loss.kl_coef (trainer.Config.Resolved), one β_KL for
	// the loss and the signal.
	KLCoef float64 `yaml:"-" json:"-"`
	// Focus is the optional focus schedule (docs/algorithm.md §6.4); nil = off.
	Focus *FocusConfig `yaml:"focus,omitempty" json:"focus,omitempty"`
}

// FocusConfig is the reference's focus schedule: bin index → target factor,
// reached linearly over Ramp score updates after Warmup updates.
type FocusConfig struct {
	Targets map[int]float64 `yaml:"targets" json:"targets"` // bin index → the factor its weight is scaled to
	Warmup  int             `yaml:"warmup" json:"warmup"`   // score updates before the ramp starts
	Ramp    int             `yaml:"ramp" json:"ramp"`       // score updates over which the factors go from 1 to their targets
}

// RolloutConfig configures Rollout-GDRO (docs/algorithm.md §7) and, when it is disabled,
// the fixed rollout count.
type RolloutConfig struct {
	// Enabled turns variable rollout counts on; when false every prompt gets
	// NMean rollouts. It is not a config key: a preset sets it, and a run
	// derives it from train.method (trainer.Config.Resolved).
	Enabled bool `yaml:"-" json:"-"`
	// Mode is paper (default) or reference_compat.
	Mode string `yaml:"mode" json:"mode"`
	// NMin, NMax give the arms {NMin, …, NMax} when Arms is empty.
	NMin int `yaml:"n_min" json:"n_min"`
	NMax int `yaml:"n_max" json:"n_max"` // the largest arm (see n_min)
	// Arms is an explicit, strictly increasing arm list (e.g. 2,4,8,16);
	// when set it replaces NMin..NMax and NMin/NMax must be 0.
	Arms []int `yaml:"arms,omitempty" json:"arms,omitempty"`
	// NMean is the mean budget n̄: every step spends N·n̄ rollouts in total
	// (exactly, whenever an exact allocation exists).
	NMean int `yaml:"n_mean" json:"n_mean"`
	// Eta is the exponential-weights rate over a bin's arms.
	Eta float64 `yaml:"eta" json:"eta"`
	// Gamma is the uniform exploration mixed into the arm probabilities.
	Gamma float64 `yaml:"gamma" json:"gamma"`
	// EMABeta is the weight of a new arm-utility observation (paper: 0.4).
	EMABeta float64 `yaml:"ema_beta" json:"ema_beta"`
	// DualLR is the dual step α_μ.
	DualLR float64 `yaml:"dual_lr" json:"dual_lr"`
	// MuInit is μ at step 1; MuMax bounds the projection μ ∈ [0, MuMax].
	MuInit float64 `yaml:"mu_init" json:"mu_init"`
	MuMax  float64 `yaml:"mu_max" json:"mu_max"` // upper bound of μ (see mu_init)
	// Utility is the arm utility: variance (default), neg_loss, loss.
	Utility string `yaml:"utility" json:"utility"`
	// DualSignal is the unconstrained choice driving μ: argmax (default) or
	// expected.
	DualSignal string `yaml:"dual_signal" json:"dual_signal"`
	// DPWeight is paper mode's DP objective: bin (default, the paper's joint
	// probability) or prompt (log-probabilities weighted by prompt counts).
	// reference_compat always uses the reference's unweighted DP (= bin).
	DPWeight string `yaml:"dp_weight" json:"dp_weight"`
}

// Edge sets shipped with gdrotrain (docs/algorithm.md §4.7).
var (
	// Edges10 is the paper's 10-bin set 0.1, …, 0.9.
	Edges10 = []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}
	// Edges3 is the reference's "3bins" set (3 bins, plus excl).
	Edges3 = []float64{0.4, 0.75}
	// Edges6 is the reference's "6bins" set (7 bins).
	Edges6 = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 0.9}
	// Edges6Soft is the reference's softf "6bins_noextremes" set (7 bins).
	Edges6Soft = []float64{0.01, 0.2, 0.4, 0.6, 0.8, 0.99}
)

// DefaultConfig returns every default in one place: 10 bins (0.1…0.9), H = 100,
// δ = 0.03; Prompt-GDRO and Rollout-GDRO off, with the paper's settings ready
// (η 0.65, γ 0.01, β 0.12, cap 15, share normalization; arms 2…12, n̄ = 4,
// arm EMA 0.4, α_μ 0.05, paper mode, variance utility).
func DefaultConfig() Config {
	return Config{
		Classifier: ClassifierConfig{
			Edges:      append([]float64(nil), Edges10...),
			HistoryLen: 100,
			Hysteresis: 0.03,
		},
		Prompt: PromptConfig{
			Mode:      ModeReferenceCompat,
			Apply:     true,
			Eta:       0.65,
			Gamma:     0.01,
			EMABeta:   0.12,
			MaxWeight: 15,
			Signal:    SignalSurrogate,
			KLCoef:    0.001,
		},
		Rollout: RolloutConfig{
			Mode:       ModePaper,
			NMin:       2,
			NMax:       12,
			NMean:      4,
			Eta:        0.65,
			Gamma:      0.01,
			EMABeta:    0.4,
			DualLR:     0.05,
			MuInit:     0,
			MuMax:      10,
			Utility:    UtilityVariance,
			DualSignal: DualArgmax,
			DPWeight:   DPWeightBin,
		},
	}
}

// presets maps a preset name to a function of the defaults.
var presets = map[string]func(*Config){
	// The paper's 10-bin Prompt-GDRO (docs/algorithm.md §11 item 11).
	"prompt-10bins": func(c *Config) { c.Prompt.Enabled = true },
	// Reference Prompt-GDRO cases (docs/algorithm.md §4.7, §10).
	"prompt-3bins-ref": func(c *Config) {
		c.Prompt.Enabled = true
		c.Classifier = ClassifierConfig{Edges: Edges3, HistoryLen: 50, Hysteresis: 0.03, ExcludeExtremes: true}
	},
	"prompt-6bins-ref": func(c *Config) {
		c.Prompt.Enabled = true
		c.Classifier = ClassifierConfig{Edges: Edges6, HistoryLen: 100, Hysteresis: 0.03}
	},
	"prompt-hardf-6bins-ref": func(c *Config) {
		c.Prompt.Enabled = true
		c.Classifier = ClassifierConfig{Edges: Edges6, HistoryLen: 100, Hysteresis: 0.03}
		c.Prompt.Focus = &FocusConfig{Targets: map[int]float64{0: 0, 6: 0}, Warmup: 50, Ramp: 200}
	},
	"prompt-softf-6bins-ref": func(c *Config) {
		c.Prompt.Enabled = true
		c.Classifier = ClassifierConfig{Edges: Edges6Soft, HistoryLen: 100, Hysteresis: 0.03, ExcludeExtremes: true}
		c.Prompt.Focus = &FocusConfig{Targets: map[int]float64{0: 0, 1: 0.9, 2: 0.8, 3: 0.7, 4: 0.7, 5: 0.5, 6: 0}, Warmup: 50, Ramp: 200}
	},
	// The paper's 10-bin Rollout-GDRO, fixed (paper mode).
	"rollout-10bins": func(c *Config) {
		c.Rollout.Enabled = true
		c.Classifier = ClassifierConfig{Edges: Edges10, HistoryLen: 50}
	},
	// Reference Rollout-GDRO cases, bug for bug (docs/algorithm.md §4.7, §10.3,
	// §11 item 20): Prompt-GDRO computed but not applied, classifier without
	// hysteresis, H = 50, and Prompt-GDRO's keys as run_rollout_groupdro.sh
	// sets them — loss_norm_by_class is never set there, so no share
	// normalisation, and gdro_ema_beta 0.4 (3 and 10 bins) or 0.12 (6 bins).
	// The reference updates that shared Prompt-GDRO EMA twice per step
	// (§11 item 20); gdrotrain updates it once. Its scores are never
	// applied, so the allocation — what these presets replicate — is
	// unaffected; only the logged bin_score differs.
	"rollout-3bins-ref": func(c *Config) {
		refRollout(c, 0.4)
		c.Classifier = ClassifierConfig{Edges: Edges3, HistoryLen: 50, ExcludeExtremes: true}
	},
	"rollout-6bins-ref": func(c *Config) {
		refRollout(c, 0.12)
		c.Classifier = ClassifierConfig{Edges: Edges6, HistoryLen: 50}
	},
	"rollout-10bins-ref": func(c *Config) {
		refRollout(c, 0.4)
		c.Classifier = ClassifierConfig{Edges: Edges10, HistoryLen: 50}
	},
}

// refRollout sets what every reference Rollout-GDRO case shares, with the
// script's gdro_ema_beta.
func refRollout(c *Config, emaBeta float64) {
	c.Rollout.Enabled = true
	c.Rollout.Mode = ModeReferenceCompat
	c.Prompt.Enabled = true
	c.Prompt.Apply = false
	c.Prompt.EMABeta = emaBeta
	off := false
	c.Prompt.ShareNorm = &off
}

// PresetNames lists the preset names in sorted order.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns DefaultConfig modified by the named preset.
func Preset(name string) (Config, error) {
	f, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("gdro: unknown preset %q (known: %v)", name, PresetNames())
	}
	c := DefaultConfig()
	f(&c)
	return c.Clone(), nil
}

// Clone returns a deep copy (no slice, map or pointer shared with c).
func (c Config) Clone() Config {
	d := c
	d.Classifier.Edges = append([]float64(nil), c.Classifier.Edges...)
	d.Rollout.Arms = append([]int(nil), c.Rollout.Arms...)
	if c.Prompt.ShareNorm != nil {
		v := *c.Prompt.ShareNorm
		d.Prompt.ShareNorm = &v
	}
	if f := c.Prompt.Focus; f != nil {
		g := *f
		g.Targets = make(map[int]float64, len(f.Targets))
		for k, v := range f.Targets {
			g.Targets[k] = v
		}
		d.Prompt.Focus = &g
	}
	return d
}

// ParseConfig decodes YAML (or JSON, a subset of YAML) over base, rejecting
// unknown fields, and validates the result. It reads a controller config of
// its own (gdro-sim, gdro-replay), where prompt.enabled, rollout.enabled and
// prompt.kl_coef are keys too: a run config has no such keys (its
// train.method decides the controllers, its loss.kl_coef is the β_KL).
func ParseConfig(data []byte, base Config) (Config, error) {
	c := base.Clone()
	var f struct {
		Classifier ClassifierConfig `yaml:"classifier"`
		Prompt     struct {
			PromptConfig `yaml:",inline"`
			Enabled      *bool    `yaml:"enabled"`
			KLCoef       *float64 `yaml:"kl_coef"`
		} `yaml:"prompt"`
		Rollout struct {
			RolloutConfig `yaml:",inline"`
			Enabled       *bool `yaml:"enabled"`
		} `yaml:"rollout"`
	}
	f.Classifier, f.Prompt.PromptConfig, f.Rollout.RolloutConfig = c.Classifier, c.Prompt, c.Rollout
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty document decodes to io.EOF and keeps base unchanged.
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("gdro config: %w", err)
	}
	c.Classifier, c.Prompt, c.Rollout = f.Classifier, f.Prompt.PromptConfig, f.Rollout.RolloutConfig
	if f.Prompt.Enabled != nil {
		c.Prompt.Enabled = *f.Prompt.Enabled
	}
	if f.Prompt.KLCoef != nil {
		c.Prompt.KLCoef = *f.Prompt.KLCoef
	}
	if f.Rollout.Enabled != nil {
		c.Rollout.Enabled = *f.Rollout.Enabled
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks every field and names the first bad one.
func (c Config) Validate() error {
	if err := c.Classifier.Validate(); err != nil {
		return err
	}
	if err := c.Prompt.validate(c.Classifier.NumBinsResolved()); err != nil {
		return err
	}
	return c.Rollout.Validate()
}

// Validate checks the classifier fields.
func (c ClassifierConfig) Validate() error {
	for i, e := range c.Edges {
		if !(e > 0 && e < 1) {
			return fmt.Errorf("gdro config: classifier.edges[%d] = %v is outside (0, 1)", i, e)
		}
		if i > 0 && e <= c.Edges[i-1] {
			return fmt.Errorf("gdro config: classifier.edges must be strictly increasing: edges[%d] = %v ≤ edges[%d] = %v", i, e, i-1, c.Edges[i-1])
		}
	}
	switch {
	case len(c.Edges) == 0 && c.NumBins < 2:
		return fmt.Errorf("gdro config: classifier needs edges or num_bins ≥ 2 (got num_bins = %d)", c.NumBins)
	case len(c.Edges) > 0 && c.NumBins != 0 && c.NumBins != len(c.Edges)+1:
		return fmt.Errorf("gdro config: classifier.num_bins = %d conflicts with %d edges (%d bins); omit num_bins", c.NumBins, len(c.Edges), len(c.Edges)+1)
	case c.NumBins > 1000:
		return fmt.Errorf("gdro config: classifier.num_bins = %d is too large (max 1000)", c.NumBins)
	}
	if c.HistoryLen < 0 {
		return fmt.Errorf("gdro config: classifier.history_len = %d must be ≥ 0 (0 = unbounded)", c.HistoryLen)
	}
	if !(c.Hysteresis >= 0 && c.Hysteresis <= 0.49) {
		return fmt.Errorf("gdro config: classifier.hysteresis = %v must be in [0, 0.49]", c.Hysteresis)
	}
	return nil
}

// NumBinsResolved is B, the number of accuracy bins (accbin_excl not counted).
func (c ClassifierConfig) NumBinsResolved() int {
	if len(c.Edges) > 0 {
		return len(c.Edges) + 1
	}
	return c.NumBins
}

// edgesResolved returns the edge list, uniform j/B when none is configured.
func (c ClassifierConfig) edgesResolved() []float64 {
	if len(c.Edges) > 0 {
		return append([]float64(nil), c.Edges...)
	}
	e := make([]float64, c.NumBins-1)
	for j := range e {
		e[j] = float64(j+1) / float64(c.NumBins)
	}
	return e
}

// NumClasses is the length of every per-bin array: B, plus one for
// accbin_excl when ExcludeExtremes is on (its index is B).
func (c ClassifierConfig) NumClasses() int {
	if c.ExcludeExtremes {
		return c.NumBinsResolved() + 1
	}
	return c.NumBinsResolved()
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// ShareNormOn resolves ShareNorm (see its comment).
func (c PromptConfig) ShareNormOn() bool {
	if c.ShareNorm != nil {
		return *c.ShareNorm
	}
	return c.Signal != SignalReward
}

func (c PromptConfig) validate(numBins int) error {
	switch {
	case c.Mode != ModePaper && c.Mode != ModeReferenceCompat:
		return fmt.Errorf("gdro config: prompt.mode = %q must be %s or %s", c.Mode, ModePaper, ModeReferenceCompat)
	case c.Mode == ModePaper && c.Focus != nil:
		return fmt.Errorf("gdro config: prompt.focus is the reference's schedule; prompt.mode %s has none", ModePaper)
	case !finite(c.Eta) || c.Eta < 0:
		return fmt.Errorf("gdro config: prompt.eta = %v must be finite and ≥ 0", c.Eta)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("gdro config: prompt.gamma = %v must be in [0, 1]", c.Gamma)
	case !(c.EMABeta > 0 && c.EMABeta <= 1):
		return fmt.Errorf("gdro config: prompt.ema_beta = %v must be in (0, 1]", c.EMABeta)
	case !finite(c.MaxWeight) || c.MaxWeight < 1:
		return fmt.Errorf("gdro config: prompt.max_weight = %v must be finite and ≥ 1", c.MaxWeight)
	case !(c.ShareFloor >= 0 && c.ShareFloor < 1):
		return fmt.Errorf("gdro config: prompt.share_floor = %v must be in [0, 1)", c.ShareFloor)
	case !finite(c.ScoreClip) || c.ScoreClip < 0:
		return fmt.Errorf("gdro config: prompt.score_clip = %v must be finite and ≥ 0 (0 = off)", c.ScoreClip)
	case !finite(c.KLCoef) || c.KLCoef < 0:
		return fmt.Errorf("gdro config: prompt.kl_coef = %v (loss.kl_coef in a run config) must be finite and ≥ 0", c.KLCoef)
	}
	switch c.Signal {
	case SignalSurrogate, SignalSurrogateKL, SignalReward:
	default:
		return fmt.Errorf("gdro config: prompt.signal = %q must be %s, %s or %s", c.Signal, SignalSurrogate, SignalSurrogateKL, SignalReward)
	}
	if f := c.Focus; f != nil {
		if f.Warmup < 0 || f.Ramp < 0 {
			return fmt.Errorf("gdro config: prompt.focus warmup = %d and ramp = %d must be ≥ 0", f.Warmup, f.Ramp)
		}
		for b, t := range f.Targets {
			if b < 0 || b >= numBins {
				return fmt.Errorf("gdro config: prompt.focus.targets has bin %d outside [0, %d)", b, numBins)
			}
			if !finite(t) || t < 0 {
				return fmt.Errorf("gdro config: prompt.focus.targets[%d] = %v must be finite and ≥ 0", b, t)
			}
		}
	}
	return nil
}

// Validate checks the Rollout-GDRO fields.
func (c RolloutConfig) Validate() error {
	switch c.Mode {
	case ModePaper, ModeReferenceCompat:
	default:
		return fmt.Errorf("gdro config: rollout.mode = %q must be %s or %s", c.Mode, ModePaper, ModeReferenceCompat)
	}
	if len(c.Arms) > 0 {
		if c.NMin != 0 || c.NMax != 0 {
			return fmt.Errorf("gdro config: rollout.arms replaces n_min/n_max; set n_min: 0 and n_max: 0 (got %d, %d)", c.NMin, c.NMax)
		}
		for i, a := range c.Arms {
			if a < 1 || a > 1024 {
				return fmt.Errorf("gdro config: rollout.arms[%d] = %d must be in [1, 1024]", i, a)
			}
			if i > 0 && a <= c.Arms[i-1] {
				return fmt.Errorf("gdro config: rollout.arms must be strictly increasing: arms[%d] = %d ≤ arms[%d] = %d", i, a, i-1, c.Arms[i-1])
			}
		}
	} else {
		if c.NMin < 1 || c.NMax < c.NMin || c.NMax > 1024 {
			return fmt.Errorf("gdro config: rollout arms need 1 ≤ n_min ≤ n_max ≤ 1024 (got n_min = %d, n_max = %d)", c.NMin, c.NMax)
		}
	}
	arms := c.ArmList()
	if len(arms) > 127 {
		return fmt.Errorf("gdro config: rollout has %d arms; at most 127 are supported", len(arms))
	}
	if c.NMean < arms[0] || c.NMean > arms[len(arms)-1] {
		return fmt.Errorf("gdro config: rollout.n_mean = %d must lie within the arms [%d, %d]", c.NMean, arms[0], arms[len(arms)-1])
	}
	if c.Enabled && c.Mode == ModePaper && c.Utility == UtilityVariance && arms[0] < 2 {
		return fmt.Errorf("gdro config: rollout utility %q needs every arm ≥ 2 (smallest arm is %d)", UtilityVariance, arms[0])
	}
	switch {
	case !finite(c.Eta) || c.Eta < 0:
		return fmt.Errorf("gdro config: rollout.eta = %v must be finite and ≥ 0", c.Eta)
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return fmt.Errorf("gdro config: rollout.gamma = %v must be in [0, 1]", c.Gamma)
	case !(c.EMABeta > 0 && c.EMABeta <= 1):
		return fmt.Errorf("gdro config: rollout.ema_beta = %v must be in (0, 1]", c.EMABeta)
	case !finite(c.DualLR) || c.DualLR < 0:
		return fmt.Errorf("gdro config: rollout.dual_lr = %v must be finite and ≥ 0", c.DualLR)
	case !finite(c.MuMax) || c.MuMax <= 0:
		return fmt.Errorf("gdro config: rollout.mu_max = %v must be finite and > 0", c.MuMax)
	case !(c.MuInit >= 0 && c.MuInit <= c.MuMax):
		return fmt.Errorf("gdro config: rollout.mu_init = %v must be in [0, mu_max = %v]", c.MuInit, c.MuMax)
	}
	switch c.Utility {
	case UtilityVariance, UtilityNegLoss, UtilityLoss:
	default:
		return fmt.Errorf("gdro config: rollout.utility = %q must be %s, %s or %s", c.Utility, UtilityVariance, UtilityNegLoss, UtilityLoss)
	}
	switch c.DualSignal {
	case DualArgmax, DualExpected:
	default:
		return fmt.Errorf("gdro config: rollout.dual_signal = %q must be %s or %s", c.DualSignal, DualArgmax, DualExpected)
	}
	switch {
	case c.DPWeight != DPWeightBin && c.DPWeight != DPWeightPrompt:
		return fmt.Errorf("gdro config: rollout.dp_weight = %q must be %s or %s", c.DPWeight, DPWeightBin, DPWeightPrompt)
	case c.Mode == ModeReferenceCompat && c.DPWeight != DPWeightBin:
		return fmt.Errorf("gdro config: rollout.dp_weight = %s needs mode %s (%s runs the reference's unweighted DP, dp_weight %s)", c.DPWeight, ModePaper, ModeReferenceCompat, DPWeightBin)
	}
	return nil
}

// ArmList returns the arms in increasing order.
func (c RolloutConfig) ArmList() []int {
	if len(c.Arms) > 0 {
		return append([]int(nil), c.Arms...)
	}
	if c.NMax < c.NMin || c.NMin < 0 {
		return []int{c.NMean}
	}
	a := make([]int, 0, c.NMax-c.NMin+1)
	for n := c.NMin; n <= c.NMax; n++ {
		a = append(a, n)
	}
	return a
}
