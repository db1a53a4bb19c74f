package trainer

// The run folder's life: what a start may do to it. A run is never lost or
// silently mixed with another:
//   - a new run (no --resume) refuses a folder that already holds a run
//     (checkpoints or metrics lines) unless --overwrite clears the earlier
//     run's files first;
//   - --resume auto continues from the newest checkpoint that verifies,
//     starts afresh only when the folder has no checkpoint at all, and
//     refuses when every checkpoint is damaged (nothing is deleted);
//   - --resume DIR refuses when the run folder holds verified checkpoints
//     newer than DIR (another timeline a later --resume auto would pick up),
//     or, for a DIR outside the run folder, any earlier run;
//   - a resumed run refuses a config whose trajectory keys differ from the
//     checkpoint's (seed, lr, method, data, …), naming them, unless
//     --allow-config-change;
//   - a folder another live process writes is refused, whatever the options
//     (its lock, lock.go).
// Every input path is checked, naming its config key, before anything is
// written or loaded.

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gdrotrain/gdrotrain/reward"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gdrotrain/gdrotrain/checkpoint"
)

// Options say how a run starts.
type Options struct {
	// Resume is "" (a new run), "auto" (the newest verified checkpoint of
	// the run folder; a new run when it has none) or a checkpoint folder.
	Resume string
	// Overwrite clears an earlier run's files from the run folder before a
	// new run starts (or before resuming from a checkpoint elsewhere).
	Overwrite bool
	// AllowConfigChange resumes even when keys that change the training
	// trajectory differ from the checkpoint's config.
	AllowConfigChange bool
	// RepairMetrics resumes past damaged per-step logs: the valid lines of
	// metrics.jsonl and validation.jsonl are kept, the others dropped, and
	// the steps left without a line logged (without it such a resume is
	// refused, naming the file and line).
	RepairMetrics bool
	// Backend opens run.device (nil: CPUOnly). The binary passes
	// backend.Open, which links the CUDA backend.
	Backend BackendOpener
	// Dist places the run in a data-parallel job (nil: one process). Only
	// rank 0 checks and writes the run folder.
	Dist *Dist
	// Scorer, when set, scores every response in place of the verifier
	// reward.mode selects (a program embedding the trainer with a reward
	// of its own; tests that need non-zero advantages on a random model).
	// Its calls are counted like the verifier's.
	Scorer reward.Scorer
}

// RunDir is the run folder, run.out_dir/run.name.
func (c Config) RunDir() string { return filepath.Join(c.Run.OutDir, c.Run.Name) }

// runFiles are the files and folders a run writes in its folder; --overwrite
// removes these and nothing else.
var runFiles = []string{"config.yaml", "metrics.jsonl", "validation.jsonl", "train.log", "checkpoints", "plots", "tb"}

// Preflight checks, without writing or loading anything, that a run can
// start: every input path exists (naming its config key) and the run folder
// may be used as o says. New runs it first; the CLI runs it before the GPU
// self-test too, so a mistake costs no time.
func Preflight(cfg Config, o Options) error {
	if err := CheckInputs(cfg); err != nil {
		return err
	}
	if d := o.Dist; d != nil && d.Group != nil && d.Group.Rank() != 0 {
		return nil // rank 0 decides about the run folder (shareResume)
	}
	dir := cfg.RunDir()
	if err := probeLock(dir); err != nil {
		return err // another process runs there; not even --overwrite may touch it
	}
	root := filepath.Join(dir, "checkpoints")
	switch {
	case o.Overwrite && o.Resume == "auto":
		return errors.New("--overwrite starts the run afresh; it cannot be combined with --resume auto")
	case o.Overwrite && o.Resume != "" && within(o.Resume, root):
		return fmt.Errorf("--overwrite would delete %s, the checkpoint --resume names (copy it elsewhere first)", o.Resume)
	case o.Overwrite:
		return nil
	}
	prior := priorRun(dir)
	switch {
	case prior == "":
		return nil
	case o.Resume == "":
		return fmt.Errorf("run folder %s already holds a run (%s): continue it with --resume auto, or start over with --overwrite (deletes its checkpoints, logs, metrics and plots), or set run.name", dir, prior)
	case o.Resume != "auto" && !within(o.Resume, root):
		return fmt.Errorf("run folder %s already holds a run (%s) and --resume %s is not one of its checkpoints: resuming there would mix two runs; set another run.name, or pass --overwrite to clear it", dir, prior, o.Resume)
	}
	return nil
}

// CheckInputs checks that every file and folder the config names exists,
// naming the config key (relative paths are taken from the current folder).
func CheckInputs(cfg Config) error {
	var errs []error
	var relative, shipped bool // a missing path was relative; one named the shipped benchmarks/
	missing := func(key, path string, err error) {
		if !filepath.IsAbs(path) {
			relative = true
			shipped = shipped || strings.HasPrefix(filepath.ToSlash(path), "benchmarks/")
		}
		if errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %s does not exist", key, path))
			return
		}
		errs = append(errs, fmt.Errorf("%s: %s: %w", key, path, err))
	}
	folder := func(key, path, want string) {
		if path == "" {
			return // requireInputs names it
		}
		if st, err := os.Stat(path); err != nil {
			missing(key, path, err)
			return
		} else if !st.IsDir() {
			errs = append(errs, fmt.Errorf("%s: %s is a file, want a folder", key, path))
			return
		}
		if _, err := os.Stat(filepath.Join(path, want)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s has no %s", key, path, want))
		}
	}
	folder("model.path", cfg.Model.Path, "config.json")
	if cfg.Model.Tokenizer != "" {
		folder("model.tokenizer", cfg.Model.Tokenizer, "tokenizer.json")
	} else if st, err := os.Stat(cfg.Model.Path); cfg.Model.Path != "" && err == nil && st.IsDir() {
		if _, err := os.Stat(filepath.Join(cfg.Model.Path, "tokenizer.json")); errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("model.path: %s has no tokenizer.json (set model.tokenizer to the folder that has it)", cfg.Model.Path))
		}
	}
	files := func(key string, paths []string) {
		for i, p := range paths {
			k := fmt.Sprintf("%s[%d]", key, i)
			st, err := os.Stat(p)
			switch {
			case err != nil:
				missing(k, p, err)
			case st.IsDir():
				errs = append(errs, fmt.Errorf("%s: %s is a folder, want a .parquet or .jsonl file", k, p))
			}
		}
	}
	files("data.train", cfg.Data.Train)
	files("validation.files", cfg.Validation.Files)
	if relative {
		cwd, _ := os.Getwd()
		hint := fmt.Sprintf("(relative paths are taken from the current folder, %s", cwd)
		if shipped {
			hint += "; the shipped configs name the benchmarks/ folder of the gdrotrain repository: run from its root, or set validation.files"
		}
		errs = append(errs, errors.New(hint+")"))
	}
	return errors.Join(errs...)
}

// within reports whether path lies inside folder.
func within(path, folder string) bool {
	p, err1 := filepath.Abs(path)
	f, err2 := filepath.Abs(folder)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(f, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && rel != "."
}

// priorRun describes the earlier run in dir ("" when there is none):
// checkpoint folders (even damaged ones) or non-empty per-step logs.
func priorRun(dir string) string {
	var parts []string
	if dirs, _ := checkpoint.List(filepath.Join(dir, "checkpoints")); len(dirs) > 0 {
		newest, _ := checkpoint.StepOfName(filepath.Base(dirs[0]))
		parts = append(parts, fmt.Sprintf("%d checkpoint folders, the newest for step %d", len(dirs), newest))
	}
	for _, f := range []string{"metrics.jsonl", "validation.jsonl"} {
		if raw, err := os.ReadFile(filepath.Join(dir, f)); err == nil && len(strings.TrimSpace(string(raw))) > 0 {
			parts = append(parts, fmt.Sprintf("%d lines in %s", strings.Count(strings.TrimSpace(string(raw)), "\n")+1, f))
		}
	}
	return strings.Join(parts, ", ")
}

// clearRun removes an earlier run's files from dir and returns what it
// removed. Anything else in the folder is left alone.
func clearRun(dir string) ([]string, error) {
	var removed []string
	for _, f := range runFiles {
		p := filepath.Join(dir, f)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("--overwrite: %w", err)
		}
		removed = append(removed, f)
	}
	return removed, nil
}

// findResume resolves Options.Resume to a verified checkpoint ("" for a new
// run) and checks that continuing from it mixes nothing.
func (t *Trainer) findResume(o Options) (string, *checkpoint.Manifest, error) {
	root := t.checkpointRoot()
	var dir string
	var m *checkpoint.Manifest
	switch o.Resume {
	case "":
		return "", nil, nil
	case "auto":
		var skipped []error
		dir, m, skipped = checkpoint.Latest(root)
		for _, err := range skipped {
			t.Log.Printf("resume: skipping a damaged checkpoint: %v", err)
		}
		if dir == "" && len(skipped) > 0 {
			return "", nil, fmt.Errorf("--resume auto: none of the %d checkpoints in %s verifies (each is named above); nothing was resumed or deleted. "+
				"HINT: resume from a good copy with --resume DIR, or start over with --overwrite", len(skipped), root)
		}
		if dir == "" {
			t.Log.Printf("resume auto: no checkpoint in %s, starting from step 0", root)
			return "", nil, nil
		}
	default:
		var err error
		if m, err = checkpoint.Verify(o.Resume); err != nil {
			return "", nil, fmt.Errorf("--resume: %w", err)
		}
		dir = o.Resume
		// Verified checkpoints newer than dir in this run folder are another
		// timeline: the next --resume auto would continue it.
		dirs, _ := checkpoint.List(root)
		var newer []string
		for _, d := range dirs {
			step, _ := checkpoint.StepOfName(filepath.Base(d))
			if step <= m.Step || sameDir(d, dir) {
				continue
			}
			if _, err := checkpoint.Verify(d); err == nil {
				newer = append(newer, filepath.Base(d))
			}
		}
		if len(newer) > 0 {
			return "", nil, fmt.Errorf("--resume %s: %s holds newer checkpoints (%s) of the same run; a later --resume auto would continue those, mixing two runs. "+
				"HINT: continue the newest with --resume auto, or move the newer ones out of %s to branch from step %d", dir, root, strings.Join(newer, ", "), root, m.Step)
		}
	}
	for _, n := range m.Notes {
		t.Log.Printf("resume: %s", n)
	}
	if err := t.checkResumeConfig(dir, m, o.AllowConfigChange); err != nil {
		return "", nil, err
	}
	return dir, m, nil
}

func sameDir(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}

// freeKeys are config keys a resumed run may change: they do not alter the
// training trajectory (where the run writes, on which device it runs, how
// long it goes on, what it logs and tracks, validates and keeps). model.path is
// checked by content (the reference model's hash), not by path.
var freeKeys = []string{"run.name", "run.out_dir", "run.device", "model.path", "train.steps", "train.log_every", "validation.", "checkpoint.", "dist.", "log."}

func freeKey(k string) bool {
	for _, f := range freeKeys {
		if k == f || (strings.HasSuffix(f, ".") && strings.HasPrefix(k, f)) {
			return true
		}
	}
	return false
}

// readRecorded reads the config a checkpoint recorded (JSON) over
// Default(). Unknown keys are ignored (a key an older build had and this
// one dropped), except the old keys (oldkeys.go): their values would be
// lost, so the error names what replaced them.
func readRecorded(raw json.RawMessage) (Config, error) {
	cfg := Default()
	if err := oldKeyError(raw); err != nil {
		return cfg, fmt.Errorf("%w; the checkpoint was written by a gdrotrain from before that change: resume it with that build", err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, err
	}
	return cfg.Resolved(), nil
}

// checkResumeConfig compares the checkpoint's config and reference model
// with this run's.
func (t *Trainer) checkResumeConfig(dir string, m *checkpoint.Manifest, allow bool) error {
	if m.Reference.Weights != "" && t.refID.Weights != "" && m.Reference.Weights != t.refID.Weights {
		return fmt.Errorf("resume %s: the base model's weights changed: the checkpoint's adapters were trained on %s (weights sha256 %.12s…), model.path %s has %.12s…",
			dir, m.Reference.Path, m.Reference.Weights, t.refID.Path, t.refID.Weights)
	}
	if m.Reference.Hash != t.refID.Hash {
		return fmt.Errorf("resume %s: the reference model changed: the checkpoint was made from %s (hash %.12s…), model.path %s has hash %.12s…",
			dir, m.Reference.Path, m.Reference.Hash, t.refID.Path, t.refID.Hash)
	}
	// Keys missing from an older checkpoint's config take today's defaults
	// (logged): decode over Default(), as a config file is.
	old, err := readRecorded(m.Config)
	if err != nil {
		return fmt.Errorf("resume %s: the checkpoint's config: %w", dir, err)
	}
	oldKeys, err := flatKeys(m.Config)
	if err != nil {
		return fmt.Errorf("resume %s: the checkpoint's config: %w", dir, err)
	}
	a, err := flatConfig(old)
	if err != nil {
		return err
	}
	b, err := flatConfig(t.Cfg)
	if err != nil {
		return err
	}
	defaults, err := flatConfig(Default())
	if err != nil {
		return err
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var changed, defaulted []string
	for k := range keys {
		if _, known := defaults[k]; known && oldKeys[k] == "" {
			defaulted = append(defaulted, fmt.Sprintf("%s = %s", k, a[k]))
		}
		if a[k] != b[k] && !freeKey(k) {
			changed = append(changed, fmt.Sprintf("%s %s → %s", k, orNone(a[k]), orNone(b[k])))
		}
	}
	sort.Strings(changed)
	sort.Strings(defaulted)
	if len(defaulted) > 0 {
		t.Log.Printf("resume: the checkpoint's config predates %d keys; taking their defaults: %s", len(defaulted), strings.Join(defaulted, ", "))
	}
	if len(changed) == 0 {
		return nil
	}
	if !allow {
		return fmt.Errorf("resume %s: the config changes %d keys that alter the training trajectory: %s. "+
			"HINT: resume with the run's own settings (its config.yaml), or pass --allow-config-change to continue with the new values", dir, len(changed), strings.Join(changed, "; "))
	}
	t.Log.Printf("resume: --allow-config-change: continuing with changed keys: %s", strings.Join(changed, "; "))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// flatConfig renders a config as dotted JSON keys → JSON values (lists and
// maps whole).
func flatConfig(c Config) (map[string]string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	out := map[string]string{}
	flatten(obj, "", out)
	return out, nil
}

// flatKeys lists the dotted keys present in a JSON config.
func flatKeys(raw json.RawMessage) (map[string]string, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	out := map[string]string{}
	flatten(obj, "", out)
	return out, nil
}

// flatten writes obj's leaves under dotted keys. null and empty lists are
// left out, so an unset list and an empty one compare equal.
func flatten(obj map[string]any, prefix string, out map[string]string) {
	for k, v := range obj {
		key := prefix + k
		switch x := v.(type) {
		case map[string]any:
			flatten(x, key+".", out)
			continue
		case nil:
			continue
		case []any:
			if len(x) == 0 {
				continue
			}
		}
		b, _ := json.Marshal(v)
		out[key] = string(b)
	}
}
