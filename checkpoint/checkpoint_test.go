package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// save writes a checkpoint with two small files.
func save(t *testing.T, root string, step int, permanent bool) string {
	t.Helper()
	w, err := Begin(root, step)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.Dir(), "model.safetensors"), []byte(strings.Repeat("w", 1000+step)), 0o644)
	os.WriteFile(filepath.Join(w.Dir(), "optimizer.safetensors"), []byte(strings.Repeat("m", 500)), 0o644)
	dir, err := w.Commit(Manifest{State: json.RawMessage(`{"step":1}`), Config: json.RawMessage(`{}`), Permanent: permanent})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCorruptionFallsBackToPreviousGood(t *testing.T) {
	cases := []struct {
		name   string
		damage func(dir string)
		want   string
	}{
		{"truncated blob", func(d string) {
			os.Truncate(filepath.Join(d, "model.safetensors"), 10)
		}, "truncated"},
		{"flipped byte", func(d string) {
			p := filepath.Join(d, "optimizer.safetensors")
			b, _ := os.ReadFile(p)
			b[100] ^= 1
			os.WriteFile(p, b, 0o644)
		}, "checksum"},
		{"missing blob", func(d string) { os.Remove(filepath.Join(d, "model.safetensors")) }, "model.safetensors"},
		{"missing manifest", func(d string) { os.Remove(filepath.Join(d, ManifestName)) }, "missing or unreadable manifest"},
		{"newer format", func(d string) {
			p := filepath.Join(d, ManifestName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(b), `"format": 1`, `"format": 2`, 1)), 0o644)
		}, "format version 2"},
		{"garbage manifest", func(d string) { os.WriteFile(filepath.Join(d, ManifestName), []byte("{"), 0o644) }, "corrupt manifest"},
		// Valid JSON is not enough: a hand edit of the trainer's state (the
		// issue's state.step 6 → 4) or of the step fails the manifest's own
		// checksum.
		{"edited state", func(d string) {
			editManifest(t, d, func(m map[string]any) { m["state"] = map[string]any{"step": 0} })
		}, "fails its own checksum"},
		{"edited step", func(d string) { editManifest(t, d, func(m map[string]any) { m["step"] = 1.0 }) }, "fails its own checksum"},
		{"edited date", func(d string) { editManifest(t, d, func(m map[string]any) { m["created"] = "yesterday" }) }, "fails its own checksum"},
	}
	for _, c := range cases {
		root := t.TempDir()
		good := save(t, root, 1, false)
		bad := save(t, root, 2, false)
		c.damage(bad)
		dir, m, skipped := Latest(root)
		if dir != good || m == nil || m.Step != 1 {
			t.Errorf("%s: Latest = %q, want %q", c.name, dir, good)
		}
		if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), c.want) || !strings.Contains(skipped[0].Error(), bad) {
			t.Errorf("%s: skipped %v, want one error naming %s and %q", c.name, skipped, bad, c.want)
		}
	}
}

// editManifest rewrites dir's manifest through a generic JSON object.
func editManifest(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, ManifestName)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	raw, _ = json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestManifestChecksum: the manifest carries its own checksum, which holds
// whatever the key order or indentation; a checkpoint folder renamed to
// another step is refused; a manifest from before checksums (none) is read
// with a note, and the step-vs-name check still applies to it.
func TestManifestChecksum(t *testing.T) {
	root := t.TempDir()
	dir := save(t, root, 6, false)
	m, err := Verify(dir)
	if err != nil || m.Checksum == "" || len(m.Notes) != 0 {
		t.Fatalf("fresh checkpoint: %v, checksum %q, notes %v", err, m.Checksum, m.Notes)
	}
	// Re-serialised with another layout (compact, keys sorted): still valid.
	editManifest(t, dir, func(map[string]any) {})
	if _, err := Verify(dir); err != nil {
		t.Fatalf("re-indented manifest refused: %v", err)
	}
	// Copied to another step's name: refused, naming both steps.
	other := filepath.Join(root, Name(9))
	if err := os.CopyFS(other, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(other); err == nil || !strings.Contains(err.Error(), "says step 6") || !strings.Contains(err.Error(), "step 9") {
		t.Fatalf("renamed checkpoint: %v", err)
	}
	if got, _, skipped := Latest(root); got != dir || len(skipped) != 1 {
		t.Fatalf("Latest = %q (skipped %v), want %q", got, skipped, dir)
	}
	os.RemoveAll(other)
	// An old manifest without a checksum: read, with a note.
	editManifest(t, dir, func(m map[string]any) { delete(m, "manifest_sha256") })
	m, err = Verify(dir)
	if err != nil || len(m.Notes) != 1 || !strings.Contains(m.Notes[0], "no checksum") {
		t.Fatalf("old manifest: %v, notes %v", err, m)
	}
	editManifest(t, dir, func(m map[string]any) { m["step"] = 4.0 })
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "says step 4") {
		t.Fatalf("old manifest with an edited step: %v", err)
	}
}

func TestInterruptedSaveIsInvisible(t *testing.T) {
	root := t.TempDir()
	good := save(t, root, 3, false)
	w, _ := Begin(root, 4) // a save that never commits (killed mid-write)
	os.WriteFile(filepath.Join(w.Dir(), "model.safetensors"), []byte("partial"), 0o644)
	if dir, _, skipped := Latest(root); dir != good || len(skipped) != 0 {
		t.Fatalf("Latest = %q %v, want %q", dir, skipped, good)
	}
	save(t, root, 5, false) // the next save clears the leftover
	if left, _ := filepath.Glob(filepath.Join(root, ".tmp-*")); len(left) != 0 {
		t.Fatalf("leftover temporary folders %v", left)
	}
}

func TestPruneKeepsNewestAndPermanent(t *testing.T) {
	root := t.TempDir()
	for step := 1; step <= 5; step++ {
		save(t, root, step, step == 2)
	}
	if err := Prune(root, 2); err != nil {
		t.Fatal(err)
	}
	dirs, _ := List(root)
	var names []string
	for _, d := range dirs {
		names = append(names, filepath.Base(d))
	}
	want := []string{Name(5), Name(4), Name(2)}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("after prune: %v, want %v", names, want)
	}
}

func TestModelIdentity(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"a":1}`), 0o644)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weights"), 0o644)
	a, err := ModelIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("weightz"), 0o644)
	b, _ := ModelIdentity(dir)
	if a.Hash == b.Hash || a.Path != b.Path {
		t.Fatalf("identity did not change with the weights: %v %v", a, b)
	}
	if _, err := ModelIdentity(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("missing model identified")
	}
}

// TestJoin: another rank's files written through Join are part of the
// committed checkpoint (listed and checksummed in its manifest); Join
// before Begin is an error.
func TestJoin(t *testing.T) {
	root := t.TempDir()
	if _, err := Join(root, 3); err == nil {
		t.Fatal("join before begin succeeded")
	}
	w, err := Begin(root, 3)
	if err != nil {
		t.Fatal(err)
	}
	j, err := Join(root, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.Dir(), "shard-1"), []byte("rank 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.Dir(), "shard-0"), []byte("rank 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir, err := w.Commit(Manifest{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	if len(names) != 2 || names[0] != "shard-0" || names[1] != "shard-1" {
		t.Fatalf("manifest files %v, want shard-0 and shard-1", names)
	}
	// Damaging the joined rank's file is caught like any other.
	os.WriteFile(filepath.Join(dir, "shard-1"), []byte("rank 9"), 0o644)
	if _, err := Verify(dir); err == nil {
		t.Fatal("a damaged shard verified")
	}
}

// TestPruneKilledMidway: a prune killed while it deletes a checkpoint (here
// the deletion stops after one file, as a kill -9 leaves it) never leaves a
// half-deleted step_ folder, which Latest would report as damaged on every
// start and nothing would remove; the leftover is removed by the next save.
func TestPruneKilledMidway(t *testing.T) {
	root := t.TempDir()
	for step := 1; step <= 3; step++ {
		save(t, root, step, false)
	}
	removeAll = func(dir string) error { // deletes one file, then the process "dies"
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		os.Remove(filepath.Join(dir, entries[0].Name()))
		return os.ErrDeadlineExceeded
	}
	err := Prune(root, 2)
	removeAll = os.RemoveAll
	if err == nil {
		t.Fatal("the interrupted prune reported no error")
	}
	dirs, _ := List(root)
	for _, d := range dirs {
		if _, err := Verify(d); err != nil {
			t.Errorf("a half-deleted checkpoint is left in place: %v", err)
		}
	}
	if len(dirs) != 2 {
		t.Errorf("after the interrupted prune: %d checkpoint folders, want 2 (the pruned one moved aside)", len(dirs))
	}
	save(t, root, 4, false) // the next save clears the leftover
	if err := Prune(root, 2); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := Name(3) + "," + Name(4); strings.Join(names, ",") != want {
		t.Fatalf("the run's checkpoints folder holds %v, want %s", names, want)
	}
}
