package gdro

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultAndPresetsValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", name, err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("Preset(%q) does not validate: %v", name, err)
		}
		if _, err := New(c); err != nil {
			t.Errorf("New(Preset(%q)): %v", name, err)
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "unknown preset") {
		t.Errorf("Preset(nope) error = %v", err)
	}
}

func TestPresetClassCounts(t *testing.T) {
	for _, c := range []struct {
		preset           string
		bins, classes, h int
		delta            float64
		mode             string
	}{
		{"prompt-10bins", 10, 10, 100, 0.03, ModePaper},
		{"prompt-3bins-ref", 3, 4, 50, 0.03, ModePaper},
		{"prompt-6bins-ref", 7, 7, 100, 0.03, ModePaper},
		{"prompt-softf-6bins-ref", 7, 8, 100, 0.03, ModePaper},
		{"rollout-10bins-ref", 10, 10, 50, 0, ModeReferenceCompat},
		{"rollout-3bins-ref", 3, 4, 50, 0, ModeReferenceCompat},
		{"rollout-6bins-ref", 7, 7, 50, 0, ModeReferenceCompat},
	} {
		cfg, err := Preset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		cl := cfg.Classifier
		if cl.NumBinsResolved() != c.bins || cl.NumClasses() != c.classes || cl.HistoryLen != c.h || cl.Hysteresis != c.delta || cfg.Rollout.Mode != c.mode {
			t.Errorf("%s: bins %d classes %d H %d δ %v mode %s; want %d %d %d %v %s", c.preset,
				cl.NumBinsResolved(), cl.NumClasses(), cl.HistoryLen, cl.Hysteresis, cfg.Rollout.Mode, c.bins, c.classes, c.h, c.delta, c.mode)
		}
	}
}

// The reference Rollout-GDRO presets carry what run_rollout_groupdro.sh sets
// for the (unapplied) Prompt-GDRO object: no share normalisation
// (loss_norm_by_class is never set there) and gdro_ema_beta 0.4, or 0.12 in
// the 6-bin case (docs/algorithm.md §10.3); the Prompt-GDRO presets keep
// share normalisation and β 0.12 (run_groupdro.sh).
func TestReferencePresetsMatchScripts(t *testing.T) {
	for _, c := range []struct {
		preset    string
		shareNorm bool
		beta      float64
		apply     bool
	}{
		{"rollout-3bins-ref", false, 0.4, false},
		{"rollout-6bins-ref", false, 0.12, false},
		{"rollout-10bins-ref", false, 0.4, false},
		{"prompt-3bins-ref", true, 0.12, true},
		{"prompt-6bins-ref", true, 0.12, true},
		{"prompt-hardf-6bins-ref", true, 0.12, true},
		{"prompt-softf-6bins-ref", true, 0.12, true},
	} {
		cfg, err := Preset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		p := cfg.Prompt
		if !p.Enabled || p.ShareNormOn() != c.shareNorm || p.EMABeta != c.beta || p.Apply != c.apply {
			t.Errorf("%s: prompt enabled %v, share norm %v, β %v, apply %v; want true, %v, %v, %v",
				c.preset, p.Enabled, p.ShareNormOn(), p.EMABeta, p.Apply, c.shareNorm, c.beta, c.apply)
		}
	}
}

func TestValidateNamesField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"edge out of range", func(c *Config) { c.Classifier.Edges = []float64{0.2, 1.0} }, "classifier.edges[1]"},
		{"edges unsorted", func(c *Config) { c.Classifier.Edges = []float64{0.5, 0.2} }, "strictly increasing"},
		{"no bins", func(c *Config) { c.Classifier.Edges = nil }, "num_bins"},
		{"num_bins conflict", func(c *Config) { c.Classifier.NumBins = 5 }, "classifier.num_bins"},
		{"history", func(c *Config) { c.Classifier.HistoryLen = -1 }, "classifier.history_len"},
		{"hysteresis", func(c *Config) { c.Classifier.Hysteresis = 0.5 }, "classifier.hysteresis"},
		{"eta", func(c *Config) { c.Prompt.Eta = -1 }, "prompt.eta"},
		{"gamma", func(c *Config) { c.Prompt.Gamma = 1.5 }, "prompt.gamma"},
		{"ema", func(c *Config) { c.Prompt.EMABeta = 0 }, "prompt.ema_beta"},
		{"cap", func(c *Config) { c.Prompt.MaxWeight = 0.5 }, "prompt.max_weight"},
		{"floor", func(c *Config) { c.Prompt.ShareFloor = 1 }, "prompt.share_floor"},
		{"clip", func(c *Config) { c.Prompt.ScoreClip = -1 }, "prompt.score_clip"},
		{"signal", func(c *Config) { c.Prompt.Signal = "kl" }, "prompt.signal"},
		{"focus bin", func(c *Config) { c.Prompt.Focus = &FocusConfig{Targets: map[int]float64{10: 0}} }, "prompt.focus.targets"},
		{"focus ramp", func(c *Config) { c.Prompt.Focus = &FocusConfig{Ramp: -1} }, "prompt.focus"},
		{"mode", func(c *Config) { c.Rollout.Mode = "fixed" }, "rollout.mode"},
		{"arms range", func(c *Config) { c.Rollout.NMin = 0 }, "n_min"},
		{"arms and nmin", func(c *Config) { c.Rollout.Arms = []int{2, 4} }, "rollout.arms replaces"},
		{"arms order", func(c *Config) { c.Rollout.NMin, c.Rollout.NMax, c.Rollout.Arms = 0, 0, []int{4, 2} }, "rollout.arms must be strictly"},
		{"n_mean", func(c *Config) { c.Rollout.NMean = 13 }, "rollout.n_mean"},
		{"variance needs 2", func(c *Config) { c.Rollout.Enabled, c.Rollout.NMin = true, 1 }, "every arm ≥ 2"},
		{"rollout eta", func(c *Config) { c.Rollout.Eta = -0.1 }, "rollout.eta"},
		{"rollout ema", func(c *Config) { c.Rollout.EMABeta = 2 }, "rollout.ema_beta"},
		{"dual lr", func(c *Config) { c.Rollout.DualLR = -1 }, "rollout.dual_lr"},
		{"mu max", func(c *Config) { c.Rollout.MuMax = 0 }, "rollout.mu_max"},
		{"mu init", func(c *Config) { c.Rollout.MuInit = 11 }, "rollout.mu_init"},
		{"utility", func(c *Config) { c.Rollout.Utility = "reward" }, "rollout.utility"},
		{"dual signal", func(c *Config) { c.Rollout.DualSignal = "mean" }, "rollout.dual_signal"},
		{"dp weight", func(c *Config) { c.Rollout.DPWeight = "rows" }, "rollout.dp_weight"},
		{"dp weight in reference_compat", func(c *Config) { c.Rollout.Mode, c.Rollout.DPWeight = ModeReferenceCompat, DPWeightPrompt }, "rollout.dp_weight"},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Validate() = %v, want an error naming %q", c.name, err, c.field)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", c.name)
		}
	}
}

func TestParseConfig(t *testing.T) {
	base := DefaultConfig()
	// empty document keeps the base
	got, err := ParseConfig(nil, base)
	if err != nil || !reflect.DeepEqual(got, base) {
		t.Fatalf("ParseConfig(empty) = %+v, %v", got, err)
	}
	y := `
classifier:
  edges: [0.4, 0.75]
  exclude_extremes: true
prompt:
  enabled: true
  signal: reward
  kl_coef: 0.05
  focus: {targets: {0: 0.5}, warmup: 3, ramp: 4}
rollout:
  enabled: true
  n_min: 0
  n_max: 0
  arms: [2, 4, 8]
`
	got, err = ParseConfig([]byte(y), base)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Classifier.Edges, []float64{0.4, 0.75}) || got.Classifier.NumClasses() != 4 ||
		!got.Prompt.Enabled || got.Prompt.ShareNormOn() || got.Prompt.Focus.Targets[0] != 0.5 ||
		!reflect.DeepEqual(got.Rollout.ArmList(), []int{2, 4, 8}) || got.Prompt.Eta != 0.65 ||
		!got.Rollout.Enabled || got.Prompt.KLCoef != 0.05 {
		t.Errorf("ParseConfig: %+v", got)
	}
	if !reflect.DeepEqual(base, DefaultConfig()) {
		t.Error("ParseConfig modified its base")
	}
	// JSON is YAML
	if _, err := ParseConfig([]byte(`{"rollout": {"mode": "reference_compat"}}`), base); err != nil {
		t.Errorf("JSON config: %v", err)
	}
	for _, bad := range []struct{ doc, want string }{
		{"prompt:\n  etaa: 1\n", "etaa"},
		{"rollout: {mode: nope}\n", "rollout.mode"},
		{"classifier: [1, 2]\n", "gdro config"},
	} {
		if _, err := ParseConfig([]byte(bad.doc), base); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseConfig(%q) = %v, want error containing %q", bad.doc, err, bad.want)
		}
	}
}

func TestConfigJSONRoundTripAndClone(t *testing.T) {
	c, _ := Preset("prompt-softf-6bins-ref")
	on := true
	c.Prompt.ShareNorm = &on
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var d Config
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	// The switches and the β_KL are no keys: a preset, a standalone config
	// (ParseConfig) or the run's train.method and loss.kl_coef set them.
	d.Prompt.Enabled, d.Rollout.Enabled, d.Prompt.KLCoef = c.Prompt.Enabled, c.Rollout.Enabled, c.Prompt.KLCoef
	if !reflect.DeepEqual(c, d) {
		t.Errorf("JSON round trip differs:\n%+v\n%+v", c, d)
	}
	e := c.Clone()
	e.Classifier.Edges[0] = 0.5
	e.Prompt.Focus.Targets[0] = 3
	*e.Prompt.ShareNorm = false
	if c.Classifier.Edges[0] == 0.5 || c.Prompt.Focus.Targets[0] == 3 || !*c.Prompt.ShareNorm {
		t.Error("Clone shares memory with the original")
	}
}

func TestShareNormDefault(t *testing.T) {
	c := DefaultConfig().Prompt
	if !c.ShareNormOn() {
		t.Error("surrogate signal: share normalization should default on")
	}
	c.Signal = SignalReward
	if c.ShareNormOn() {
		t.Error("reward signal: share normalization should default off")
	}
	on := true
	c.ShareNorm = &on
	if !c.ShareNormOn() {
		t.Error("explicit share_norm: true ignored")
	}
}

func TestUniformBinsResolved(t *testing.T) {
	c := ClassifierConfig{NumBins: 4}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	checkSlice(t, "edges", c.edgesResolved(), []float64{0.25, 0.5, 0.75}, 0)
}
