package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// TestAdapterBase: the base of an adapter folder comes from the flag, else
// the manifest, else adapter_config.json; a manifest's weights hash must
// match the base found, and every refusal names what is at fault.
func TestAdapterBase(t *testing.T) {
	root := t.TempDir()
	base, other, adapters := filepath.Join(root, "base"), filepath.Join(root, "other"), filepath.Join(root, "adapters")
	for dir, weights := range map[string]string{base: "base weights", other: "other weights", adapters: ""} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if weights != "" {
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte(weights), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ac := `{"peft_type": "LORA", "base_model_name_or_path": "` + other + `", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj"]}`
	if err := os.WriteFile(filepath.Join(adapters, AdapterConfigFile), []byte(ac), 0o644); err != nil {
		t.Fatal(err)
	}
	hash, err := checkpoint.WeightsHash(base)
	if err != nil {
		t.Fatal(err)
	}
	man := &checkpoint.Manifest{Reference: checkpoint.Identity{Path: base, Weights: hash}}
	for _, c := range []struct {
		name           string
		m              *checkpoint.Manifest
		override, flag string
		want, err      string
	}{
		{"the manifest's base", man, "", "--base", base, ""},
		{"--base, same weights", man, base, "--base", base, ""},
		{"--base, other weights", man, other, "--base", "", "not the same base model"},
		{"no hash recorded", &checkpoint.Manifest{Reference: checkpoint.Identity{Path: base}}, "", "", "", "records no weights_sha256"},
		{"plain PEFT folder", nil, "", "", other, ""},
		{"plain PEFT folder, --base", nil, base, "--base", base, ""},
	} {
		got, err := AdapterBase(adapters, c.m, c.override, c.flag)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %q, %v; want an error with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
