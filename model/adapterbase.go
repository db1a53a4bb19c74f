package model

// LoRA checkpoints outside the trainer: a LoRA run's checkpoint is a PEFT
// adapter folder whose manifest names the base model by path and by the
// SHA-256 of its weights (checkpoint.Identity.Weights). The commands that
// read one (export, generate, logits) load the base from there, or from
// their --base, and refuse a base whose weights are not that very model:
// the adapters are meaningless over any other.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// AdapterBase returns the base model folder of the adapter folder dir with
// manifest m (nil: a plain PEFT folder, no checkpoint): override when not
// empty, else the manifest's reference path, else the adapter config's
// base_model_name_or_path. Where the manifest records the base's weights
// hash, the folder returned has those very weights, or it is an error
// naming both folders and both hashes. flag is the flag override comes
// from ("--base"; "" where the command has none).
func AdapterBase(dir string, m *checkpoint.Manifest, override, flag string) (string, error) {
	base, from := override, flag
	if base == "" && m != nil && m.Reference.Path != "" {
		base, from = m.Reference.Path, "the base recorded in "+filepath.Join(dir, checkpoint.ManifestName)
	}
	if base == "" {
		ac, _, err := ReadAdapterConfig(dir)
		if err != nil {
			return "", err
		}
		base, from = ac.BaseModel, "base_model_name_or_path of "+filepath.Join(dir, AdapterConfigFile)
	}
	if base == "" && flag == "" {
		return "", fmt.Errorf("%s names no base model (its %s has no base_model_name_or_path)", dir, AdapterConfigFile)
	}
	if base == "" {
		return "", fmt.Errorf("%s names no base model: give its folder with %s", dir, flag)
	}
	if m == nil {
		return base, nil
	}
	if m.Reference.Weights == "" {
		return "", fmt.Errorf("checkpoint %s: the manifest records no weights_sha256 of its base model, so the base cannot be checked (written before LoRA checkpoints recorded it?)", dir)
	}
	got, err := checkpoint.WeightsHash(base)
	if err != nil {
		return "", fmt.Errorf("%s (%s): %w", base, from, err)
	}
	if got != m.Reference.Weights {
		return "", fmt.Errorf("checkpoint %s: its adapters were trained over %s (weights sha256 %s), but %s (%s) has weights sha256 %s: not the same base model",
			dir, m.Reference.Path, m.Reference.Weights, base, from, got)
	}
	return base, nil
}

// LoadAdapterFolder loads the adapter folder dir over its base on b: a
// checkpoint (manifest.json beside it) is verified and its base checked
// against the manifest's weights hash (AdapterBase); a plain PEFT folder
// takes base_model_name_or_path.
func LoadAdapterFolder(b Backend, dir string) (*Model, error) {
	m, err := checkpoint.VerifyIfCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	base, err := AdapterBase(dir, m, "", "")
	if err != nil {
		return nil, err
	}
	return LoadAdapted(b, dir, base)
}

// VerifyModelFolder verifies a model folder that is a checkpoint before a
// command reads any of its files (its tokenizer, config.json, weights); an
// adapter folder is checked against its base when loaded.
func VerifyModelFolder(dir string) error {
	if IsAdapterFolder(dir) {
		return nil
	}
	_, err := checkpoint.VerifyIfCheckpoint(dir)
	return err
}

// FolderConfig reads the config.json of a model folder, or of an adapter
// folder's base (the base its manifest records, else adapter_config.json's),
// before anything large is loaded.
func FolderConfig(dir string) (*Config, error) {
	if !IsAdapterFolder(dir) {
		return LoadConfig(dir)
	}
	var m *checkpoint.Manifest
	if raw, err := os.ReadFile(filepath.Join(dir, checkpoint.ManifestName)); err == nil {
		m = &checkpoint.Manifest{} // verified when the model loads
		if json.Unmarshal(raw, m) != nil {
			m = nil
		}
	}
	base, err := AdapterBase(dir, m, "", "")
	if err != nil {
		return nil, err
	}
	return LoadConfig(base)
}
