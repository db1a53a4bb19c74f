package main

// LoRA checkpoints outside the trainer: a LoRA run's checkpoint is a PEFT
// adapter folder whose manifest names the base model by path and by the
// SHA-256 of its weights (checkpoint.Identity.Weights). The commands that
// read one (export, generate, logits) load the base from there, or from
// --base, and refuse a base whose weights are not that very model: the
// adapters are meaningless over any other.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/model"
)

// adapterBase returns the base model folder of the adapter folder dir with
// manifest m (nil: a plain PEFT folder, no checkpoint): override when not
// empty, else the manifest's reference path, else the adapter config's
// base_model_name_or_path. Where the manifest records the base's weights
// hash, the folder returned has those very weights, or it is an error
// naming both folders and both hashes. flag is the flag override comes
// from ("--base"; "" where the command has none).
func adapterBase(dir string, m *checkpoint.Manifest, override, flag string) (string, error) {
	base, from := override, flag
	if base == "" && m != nil && m.Reference.Path != "" {
		base, from = m.Reference.Path, "the base recorded in "+filepath.Join(dir, checkpoint.ManifestName)
	}
	if base == "" {
		ac, _, err := model.ReadAdapterConfig(dir)
		if err != nil {
			return "", err
		}
		base, from = ac.BaseModel, "base_model_name_or_path of "+filepath.Join(dir, model.AdapterConfigFile)
	}
	if base == "" && flag == "" {
		return "", fmt.Errorf("%s names no base model (its %s has no base_model_name_or_path)", dir, model.AdapterConfigFile)
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

// loadAdapterFolder loads the adapter folder dir over its base on b: a
// checkpoint (manifest.json beside it) is verified and its base checked
// against the manifest's weights hash (adapterBase); a plain PEFT folder
// takes base_model_name_or_path.
func loadAdapterFolder(b model.Backend, dir string) (*model.Model, error) {
	m, err := verifyIfCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	base, err := adapterBase(dir, m, "", "")
	if err != nil {
		return nil, err
	}
	return model.LoadAdapted(b, dir, base)
}

// verifyModelFolder verifies a model folder that is a checkpoint before a
// command reads any of its files (its tokenizer, config.json, weights); an
// adapter folder is checked against its base when loaded.
func verifyModelFolder(dir string) error {
	if model.IsAdapterFolder(dir) {
		return nil
	}
	_, err := verifyIfCheckpoint(dir)
	return err
}

// verifyIfCheckpoint verifies dir as export does (checkpoint.Verify: the
// manifest's own checksum, every file's size and SHA-256) when it is a
// checkpoint (manifest.json beside its files), and returns its manifest;
// nil for a plain model folder. generate and logits used to load a
// checkpoint export refuses as corrupt.
func verifyIfCheckpoint(dir string) (*checkpoint.Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, checkpoint.ManifestName)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return checkpoint.Verify(dir)
}
