package trainer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/configs"
)

const legacyBase = "model: {path: m}\ndata: {train: [a.jsonl]}\n"

// TestOldKeysUpgraded: each old key, in a file or a --set, is read as its
// new key with exactly one notice naming both.
func TestOldKeysUpgraded(t *testing.T) {
	for _, c := range []struct {
		name   string
		yaml   string
		sets   []string
		check  func(Config) bool
		notice string // the one notice, in part
	}{
		{"run.matmul_precision", "run: {matmul_precision: fp32}\n", nil,
			func(c Config) bool { return c.Precision.MatMul == "fp32" }, "run.matmul_precision is now precision.matmul (read as precision.matmul: fp32)"},
		{"run.reference_dtype", "run: {reference_dtype: bf16}\n", nil,
			func(c Config) bool { return c.Precision.ReferenceDType == "bf16" }, "run.reference_dtype is now precision.reference"},
		{"run.kv_cache_dtype", "run: {kv_cache_dtype: fp32, seed: 3}\n", nil,
			func(c Config) bool { return c.Precision.KVCacheDType == "fp32" && c.Run.Seed == 3 }, "run.kv_cache_dtype is now precision.kv_cache"},
		{"rollout section", "rollout: {temperature: 0.7, max_slots: 8}\n", nil,
			func(c Config) bool {
				return c.Sampling.Temperature == 0.7 && c.Sampling.MaxSlots == 8 && c.Sampling.TopP == 1
			},
			"the rollout section is now sampling"},
		{"--set rollout.temperature", "", []string{"rollout.temperature=0.7"},
			func(c Config) bool { return c.Sampling.Temperature == 0.7 }, "rollout.KEY is read as sampling.KEY"},
		{"--set run.matmul_precision", "", []string{"run.matmul_precision=tf32"},
			func(c Config) bool { return c.Precision.MatMul == "tf32" }, "run.matmul_precision is now precision.matmul"},
		// A --set overrides the file, old name or new.
		{"--set old over new", "sampling: {temperature: 1.0}\n", []string{"rollout.temperature=0.5"},
			func(c Config) bool { return c.Sampling.Temperature == 0.5 }, "the rollout section is now sampling"},
		// The old and new keys both set to the same value: one notice.
		{"old and new agree", "run: {matmul_precision: fp32}\nprecision: {matmul: fp32}\n", nil,
			func(c Config) bool { return c.Precision.MatMul == "fp32" }, "run.matmul_precision is now precision.matmul"},
		{"rollout and sampling merged", "rollout: {temperature: 0.7, top_k: 5}\nsampling: {temperature: 0.7, max_slots: 9}\n", nil,
			func(c Config) bool {
				return c.Sampling.Temperature == 0.7 && c.Sampling.TopK == 5 && c.Sampling.MaxSlots == 9
			}, "the rollout section is now sampling"},
		// The notice is given once per old key, however many documents use it.
		{"once", "rollout: {temperature: 0.7}\n", []string{"rollout.top_p=0.9", "rollout.top_k=3"},
			func(c Config) bool { return c.Sampling.TopP == 0.9 && c.Sampling.TopK == 3 }, "the rollout section is now sampling"},
		// gdro.rollout is Rollout-GDRO's and never renamed.
		{"gdro.rollout untouched", "train: {method: rollout_gdro}\ngdro: {rollout: {enabled: true, n_mean: 3}}\n", nil,
			func(c Config) bool {
				return c.GDRO.Rollout.Enabled && c.GDRO.Rollout.NMean == 3 && c.Sampling.MaxSlots == 64
			},
			"gdro.rollout.enabled is no longer a key: train.method rollout_gdro decides it (true, as set)"},
		{"gdro.prompt.enabled agrees", "train: {method: prompt_gdro}\ngdro: {prompt: {enabled: true}}\n", nil,
			func(c Config) bool { return c.GDRO.Prompt.Enabled }, "gdro.prompt.enabled is no longer a key: train.method prompt_gdro decides it (true, as set)"},
		{"--set gdro.prompt.enabled agrees", "", []string{"gdro.prompt.enabled=false"},
			func(c Config) bool { return !c.GDRO.Prompt.Enabled }, "train.method grpo decides it (false, as set)"},
		// The reference's Rollout-GDRO runs: Prompt-GDRO on, not applied.
		{"reference rollout runs", "train: {method: rollout_gdro}\ngdro: {prompt: {enabled: true, apply: false}}\n", nil,
			func(c Config) bool { return c.GDRO.Prompt.Enabled && !c.GDRO.Prompt.Apply && c.GDRO.Rollout.Enabled },
			"train.method rollout_gdro decides it (true, as set)"},
		{"paper rollout runs", "train: {method: rollout_gdro}\ngdro: {prompt: {enabled: false}}\n", nil,
			func(c Config) bool { return !c.GDRO.Prompt.Enabled && c.GDRO.Rollout.Enabled },
			"train.method rollout_gdro decides it (false, as set)"},
		{"gdro.prompt.kl_coef equal", "loss: {kl_coef: 0.01}\ngdro: {prompt: {kl_coef: 0.01, signal: surrogate_kl}}\n", nil,
			func(c Config) bool { return c.GDRO.Prompt.KLCoef == 0.01 }, "gdro.prompt.kl_coef is now loss.kl_coef (the same value, 0.01)"},
		{"gdro.prompt.kl_coef unread", "loss: {kl_coef: 0}\ngdro: {prompt: {kl_coef: 0.001}}\n", nil,
			func(c Config) bool { return c.GDRO.Prompt.KLCoef == 0 }, "gdro.prompt.kl_coef = 0.001 is ignored: only the surrogate_kl signal read it"},
	} {
		cfg, err := LoadBytes([]byte(legacyBase+c.yaml), "old.yaml", c.sets)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !c.check(cfg) {
			t.Errorf("%s: not read as the new key: precision %+v sampling %+v gdro.prompt %+v", c.name, cfg.Precision, cfg.Sampling, cfg.GDRO.Prompt)
		}
		if n := cfg.Notices(); len(n) != 1 || !strings.Contains(n[0], c.notice) || !strings.HasSuffix(n[0], "it") {
			t.Errorf("%s: notices %q, want one containing %q", c.name, n, c.notice)
		}
	}
}

// TestOldKeyConflicts: an old key and its new key set to different values
// in one document, or a removed key that disagrees with what now decides it,
// are errors naming both.
func TestOldKeyConflicts(t *testing.T) {
	for _, c := range []struct {
		yaml string
		sets []string
		want []string
	}{
		{"run: {matmul_precision: fp32}\nprecision: {matmul: bf16}\n", nil,
			[]string{"run.matmul_precision = fp32 and precision.matmul = bf16 are both set"}},
		{"run: {kv_cache_dtype: bf16}\nprecision: {kv_cache: fp32}\n", nil,
			[]string{"run.kv_cache_dtype = bf16", "precision.kv_cache = fp32"}},
		{"rollout: {temperature: 0.7}\nsampling: {temperature: 1.0}\n", nil,
			[]string{"rollout.temperature = 0.7 and sampling.temperature = 1.0 are both set"}},
		{"", []string{"rollout={max_slots: 4}", "sampling.max_slots=8"}, nil}, // two documents: the later wins
		{"train: {method: grpo}\ngdro: {prompt: {enabled: true}}\n", nil,
			[]string{"gdro.prompt.enabled: true disagrees with train.method grpo", "grpo runs neither controller"}},
		{"train: {method: prompt_gdro}\ngdro: {rollout: {enabled: true}}\n", nil,
			[]string{"gdro.rollout.enabled: true disagrees with train.method prompt_gdro"}},
		// A later --set of the method is what the old key is checked against.
		{"gdro: {prompt: {enabled: true}}\n", []string{"train.method=grpo"}, []string{"gdro.prompt.enabled: true disagrees with train.method grpo"}},
		// rollout_gdro: Prompt-GDRO runs beside it only unapplied.
		{"train: {method: rollout_gdro}\ngdro: {prompt: {enabled: true, apply: true}}\n", nil,
			[]string{"gdro.prompt.enabled: true disagrees with train.method rollout_gdro", "only with gdro.prompt.apply: false"}},
		{"train: {method: rollout_gdro}\ngdro: {prompt: {enabled: false, apply: false}}\n", nil,
			[]string{"gdro.prompt.enabled: false disagrees with train.method rollout_gdro"}},
		{"gdro: {prompt: {enabled: 1}}\n", nil, []string{"gdro.prompt.enabled: want true or false"}},
		{"loss: {kl_coef: 0.001}\ngdro: {prompt: {kl_coef: 0.05, signal: surrogate_kl}}\n", nil,
			[]string{"gdro.prompt.kl_coef = 0.05 differs from loss.kl_coef = 0.001", "set loss.kl_coef: 0.05"}},
		{"gdro: {prompt: {kl_coef: 0.05}}\n", []string{"gdro.prompt.signal=surrogate_kl"},
			[]string{"gdro.prompt.kl_coef = 0.05 differs from loss.kl_coef = 0.001"}},
	} {
		_, err := LoadBytes([]byte(legacyBase+c.yaml), "old.yaml", c.sets)
		if c.want == nil {
			if err != nil {
				t.Errorf("%q %v: %v", c.yaml, c.sets, err)
			}
			continue
		}
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: error %v, want %q", c.yaml, c.sets, err, w)
			}
		}
	}
}

// TestSignalUsesLossKLCoef: the surrogate_kl signal's β_KL is loss.kl_coef.
func TestSignalUsesLossKLCoef(t *testing.T) {
	cfg, err := LoadBytes([]byte(legacyBase), "x.yaml", []string{"loss.kl_coef=0.02", "gdro.prompt.signal=surrogate_kl", "train.method=prompt_gdro"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GDRO.Prompt.KLCoef != 0.02 || len(cfg.Notices()) != 0 {
		t.Fatalf("signal β_KL %v, notices %q; want 0.02 and none", cfg.GDRO.Prompt.KLCoef, cfg.Notices())
	}
	// The removed keys are not printed (--print-config, the run folder's
	// config.yaml); the one enabled: left is train.dynamic_sampling's.
	if out, _ := cfg.YAML(); bytes.Count(out, []byte("enabled:")) != 1 || bytes.Count(out, []byte("kl_coef:")) != 1 {
		t.Errorf("the resolved config prints a removed key:\n%s", out)
	}
}

// oldShipped converts a shipped config to the keys of the build before
// issue 34, as its --print-config printed them.
func oldShipped(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := configs.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Resolve(raw, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return toOldKeys(t, cfg)
}

// toOldKeys renders cfg as the build before issue 34 recorded it: run.*
// precisions, the rollout section, the controllers' enabled flags and
// gdro.prompt.kl_coef.
func toOldKeys(t *testing.T, cfg Config) []byte {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	p := m["precision"].(map[string]any)
	run := m["run"].(map[string]any)
	run["matmul_precision"], run["reference_dtype"], run["kv_cache_dtype"] = p["matmul"], p["reference"], p["kv_cache"]
	delete(m, "precision")
	m["rollout"] = m["sampling"]
	delete(m, "sampling")
	g := m["gdro"].(map[string]any)
	g["prompt"].(map[string]any)["enabled"] = cfg.GDRO.Prompt.Enabled
	g["prompt"].(map[string]any)["kl_coef"] = 0.001 // the old default, whatever loss.kl_coef is
	g["rollout"].(map[string]any)["enabled"] = cfg.GDRO.Rollout.Enabled
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOldResolvedConfigsLoad: the whole resolved config of every shipped
// config as the old build printed it (its run folder's config.yaml, its
// checkpoints' recorded config) reads back as today's, from YAML and from a
// checkpoint's JSON, with one notice per old key.
func TestOldResolvedConfigsLoad(t *testing.T) {
	for _, name := range configs.Names() {
		raw, _ := configs.Get(name)
		want, err := Resolve(raw, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		old := oldShipped(t, name)
		var doc any
		json.Unmarshal(old, &doc)
		oldYAML, _ := yaml.Marshal(doc)
		got, err := Resolve(oldYAML, name+" (old keys)", nil)
		if err != nil {
			t.Errorf("%s: old resolved config: %v", name, err)
			continue
		}
		if n := len(got.Notices()); n != 7 {
			t.Errorf("%s: %d notices, want 7 (3 precisions, rollout, 2 enabled, kl_coef): %q", name, n, got.Notices())
		}
		got.notices = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the old resolved config reads as\n%+v\nwant\n%+v", name, got, want)
		}
		rec, recJSON, notes, err := upgradeRecorded(old)
		if err != nil {
			t.Errorf("%s: recorded config: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(rec, want) {
			t.Errorf("%s: the old recorded config reads as\n%+v\nwant\n%+v", name, rec, want)
		}
		if len(notes) != 7 || strings.Contains(strings.Join(notes, "\n"), "rename it") {
			t.Errorf("%s: recorded config notices %q: want 7, none asking to edit", name, notes)
		}
		keys, _ := flatKeys(recJSON)
		if _, ok := keys["sampling.temperature"]; !ok || keys["precision.matmul"] == "" {
			t.Errorf("%s: the upgraded recorded config lacks the new keys: %v", name, keys)
		}
	}
	// Today's recorded config has nothing to upgrade.
	raw, _ := json.Marshal(Default().Resolved())
	if _, _, notes, err := upgradeRecorded(raw); err != nil || len(notes) != 0 {
		t.Fatalf("today's recorded config: %v, notices %q", err, notes)
	}
}

// TestShippedConfigsUseNewKeys: the shipped configs load without a notice.
func TestShippedConfigsUseNewKeys(t *testing.T) {
	for _, name := range configs.Names() {
		raw, _ := configs.Get(name)
		cfg, err := Resolve(raw, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := cfg.Notices(); len(n) != 0 {
			t.Errorf("%s: %q", name, n)
		}
	}
}

// TestResumeFromOldBuild: a checkpoint whose manifest records the config
// with the old keys (as the build before issue 34 wrote it, without a
// manifest checksum) resumes under today's config, logging the notices and
// no "predates" line for the renamed keys; a recorded gdro.prompt.kl_coef that
// the surrogate_kl signal read, different from loss.kl_coef, is refused.
func TestResumeFromOldBuild(t *testing.T) {
	cfg, _ := fixture(t)
	cfg.Train.Steps = 2
	cfg.Checkpoint.Every, cfg.Checkpoint.Keep = 1, 0
	dir := runFixture(t, cfg)
	p := filepath.Join(dir, "checkpoints", "step_00000002", "manifest.json")
	rewrite := func(c Config) {
		raw, _ := os.ReadFile(p)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var old any
		json.Unmarshal(toOldKeys(t, c.Resolved()), &old)
		m["config"] = old
		delete(m, "manifest_sha256")
		raw, _ = json.MarshalIndent(m, "", "  ")
		os.WriteFile(p, raw, 0o644)
	}
	rewrite(cfg)
	var log bytes.Buffer
	cfg.Train.Steps = 3
	tr, err := Open(cfg, &log, Options{Resume: "auto"})
	if err != nil {
		t.Fatalf("resume from an old build's checkpoint: %v", err)
	}
	tr.Close()
	out := log.String()
	for _, w := range []string{"resume: the checkpoint's config: run.matmul_precision is now precision.matmul",
		"resume: the checkpoint's config: the rollout section is now sampling", "gdro.prompt.enabled is no longer a key"} {
		if !strings.Contains(out, w) {
			t.Errorf("resume log lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "predates") {
		t.Errorf("renamed keys taken as missing:\n%s", out)
	}

	c := cfg
	c.GDRO.Prompt.Signal, c.Loss.KLCoef = "surrogate_kl", 0.01 // the old β_KL was 0.001
	rewrite(c)
	if _, err := Open(c, &log, Options{Resume: "auto"}); err == nil || !strings.Contains(err.Error(), "gdro.prompt.kl_coef = 0.001 differs from loss.kl_coef = 0.01") {
		t.Fatalf("resume with a different signal β_KL: %v", err)
	}
}
