package model

// The PEFT adapter folder: adapter_config.json and adapter_model.safetensors
// with PEFT's tensor names ("base_model.model." + our adapter names, the
// adapter name "default" left out as PEFT's save_pretrained does). It is
// both what a LoRA checkpoint holds of the policy and what `gdrotrain export
// --adapter` writes, so peft.PeftModel.from_pretrained(base, dir) loads it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

const (
	// AdapterConfigFile and AdapterWeightsFile are PEFT's file names.
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
	// peftPrefix is what PEFT's PeftModelForCausalLM puts before the base
	// model's module names.
	peftPrefix = "base_model.model."
)

// AdapterConfig is the part of PEFT's LoraConfig (adapter_config.json) we
// write and check. Fields PEFT writes that change the computation (rsLoRA,
// DoRA, per-module ranks, biases, fan-in-fan-out layouts) are read so that
// an adapter using them is refused by name instead of loaded wrongly.
type AdapterConfig struct {
	PeftType          string             `json:"peft_type"`
	TaskType          string             `json:"task_type"`
	BaseModel         string             `json:"base_model_name_or_path"`
	R                 int                `json:"r"`
	LoRAAlpha         float64            `json:"lora_alpha"`
	TargetModules     []string           `json:"target_modules"`
	LoRADropout       float64            `json:"lora_dropout"`
	Bias              string             `json:"bias"`
	FanInFanOut       bool               `json:"fan_in_fan_out"`
	UseRSLoRA         bool               `json:"use_rslora"`
	UseDoRA           bool               `json:"use_dora"`
	InitLoRAWeights   bool               `json:"init_lora_weights"`
	InferenceMode     bool               `json:"inference_mode"`
	RankPattern       map[string]int     `json:"rank_pattern"`
	AlphaPattern      map[string]float64 `json:"alpha_pattern"`
	ModulesToSave     []string           `json:"modules_to_save"`
	LayersToTransform any                `json:"layers_to_transform"`
}

// peftModule is a target's name in PEFT's target_modules ("q_proj").
func peftModule(target string) string {
	p := loraModulePaths[target]
	return p[strings.LastIndex(p, ".")+1:]
}

// adapterConfigOf is the adapter_config.json of lc over the base model at
// basePath.
func adapterConfigOf(lc *LoRAConfig, basePath string) AdapterConfig {
	var mods []string
	for _, t := range LoRAModules {
		if lc.Has(t) {
			mods = append(mods, peftModule(t))
		}
	}
	return AdapterConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: basePath, R: lc.Rank, LoRAAlpha: lc.Alpha,
		TargetModules: mods, Bias: "none", InitLoRAWeights: true, InferenceMode: true,
		RankPattern: map[string]int{}, AlphaPattern: map[string]float64{}}
}

// LoRA returns the adapter shape an adapter_config.json describes,
// refusing what our adapters do not compute.
func (c AdapterConfig) LoRA() (*LoRAConfig, error) {
	var bad []string
	if c.PeftType != "LORA" {
		bad = append(bad, fmt.Sprintf("peft_type %q (want LORA)", c.PeftType))
	}
	if c.UseRSLoRA {
		bad = append(bad, "use_rslora (scale α/√r)")
	}
	if c.UseDoRA {
		bad = append(bad, "use_dora")
	}
	if c.FanInFanOut {
		bad = append(bad, "fan_in_fan_out")
	}
	if c.Bias != "" && c.Bias != "none" {
		bad = append(bad, fmt.Sprintf("bias %q", c.Bias))
	}
	if len(c.RankPattern) > 0 || len(c.AlphaPattern) > 0 {
		bad = append(bad, "rank_pattern/alpha_pattern (per-module ranks)")
	}
	if len(c.ModulesToSave) > 0 {
		bad = append(bad, "modules_to_save")
	}
	if c.LayersToTransform != nil {
		bad = append(bad, "layers_to_transform")
	}
	lc := &LoRAConfig{Rank: c.R, Alpha: c.LoRAAlpha}
	for _, m := range c.TargetModules {
		found := false
		for _, t := range LoRAModules {
			if peftModule(t) == m {
				lc.Targets, found = append(lc.Targets, t), true
			}
		}
		if !found {
			bad = append(bad, fmt.Sprintf("target module %q", m))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("unsupported LoRA settings: %s", strings.Join(bad, ", "))
	}
	if err := lc.Validate(); err != nil {
		return nil, err
	}
	return lc, nil
}

// ReadAdapterConfig reads DIR/adapter_config.json.
func ReadAdapterConfig(dir string) (AdapterConfig, *LoRAConfig, error) {
	path := filepath.Join(dir, AdapterConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return AdapterConfig{}, nil, fmt.Errorf("read adapter config: %w", err)
	}
	var c AdapterConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return AdapterConfig{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	lc, err := c.LoRA()
	if err != nil {
		return AdapterConfig{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, lc, nil
}

// SaveAdapters writes the adapter set a as a PEFT adapter folder in dir
// (which must exist), naming basePath as the base model, in dtype.
func SaveAdapters(b Backend, cfg *Config, a *Params, dir, basePath string, dtype DType) error {
	if a.LoRA == nil {
		return fmt.Errorf("save adapters: not an adapter set")
	}
	var ts []NamedTensor
	for _, np := range a.Named(cfg) {
		host := make([]float32, numel(np.Shape))
		b.Download(*np.Ptr, host)
		ts = append(ts, NamedTensor{Name: peftPrefix + np.Name, Shape: np.Shape, Data: host})
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return fmt.Errorf("save adapters: %w", err)
	}
	if err := WriteSafetensors(filepath.Join(dir, AdapterWeightsFile), ts, dtype, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, AdapterConfigFile), adapterConfigOf(a.LoRA, basePath))
}

// LoadAdapters reads the PEFT adapter folder dir into a new adapter set of
// lc, which its adapter_config.json must match; missing, misshapen,
// non-finite and unused tensors are reported together.
func LoadAdapters(b Backend, cfg *Config, lc *LoRAConfig, dir string) (*Params, error) {
	_, got, err := ReadAdapterConfig(dir)
	if err != nil {
		return nil, err
	}
	if got.Rank != lc.Rank || got.Alpha != lc.Alpha || !sameTargets(got.Targets, lc.Targets) {
		return nil, fmt.Errorf("%s: adapters of rank %d, alpha %v on %v, but the run's lora is rank %d, alpha %v on %v",
			filepath.Join(dir, AdapterConfigFile), got.Rank, got.Alpha, got.Targets, lc.Rank, lc.Alpha, lc.Targets)
	}
	path := filepath.Join(dir, AdapterWeightsFile)
	f, err := OpenSafetensors(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := NewAdapters(b, cfg, lc)
	byName := map[string]*SafetensorsFile{}
	for name := range f.Tensors {
		byName[name] = f
	}
	problems, used := readTensors(byName, a.Named(cfg), peftPrefix, "the model and lora config", func(np NamedParam, host []float32) { b.Upload(*np.Ptr, host) })
	problems = append(problems, unusedTensors(byName, used, "")...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("load adapters from %s: %w", path, errors.Join(problems...))
	}
	if err := b.Err(); err != nil {
		b.ResetErr()
		return nil, fmt.Errorf("load adapters from %s: %w", path, err)
	}
	return a, nil
}

func sameTargets(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// IsAdapterFolder reports whether dir holds a PEFT adapter
// (adapter_config.json).
func IsAdapterFolder(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, AdapterConfigFile))
	return err == nil
}

// LoadAdapted loads dir: a Hugging Face model folder, or a PEFT adapter
// folder (a LoRA run's checkpoint, or PEFT's save_pretrained) over its base
// model, base when not empty, else the adapter config's
// base_model_name_or_path.
func LoadAdapted(b Backend, dir, base string) (*Model, error) {
	if !IsAdapterFolder(dir) {
		return Load(b, dir)
	}
	ac, lc, err := ReadAdapterConfig(dir)
	if err != nil {
		return nil, err
	}
	if base == "" {
		base = ac.BaseModel
	}
	if base == "" {
		return nil, fmt.Errorf("%s: no base_model_name_or_path: name the base model folder", filepath.Join(dir, AdapterConfigFile))
	}
	m, err := Load(b, base)
	if err != nil {
		return nil, fmt.Errorf("base model of the adapters in %s: %w", dir, err)
	}
	if m.A, err = LoadAdapters(b, m.Cfg, lc, dir); err != nil {
		return nil, err
	}
	return m, nil
}
