// Package checkpoint writes and reads training checkpoints that lose
// nothing: a checkpoint is a folder holding a self-describing manifest.json
// (format version, step, the resolved config, the reference model's
// identity, the trainer's JSON state — optimizer step, controller and
// classifier state, data cursor, counters — and the SHA-256 and size of every
// other file) beside the files themselves (the policy as a Hugging Face
// folder in float32, the AdamW moments as safetensors).
//
// Writing: every file goes into a hidden temporary folder, is synced, the
// manifest is written last, the folder is synced and renamed into place and
// the parent synced. A reader therefore sees either no checkpoint or a
// complete one; a crash mid-write leaves only a temporary folder, which the
// next save removes. Pruning keeps the newest Keep complete checkpoints plus
// those marked permanent, and never runs before the new one is in place; it
// renames a checkpoint out of the step_ names before deleting it, so a kill
// midway leaves a .trash- folder (removed by the next save or start), never
// a half-deleted checkpoint.
//
// Reading: Verify checks the format version, the manifest's own checksum
// (so a hand-edited or bit-flipped manifest is refused, not trusted because
// it is valid JSON), that the step matches the folder's name, and that every
// listed file exists with its size and checksum; Latest returns the newest
// checkpoint that verifies and reports (never silently skips) every newer
// one that did not. A manifest written before manifests carried a checksum
// is still read: Verify says so in Manifest.Notes, which the caller logs.
package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FormatVersion is the manifest layout this build writes and reads.
const FormatVersion = 1

// ManifestName is the manifest's file name inside a checkpoint folder.
const ManifestName = "manifest.json"

// File is one file of a checkpoint with its checksum.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest describes a checkpoint.
type Manifest struct {
	Format    int             `json:"format"`
	Step      int             `json:"step"`
	Created   string          `json:"created"`
	Permanent bool            `json:"permanent,omitempty"`
	Reference Identity        `json:"reference"`
	Config    json.RawMessage `json:"config"` // the resolved run config
	State     json.RawMessage `json:"state"`  // the trainer's state
	Files     []File          `json:"files"`
	// Checksum is the SHA-256 of the manifest itself, without this key, in
	// canonical form (see manifestSum). Manifests written before it existed
	// have none; Verify reads them with a note.
	Checksum string `json:"manifest_sha256,omitempty"`
	// Notes are what Verify had to accept on trust (an old manifest without
	// a checksum); the caller logs them. Not stored.
	Notes []string `json:"-"`
}

// checksumKey is Manifest.Checksum's JSON key.
const checksumKey = "manifest_sha256"

// manifestSum hashes a manifest's JSON without its checksum key, in a
// canonical form: decoded generically (numbers kept as written) and
// re-encoded compact with every object's keys sorted. So keys this build
// does not know (a later build's additions) are covered too, and key order
// or indentation in the file does not matter; any changed value does.
func manifestSum(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return "", err
	}
	delete(obj, checksumKey)
	canon, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Identity names a model by path and content hash without copying it.
type Identity struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
	// Weights is the SHA-256 of every safetensors file's whole content
	// (WeightsHash), set for LoRA runs, whose checkpoints hold only
	// adapters: they must resume and export over the very same base.
	Weights string `json:"weights_sha256,omitempty"`
}

// Writer fills a temporary checkpoint folder.
type Writer struct {
	dir, tmp string
	step     int
}

// Begin starts checkpoint step under root (e.g. RUN/checkpoints); leftovers
// of interrupted saves are removed first.
func Begin(root string, step int) (*Writer, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	stale, _ := filepath.Glob(filepath.Join(root, ".tmp-*"))
	for _, s := range stale {
		os.RemoveAll(s)
	}
	RemoveTrash(root)
	w := &Writer{dir: filepath.Join(root, Name(step)), step: step}
	w.tmp = filepath.Join(root, ".tmp-"+Name(step))
	if err := os.MkdirAll(w.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return w, nil
}

// Join returns a Writer for the temporary folder another process of a
// data-parallel run began with Begin, so that each rank writes its own
// files (its optimizer shard) before the first rank commits; only the
// committing rank may Commit or Abort. It removes nothing, and fails when
// that folder does not exist (Begin has not run, or the step was aborted).
func Join(root string, step int) (*Writer, error) {
	w := &Writer{dir: filepath.Join(root, Name(step)), tmp: filepath.Join(root, ".tmp-"+Name(step)), step: step}
	if st, err := os.Stat(w.tmp); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("checkpoint: join step %d: no folder %s begun by rank 0", step, w.tmp)
	}
	return w, nil
}

// Name is the folder name of step's checkpoint.
func Name(step int) string { return fmt.Sprintf("step_%08d", step) }

// Dir is where the files go until Commit.
func (w *Writer) Dir() string { return w.tmp }

// Abort removes the temporary folder.
func (w *Writer) Abort() { os.RemoveAll(w.tmp) }

// Commit checksums every file in the temporary folder, writes the manifest,
// syncs and renames the folder into place.
func (w *Writer) Commit(m Manifest) (string, error) {
	entries, err := os.ReadDir(w.tmp)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	m.Format, m.Step, m.Files, m.Checksum = FormatVersion, w.step, nil, ""
	if m.Created == "" {
		m.Created = time.Now().UTC().Format(time.RFC3339)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == ManifestName {
			continue
		}
		f, err := hashFile(filepath.Join(w.tmp, e.Name()), true)
		if err != nil {
			return "", err
		}
		m.Files = append(m.Files, f)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("checkpoint manifest: %w", err)
	}
	if m.Checksum, err = manifestSum(raw); err != nil {
		return "", fmt.Errorf("checkpoint manifest: %w", err)
	}
	if raw, err = json.MarshalIndent(m, "", "  "); err != nil {
		return "", fmt.Errorf("checkpoint manifest: %w", err)
	}
	if err := writeSynced(filepath.Join(w.tmp, ManifestName), raw); err != nil {
		return "", err
	}
	if err := syncDir(w.tmp); err != nil {
		return "", err
	}
	os.RemoveAll(w.dir) // an older, identical-step checkpoint (a re-run of this step)
	if err := os.Rename(w.tmp, w.dir); err != nil {
		return "", fmt.Errorf("checkpoint: rename into place: %w", err)
	}
	if err := syncDir(filepath.Dir(w.dir)); err != nil {
		return "", err
	}
	return w.dir, nil
}

// hashFile returns a file's size and SHA-256 (fsyncing it first if asked).
func hashFile(path string, sync bool) (File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if !sync {
		f, err = os.Open(path)
	}
	if err != nil {
		return File{}, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	if sync {
		if err := f.Sync(); err != nil {
			return File{}, fmt.Errorf("checkpoint: sync %s: %w", path, err)
		}
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return File{}, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	return File{Name: filepath.Base(path), Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("checkpoint: sync %s: %w", path, err)
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	return nil
}

// Verify reads dir's manifest and checks its version, its own checksum, that
// its step matches the folder's name (step_NNNNNNNN; other names are not
// checked), and every file's size and checksum.
func Verify(dir string) (*Manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: missing or unreadable manifest: %w", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("checkpoint %s: corrupt manifest: %w", dir, err)
	}
	if m.Format != FormatVersion {
		return nil, fmt.Errorf("checkpoint %s: format version %d, this build reads version %d (HINT: resume with the gdrotrain release that wrote it)", dir, m.Format, FormatVersion)
	}
	if m.Checksum == "" {
		m.Notes = append(m.Notes, fmt.Sprintf("checkpoint %s: the manifest has no checksum of its own (written by an older gdrotrain); its files are verified, its fields are taken on trust", dir))
	} else if sum, err := manifestSum(raw); err != nil || sum != m.Checksum {
		return nil, fmt.Errorf("checkpoint %s: %s fails its own checksum (edited by hand or corrupted; HINT: never edit a manifest — resume from another checkpoint with --resume DIR)", dir, ManifestName)
	}
	if step, ok := StepOfName(filepath.Base(dir)); ok && step != m.Step {
		return nil, fmt.Errorf("checkpoint %s: the manifest says step %d but the folder is named for step %d (renamed or copied over?)", dir, m.Step, step)
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("checkpoint %s: manifest lists no files", dir)
	}
	for _, f := range m.Files {
		got, err := hashFile(filepath.Join(dir, f.Name), false)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: file %s: %w", dir, f.Name, err)
		}
		if got.Size != f.Size {
			return nil, fmt.Errorf("checkpoint %s: file %s has %d bytes, the manifest says %d (truncated?)", dir, f.Name, got.Size, f.Size)
		}
		if got.SHA256 != f.SHA256 {
			return nil, fmt.Errorf("checkpoint %s: file %s fails its checksum (corrupted)", dir, f.Name)
		}
	}
	return &m, nil
}

// List returns root's checkpoint folders, newest step first.
func List(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	type item struct {
		step int
		path string
	}
	var items []item
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "step_") {
			continue
		}
		step, ok := StepOfName(e.Name())
		if !ok {
			continue
		}
		items = append(items, item{step, filepath.Join(root, e.Name())})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].step > items[j].step })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.path
	}
	return out, nil
}

// StepOfName parses a checkpoint folder name, step_NNNNNNNN.
func StepOfName(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "step_")
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	step, err := strconv.Atoi(digits)
	return step, err == nil
}

// Latest returns the newest checkpoint under root that verifies, and the
// problems of every newer one it had to pass over. It returns "" when none
// verifies.
func Latest(root string) (string, *Manifest, []error) {
	dirs, err := List(root)
	if err != nil {
		return "", nil, []error{err}
	}
	var skipped []error
	for _, d := range dirs {
		m, err := Verify(d)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		return d, m, skipped
	}
	return "", nil, skipped
}

// removeAll is os.RemoveAll; a test replaces it to kill a prune midway.
var removeAll = os.RemoveAll

// Prune removes all but the newest keep verified checkpoints under root,
// sparing permanent ones and never touching the newest. keep ≤ 0 keeps all.
func Prune(root string, keep int) error {
	if keep <= 0 {
		return nil
	}
	dirs, err := List(root)
	if err != nil {
		return err
	}
	kept := 0
	for _, d := range dirs {
		m, err := Verify(d)
		if err != nil {
			continue // a damaged checkpoint is reported by Latest, not deleted here
		}
		if kept < keep {
			kept++
			continue
		}
		if m.Permanent {
			continue
		}
		// Out of the step_ names first, in one rename, then deleted: a
		// kill midway leaves a trash folder (removed by the next save or
		// start), never a half-deleted checkpoint.
		trash := filepath.Join(root, trashPrefix+filepath.Base(d))
		if err := os.Rename(d, trash); err != nil {
			return fmt.Errorf("checkpoint: prune %s: %w", d, err)
		}
		if err := removeAll(trash); err != nil {
			return fmt.Errorf("checkpoint: prune %s: %w", d, err)
		}
	}
	return nil
}

// trashPrefix names a pruned checkpoint's folder while it is deleted.
const trashPrefix = ".trash-"

// RemoveTrash deletes what interrupted prunes left under root (folders
// renamed out of the step_ names, partly deleted) and returns their names.
func RemoveTrash(root string) ([]string, error) {
	left, _ := filepath.Glob(filepath.Join(root, trashPrefix+"*"))
	var names []string
	for _, d := range left {
		if err := os.RemoveAll(d); err != nil {
			return names, fmt.Errorf("checkpoint: remove the leftover of an interrupted prune: %w", err)
		}
		names = append(names, filepath.Base(d))
	}
	return names, nil
}

// ModelIdentity hashes what identifies a Hugging Face model folder cheaply:
// config.json and every safetensors file's name, size and header.
func ModelIdentity(dir string) (Identity, error) {
	h := sha256.New()
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return Identity{}, fmt.Errorf("identify %s: %w", dir, err)
	}
	h.Write(cfg)
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	sort.Strings(files)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return Identity{}, fmt.Errorf("identify %s: %w", dir, err)
		}
		st, _ := f.Stat()
		fmt.Fprintf(h, "%s:%d:", filepath.Base(p), st.Size())
		head := make([]byte, 1<<20)
		n, _ := io.ReadFull(f, head)
		h.Write(head[:n])
		f.Close()
	}
	abs, _ := filepath.Abs(dir)
	return Identity{Path: abs, Hash: hex.EncodeToString(h.Sum(nil))}, nil
}

// WeightsHash is the SHA-256 over the whole content of the Hugging Face
// folder dir's safetensors files, in name order (each file's own hash,
// computed in parallel, then the names and hashes hashed together): what
// identifies a LoRA run's base model, whose weights its checkpoints do not
// copy. It reads every byte once (seconds per GB).
func WeightsHash(dir string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) == 0 {
		return "", fmt.Errorf("hash the weights of %s: no safetensors files", dir)
	}
	sort.Strings(files)
	sums, errs := make([][]byte, len(files)), make([]error, len(files))
	var wg sync.WaitGroup
	for i, p := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(p)
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				errs[i] = fmt.Errorf("read %s: %w", p, err)
				return
			}
			sums[i] = h.Sum(nil)
		}()
	}
	wg.Wait()
	h := sha256.New()
	for i, p := range files {
		if errs[i] != nil {
			return "", fmt.Errorf("hash the weights of %s: %w", dir, errs[i])
		}
		fmt.Fprintf(h, "%s:%x\n", filepath.Base(p), sums[i])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// VerifyIfCheckpoint verifies dir as export does (Verify: the
// manifest's own checksum, every file's size and SHA-256) when it is a
// checkpoint (manifest.json beside its files), and returns its manifest;
// nil for a plain model folder. (The model commands verify what they load as
// export does.)
func VerifyIfCheckpoint(dir string) (*Manifest, error) {
	if _, err := os.Stat(filepath.Join(dir, ManifestName)); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return Verify(dir)
}
