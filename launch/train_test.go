package launch

import (
	"os"
	"strings"
	"testing"
)

// TestConfigNameNotAFolder: run beside a folder demo/ (as the repository
// root once had), `--config demo` still means the built-in config; a file of
// the name still wins.
func TestConfigNameNotAFolder(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("demo", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, source, err := ReadConfig("demo"); err != nil || source != "built-in demo" {
		t.Fatalf("ReadConfig(demo) beside a demo/ folder: %q, %v", source, err)
	}
	if err := os.WriteFile("mine.yaml", []byte("run:\n  seed: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if raw, source, err := ReadConfig("mine.yaml"); err != nil || source != "mine.yaml" || !strings.Contains(string(raw), "seed: 3") {
		t.Fatalf("ReadConfig(mine.yaml): %q, %v", source, err)
	}
	// A folder that is no built-in config's name is named a folder (it
	// used to say "no such file").
	if err := os.Mkdir("configs-dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadConfig("configs-dir"); err == nil || !strings.Contains(err.Error(), "--config configs-dir is a folder, want a YAML file") {
		t.Fatalf("ReadConfig(a folder): %v", err)
	}
}
