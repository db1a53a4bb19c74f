package configdoc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gdrotrain/gdrotrain/trainer"
)

const root = "../.."

// TestEveryKeyDocumented: every key of the run config has a field comment,
// and every key a resolved config writes (--print-config, the run folder's
// config.yaml) is in the reference.
func TestEveryKeyDocumented(t *testing.T) {
	secs, err := Sections(root)
	if err != nil {
		t.Fatal(err)
	}
	if missing := Undocumented(secs); len(missing) > 0 {
		t.Errorf("keys without a field comment (document them in the Go struct): %s", strings.Join(missing, ", "))
	}
	documented := map[string]bool{}
	for _, s := range secs {
		documented[s.Path] = true
		for _, k := range s.Keys {
			documented[k.Path] = true
		}
	}
	// The keys of the YAML a resolved config writes, found independently
	// of the reflection walk above.
	cfg := trainer.Default()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, m map[string]any)
	n := 0
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok && !strings.HasSuffix(path, "focus.targets") {
				walk(path, sub)
				continue
			}
			n++
			if !documented[path] {
				t.Errorf("config key %s is missing from the reference", path)
			}
		}
	}
	walk("", tree)
	if n < 60 {
		t.Errorf("found only %d keys in the default config's YAML; the walk is broken", n)
	}
}

// TestConfigDocCurrent: docs/config.md is what the generator writes now.
// Run `make config-doc` after changing a config field or its comment.
func TestConfigDocCurrent(t *testing.T) {
	secs, err := Sections(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Markdown(secs)
	got, err := os.ReadFile(filepath.Join(root, "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/config.md is out of date: run `make config-doc` (go run ./tools/configdoc/cmd/gen-config-doc)")
	}
}

// TestUnname covers the comment clean-up table.
func TestUnname(t *testing.T) {
	for _, c := range []struct{ doc, name, key, want string }{
		{"MatMul is the precision", "MatMul", "matmul_precision", "the precision"},
		{"Edges are the bin edges", "Edges", "edges", "the bin edges"},
		{"ShareNorm divides a bin's signal", "ShareNorm", "share_norm", "divides a bin's signal"},
		{"KVCacheGiB > 0 pages the cache", "KVCacheGiB", "kv_cache_gib", "`kv_cache_gib` > 0 pages the cache"},
		{"KLCoef is β_KL", "KLCoef", "kl_coef", "β_KL"},
		{"global norm; 0 disables", "GradClip", "grad_clip", "global norm; 0 disables"},
	} {
		if got := unname(c.doc, c.name, c.key); got != c.want {
			t.Errorf("unname(%q) = %q, want %q", c.doc, got, c.want)
		}
	}
	if got := sentence("μ at step 1"); got != "Μ at step 1" {
		t.Errorf("sentence: %q", got)
	}
	if reflect.DeepEqual(Undocumented([]Section{{Keys: []Key{{Path: "a.b"}}}}), []string{"a.b"}) == false {
		t.Error("Undocumented misses a key without doc")
	}
}
