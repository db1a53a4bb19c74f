package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdapterFolder: SaveAdapters then LoadAdapters gives the same values;
// a run's lora config that differs from the folder's, PEFT settings we do
// not compute, and a tensor too many or too few are refused by name.
func TestAdapterFolder(t *testing.T) {
	cfg, err := DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewTestBackend()
	lc := &LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "down"}}
	m := &Model{Cfg: cfg, B: b, P: NewParams(b, cfg)}
	randomAdapters(t, m, lc, 1)
	dir := t.TempDir()
	if err := SaveAdapters(b, cfg, m.A, dir, "/models/base", F32); err != nil {
		t.Fatal(err)
	}
	a, err := LoadAdapters(b, cfg, lc, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, np := range a.Named(cfg) {
		want := oracleDownload(b, *m.A.Named(cfg)[i].Ptr)
		for k, v := range oracleDownload(b, *np.Ptr) {
			if v != want[k] {
				t.Fatalf("%s[%d]: %v after the round trip, %v before", np.Name, k, v, want[k])
			}
		}
	}
	ac, got, err := ReadAdapterConfig(dir)
	if err != nil || ac.BaseModel != "/models/base" || got.Rank != 2 || strings.Join(ac.TargetModules, ",") != "q_proj,v_proj,down_proj" {
		t.Fatalf("adapter config %+v, %+v, %v", ac, got, err)
	}
	if _, err := LoadAdapters(b, cfg, &LoRAConfig{Rank: 2, Alpha: 8, Targets: lc.Targets}, dir); err == nil || !strings.Contains(err.Error(), "alpha 4") {
		t.Errorf("another alpha: %v", err)
	}
	edit := func(key string, v any) string {
		d := t.TempDir()
		raw, _ := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
		var m map[string]any
		json.Unmarshal(raw, &m)
		m[key] = v
		raw, _ = json.Marshal(m)
		os.WriteFile(filepath.Join(d, AdapterConfigFile), raw, 0o644)
		w, _ := os.ReadFile(filepath.Join(dir, AdapterWeightsFile))
		os.WriteFile(filepath.Join(d, AdapterWeightsFile), w, 0o644)
		return d
	}
	for key, c := range map[string]struct {
		v    any
		want string
	}{
		"use_rslora":     {true, "use_rslora"},
		"use_dora":       {true, "use_dora"},
		"target_modules": {[]string{"q_proj", "lm_head"}, `target module "lm_head"`},
		"r":              {0, "lora.rank = 0"},
	} {
		if _, err := LoadAdapters(b, cfg, lc, edit(key, c.v)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: %v, want an error naming %q", key, c.v, err, c.want)
		}
	}
	// Two targets fewer in the run's view of the tensors: every unused
	// tensor is named; one more target: every missing one.
	if _, err := LoadAdapters(b, cfg, &LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q", "v", "down", "o"}}, edit("target_modules", []string{"q_proj", "v_proj", "down_proj", "o_proj"})); err == nil ||
		!strings.Contains(err.Error(), `missing tensor "base_model.model.model.layers.0.self_attn.o_proj.lora_A.weight"`) {
		t.Errorf("a target without tensors: %v", err)
	}
	if _, err := LoadAdapters(b, cfg, &LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q"}}, edit("target_modules", []string{"q_proj"})); err == nil ||
		!strings.Contains(err.Error(), `unused tensor "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"`) {
		t.Errorf("tensors of no target: %v", err)
	}
}
