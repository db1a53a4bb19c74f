package trainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/memplan"
	"github.com/gdrotrain/gdrotrain/model"
)

func TestConfigStrictAndOverrides(t *testing.T) {
	base := "model: {path: m}\ndata: {train: [a.jsonl]}\n"
	cfg, err := LoadBytes([]byte(base), "x.yaml", []string{"optim.lr=3e-6", "train.method=prompt_gdro", "data.train=[b.jsonl, c.parquet]", "gdro.classifier.edges=[0.5]"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Optim.LR != 3e-6 || !cfg.GDRO.Prompt.Enabled || cfg.GDRO.Rollout.Enabled || len(cfg.Data.Train) != 2 || len(cfg.GDRO.Classifier.Edges) != 1 {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	if cfg.Optim.Beta2 != 0.999 || cfg.Loss.ClipHigh != 0.28 {
		t.Fatalf("defaults lost: %+v", cfg.Optim)
	}
	// A whole number written as a float is the integer it is.
	if c, err := LoadBytes([]byte(base+"train: {steps: 3.0, prompts_per_step: 1e3, mini_batch_prompts: 1000}\n"), "x.yaml", nil); err != nil || c.Train.Steps != 3 || c.Train.PromptsPerStep != 1000 {
		t.Fatalf("whole floats: steps %d, prompts %d, %v", c.Train.Steps, c.Train.PromptsPerStep, err)
	}
	cases := []struct {
		yaml string
		sets []string
		want string
	}{
		{base + "optim: {lrr: 1}\n", nil, "field lrr not found"},
		{base, []string{"train.stepz=3"}, "--set train.stepz=3"},
		{base, []string{"novalue"}, "want section.key=value"},
		{base, []string{"train.method=ppo"}, `train.method "ppo"`},
		{"data: {train: [a.jsonl]}\n", nil, "model.path is required"},
		{base, []string{"loss.clip_low=1.5"}, "loss.clip_low"},
		{base, []string{"train.mini_batch_prompts=1000"}, "exceeds train.prompts_per_step"},
		{base, []string{"reward.mode=magic"}, `reward.mode "magic"`},
		// Non-finite numbers are refused at load, naming the key (a NaN
		// passes "lr > 0" and used to die after a step, or at the first
		// checkpoint for grad_clip).
		{base, []string{"optim.lr=.nan"}, "optim.lr = NaN: must be a finite number"},
		{base, []string{"optim.grad_clip=.nan"}, "optim.grad_clip = NaN: must be a finite number"},
		{base, []string{"optim.lr=.inf"}, "optim.lr = +Inf: must be a finite number"},
		{base, []string{"loss.kl_coef=-.inf"}, "loss.kl_coef = -Inf"},
		{base, []string{"sampling.temperature=.nan"}, "sampling.temperature = NaN"},
		{base, []string{"validation.top_p=.nan"}, "validation.top_p = NaN"},
		{base, []string{"gdro.classifier.edges=[0.5, .nan]"}, "gdro.classifier.edges[1] = NaN"},
		{base, []string{"gdro.prompt.focus={targets: {2: .inf}}"}, "gdro.prompt.focus.targets[2] = +Inf"},
		// Out-of-range values name their key.
		{base, []string{"optim.beta2=1"}, "optim.beta2 = 1 must be in [0, 1)"},
		{base, []string{"optim.grad_clip=-1"}, "optim.grad_clip = -1 must be ≥ 0"},
		{base, []string{"sampling.top_p=0"}, "sampling.top_p = 0 must be in (0, 1]"},
		{base, []string{"validation.max_new_tokens=0"}, "validation.max_new_tokens = 0 must be ≥ 1"},
		{base, []string{"sampling.max_slots=0"}, "sampling.max_slots = 0 must be ≥ 1"},
		{base, []string{"sampling.kv_cache_gib=-1"}, "sampling.kv_cache_gib = -1 must be ≥ 0"},
		{base, []string{"sampling.kv_cache_gib=.nan"}, "sampling.kv_cache_gib = NaN"},
		{base, []string{"sampling.kv_cache_gib=40", "precision.kv_cache=fp32"}, "precision.kv_cache is fp32"},
		{base, []string{"data.max_prompt_length=0"}, "data.max_prompt_length = 0 must be ≥ 1"},
		{base, []string{"train.ppo_epochs=0"}, "train.ppo_epochs = 0 must be ≥ 1"},
		{base, []string{"loss.adv_eps=0"}, "loss.adv_eps must be > 0"},
		{base, []string{"run.name=.."}, `run.name ".." must be a plain folder name`},
		// Values yaml.v3 took in silence: a float truncated into an integer
		// key (3.5 ran 3 steps), an empty --set value (the key kept its value).
		{base + "train:\n  steps: 3.5\n", nil, "line 4: train.steps: 3.5 is not a whole number"},
		{base, []string{"train.steps=3.5"}, "--set train.steps=3.5: line 1: train.steps: 3.5 is not a whole number"},
		{base, []string{"validation.n=.nan"}, "validation.n: .nan is not a whole number"},
		{base, []string{"gdro.prompt.focus={targets: {2: 1}}", "run.seed=1e-3"}, "run.seed: 1e-3 is not a whole number"},
		{base, []string{"run.name="}, "--set run.name=: no value for run.name"},
		{base, []string{`run.name=""`}, `run.name "" must be a plain folder name`},
	}
	for _, c := range cases {
		_, err := LoadBytes([]byte(c.yaml), "x.yaml", c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %v: error %v, want %q", c.yaml, c.sets, err, c.want)
		}
	}
}

// TestResolveWithoutInputs: Resolve (used by --print-config and
// --dry-run) checks every value but does not require model.path and
// data.train, which LoadBytes does.
func TestResolveWithoutInputs(t *testing.T) {
	raw, err := configs.Get("paper-grpo-1.7b")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Resolve(raw, "paper-grpo-1.7b", nil)
	if err != nil {
		t.Fatalf("Resolve without model.path: %v", err)
	}
	if cfg.Model.Path != "" {
		t.Fatalf("model.path %q", cfg.Model.Path)
	}
	if _, err := Resolve(raw, "x", []string{"optim.lr=.nan"}); err == nil || !strings.Contains(err.Error(), "optim.lr") {
		t.Fatalf("Resolve let a NaN through: %v", err)
	}
	if _, err := LoadBytes(raw, "x", nil); err == nil || !strings.Contains(err.Error(), "model.path is required") {
		t.Fatalf("LoadBytes without model.path: %v", err)
	}
}

// TestBuiltinConfigsLoad: every shipped config decodes strictly and
// validates once its paths are filled in.
func TestBuiltinConfigsLoad(t *testing.T) {
	for _, name := range configs.Names() {
		raw, err := configs.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := LoadBytes(raw, name, []string{"model.path=m", "data.train=[t.parquet]"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("model: {path: m}\ndata: {train: [a]}\n"), 0o644)
	if _, err := Load(path, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestMemoryPlan(t *testing.T) {
	mc := &model.Config{HiddenSize: 2048, IntermediateSize: 6144, NumHiddenLayers: 28, NumAttentionHeads: 16,
		NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 151936, TieWordEmbeddings: true}
	cfg := Default()
	p := memplan.Estimate(mc, withRef(cfg.memSettings(true)))
	// Qwen3-1.7B: ≈1.7e9 parameters → 4 float32 copies of ≈6.4 GiB plus the reference.
	if w := float64(p.Weights) / (1 << 30); w < 5.5 || w > 7.5 {
		t.Fatalf("weights %.2f GiB, want ≈6.4", w)
	}
	persistent := p.Weights + p.Reference + p.Gradients + p.Moments + p.WeightCopies
	if p.Total() != persistent+max(p.KVCache, p.Activations+p.Logits+p.GatherBuffer) || p.Reference != p.Weights {
		t.Fatalf("plan parts do not add up: %+v", p)
	}
	err := memplan.Check(p, 8<<30)
	if err == nil || !strings.Contains(err.Error(), "needs about") || !strings.Contains(err.Error(), "micro_batch_rows") {
		t.Fatalf("memplan.Check: %v", err)
	}
	if memplan.Check(p, 0) != nil || memplan.Check(p, p.Total()) != nil {
		t.Fatal("a plan that fits (or unknown memory) was refused")
	}
}

// TestResolvedThenValidate: train.method switches the GDRO controllers in
// Resolved, the one place a config is changed; Validate changes nothing and
// refuses a config built in code whose switches disagree with its method.
func TestResolvedThenValidate(t *testing.T) {
	for _, c := range []struct {
		method                       string
		promptIn, apply, prompt, rol bool
	}{
		{MethodGRPO, true, true, false, false},
		{MethodGRPO, true, false, false, false},
		{MethodPromptGDRO, false, true, true, false},
		{MethodPromptGDRO, false, false, true, false}, // computed and logged, not applied
		{MethodRolloutGDRO, true, true, false, true},  // Prompt-GDRO off
		{MethodRolloutGDRO, false, false, true, true}, // the reference's runs: computed, not applied
	} {
		cfg := Default()
		cfg.Model.Path, cfg.Data.Train = "m", []string{"a.jsonl"}
		cfg.Train.Method, cfg.GDRO.Prompt.Enabled, cfg.GDRO.Prompt.Apply = c.method, c.promptIn, c.apply
		r := cfg.Resolved()
		if r.GDRO.Prompt.Enabled != c.prompt || r.GDRO.Rollout.Enabled != c.rol {
			t.Errorf("%s (prompt %v, apply %v): resolved prompt %v rollout %v, want %v %v", c.method, c.promptIn, c.apply, r.GDRO.Prompt.Enabled, r.GDRO.Rollout.Enabled, c.prompt, c.rol)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%s: resolved config: %v", c.method, err)
		}
		snapshot := r
		_ = r.Validate()
		if r.GDRO.Prompt.Enabled != snapshot.GDRO.Prompt.Enabled || r.GDRO.Rollout.Enabled != snapshot.GDRO.Rollout.Enabled {
			t.Errorf("%s: Validate changed the config", c.method)
		}
		// Every case's unresolved switches disagree with its method.
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "disagree with train.method") {
			t.Errorf("%s: unresolved switches accepted: %v", c.method, err)
		}
	}
}

// withRef is s with a reference model, whatever the config's KL
// coefficient.
func withRef(s memplan.Settings) memplan.Settings {
	s.NeedRef = true
	return s
}
