package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/configs"
	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/reward"
)

// TestPaperConfigsValidateOnShippedBenchmarks: the README's training
// example used to fail because every paper config named
// data/benchmarks/*.parquet, which nothing shipped. Now each paper config's
// validation.files exist in the repository (paths from its root), match the
// checksums benchmarks/README.md records, load as datasets, and every
// data_source in them has a scorer. GPQA-Diamond is not shipped.
func TestPaperConfigsValidateOnShippedBenchmarks(t *testing.T) {
	root := ".."
	readme, err := os.ReadFile(filepath.Join(root, "benchmarks", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([0-9a-f]{64})  (\S+\.jsonl)$`).FindAllStringSubmatch(string(readme), -1) {
		sums[m[2]] = m[1]
	}
	shipped, _ := filepath.Glob(filepath.Join(root, "benchmarks", "*.jsonl"))
	if len(shipped) != len(sums) || len(sums) != 6 {
		t.Fatalf("benchmarks/ has %d files, its README lists %d checksums; want 6 each", len(shipped), len(sums))
	}
	for _, p := range shipped {
		if strings.Contains(p, "gpqa") {
			t.Errorf("%s is shipped; GPQA's authors ask that it not be posted in plain text", p)
		}
		raw, _ := os.ReadFile(p)
		sum := sha256.Sum256(raw)
		if got := hex.EncodeToString(sum[:]); got != sums[filepath.Base(p)] {
			t.Errorf("%s: sha256 %s, benchmarks/README.md says %s", p, got, sums[filepath.Base(p)])
		}
	}
	for _, name := range configs.Names() {
		if !strings.HasPrefix(name, "paper-") && !strings.HasPrefix(name, "reference-") {
			continue
		}
		raw, _ := configs.Get(name)
		cfg, err := Resolve(raw, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Validation.Files) != len(shipped) {
			t.Errorf("%s: validation.files %v, want the %d shipped benchmarks", name, cfg.Validation.Files, len(shipped))
		}
		var paths []string
		for _, f := range cfg.Validation.Files {
			paths = append(paths, filepath.Join(root, f))
		}
		ds, err := data.ReadFiles(paths, data.ReadOptions{Split: "test", Logf: t.Logf})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ds.Prompts) != 1547 {
			t.Errorf("%s: %d validation prompts, want 1547", name, len(ds.Prompts))
		}
		seen := map[string]bool{}
		for _, p := range ds.Prompts {
			if seen[p.DataSource] {
				continue
			}
			seen[p.DataSource] = true
			if _, err := reward.ForDataSource(p.DataSource); err != nil {
				t.Errorf("%s: data_source %q has no scorer: %v", name, p.DataSource, err)
			}
		}
		if len(seen) != 6 {
			t.Errorf("%s: data sources %v, want 6", name, seen)
		}
	}
}
