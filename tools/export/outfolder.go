package export

// outfolder.go: the model folders export and init-tiny write. A folder
// written over in place could destroy what the user meant to keep (export
// --out the checkpoint itself wrote bf16 files over it, so --resume auto
// skipped it as damaged; --out the base model overwrote the base), and an
// unsharded export over a sharded one left the old shards and index, which
// every loader reads first. So:
//   - an --out that is, or is inside, a checkpoint (manifest.json), a run
//     folder (run.lock, or config.yaml beside metrics.jsonl or
//     checkpoints/; not train.log, which users write beside their own
//     configs) or a folder holding weights is refused unless --force;
//   - the files are written into a temporary sibling folder, then moved into
//     place: a new or empty --out is that folder renamed; an existing one
//     first loses the weights (and manifest) the new files do not replace,
//     so it holds exactly one model.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// outFolder is a model folder being written: Dir until Commit.
type outFolder struct {
	final, tmp string
}

// openOut checks out (the value of flag) and begins its temporary sibling.
func openOut(out, flag string, force bool) (*outFolder, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%s %s is a file, want a folder", flag, out)
	}
	if !force {
		if err := guardOut(abs, flag); err != nil {
			return nil, err
		}
	}
	parent := filepath.Dir(abs)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	tmp := filepath.Join(parent, "."+filepath.Base(abs)+".partial")
	if err := os.RemoveAll(tmp); err != nil { // an interrupted write's
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return &outFolder{final: abs, tmp: tmp}, nil
}

// guardOut refuses a folder that is, or is inside, one worth keeping.
func guardOut(abs, flag string) error {
	for d := abs; ; d = filepath.Dir(d) {
		if what := keptFolder(d); what != "" {
			where := "is " + what
			if d != abs {
				where = "is inside " + what
			}
			return fmt.Errorf("%s %s %s: writing there would overwrite or mix with it. HINT: choose a new folder, or pass --force to replace the model files there", flag, abs, where)
		}
		if filepath.Dir(d) == d {
			return nil
		}
	}
}

// keptFolder describes dir when it is a checkpoint, a run folder or holds
// weights ("" otherwise, or when it does not exist).
func keptFolder(dir string) string {
	has := func(name string) bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	switch {
	case has("manifest.json"):
		return "the checkpoint " + dir
	case has("run.lock") || (has("config.yaml") && (has("metrics.jsonl") || has("checkpoints"))):
		return "the run folder " + dir
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() && isWeightFile(e.Name()) {
			return fmt.Sprintf("a model folder (%s holds %s)", dir, e.Name())
		}
	}
	return ""
}

// isWeightFile: the files of a model folder that say which weights it
// holds (the safetensors and their index, PyTorch's, a PEFT adapter's, a
// checkpoint's manifest).
func isWeightFile(name string) bool {
	return strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".safetensors.index.json") ||
		strings.HasSuffix(name, ".bin.index.json") || (strings.HasSuffix(name, ".bin") && (strings.HasPrefix(name, "pytorch_model") || strings.HasPrefix(name, "adapter_model"))) ||
		name == "adapter_config.json" || name == "manifest.json"
}

// Dir is where the files go until Commit.
func (o *outFolder) Dir() string { return o.tmp }

// Abort removes the temporary folder.
func (o *outFolder) Abort() { os.RemoveAll(o.tmp) }

// Commit moves the files into place (see the file's comment) and returns
// the weight files of an earlier model it removed.
func (o *outFolder) Commit() ([]string, error) {
	old, err := os.ReadDir(o.final)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(old) == 0) {
		os.Remove(o.final) // empty
		if err := os.Rename(o.tmp, o.final); err != nil {
			return nil, fmt.Errorf("move %s into place: %w", o.final, err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fresh, err := os.ReadDir(o.tmp)
	if err != nil {
		return nil, err
	}
	written := map[string]bool{}
	for _, e := range fresh {
		written[e.Name()] = true
	}
	// The stale weights first: a kill after this leaves a folder with no
	// model (an error at load), never one that loads the old model.
	var removed []string
	for _, e := range old {
		if !e.IsDir() && isWeightFile(e.Name()) && !written[e.Name()] {
			if err := os.Remove(filepath.Join(o.final, e.Name())); err != nil {
				return removed, fmt.Errorf("remove the stale %s: %w", filepath.Join(o.final, e.Name()), err)
			}
			removed = append(removed, e.Name())
		}
	}
	for _, e := range fresh {
		if err := os.Rename(filepath.Join(o.tmp, e.Name()), filepath.Join(o.final, e.Name())); err != nil {
			return removed, fmt.Errorf("move %s into place: %w", e.Name(), err)
		}
	}
	return removed, os.Remove(o.tmp)
}

// WriteFolder writes a model folder at out (the value of --out) through
// write, into a temporary sibling moved into place, refusing a folder worth
// keeping unless force (--force; see the file's comment), and says on
// stderr which stale weight files of an earlier model it removed.
func WriteFolder(out string, force bool, stderr io.Writer, write func(dir string) error) error {
	o, err := openOut(out, "--out", force)
	if err != nil {
		return err
	}
	if err := write(o.Dir()); err != nil {
		o.Abort()
		return err
	}
	removed, err := o.Commit()
	if len(removed) > 0 {
		fmt.Fprintf(stderr, "--force: removed the earlier model's %s from %s\n", strings.Join(removed, ", "), out)
	}
	return err
}
