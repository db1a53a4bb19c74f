package infer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/launch"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// generate runs Generate on the tiny task's model as `gdrotrain generate
// --prompt 1+1= --mode raw --device cpu` with o's other settings, and
// returns what it printed.
func generate(t *testing.T, dir string, o GenerateOptions) (string, error) {
	t.Helper()
	var out strings.Builder
	o.Model, o.Prompt, o.Mode = dir, "1+1=", "raw"
	o.Device = launch.Device{Name: "cpu", MatMul: "fp32"}
	o.Stdout, o.Stderr = &out, io.Discard
	err := Generate(context.Background(), o)
	return out.String(), err
}

// TestGenerateCount: -n below 1 is an error naming the flag (-n 0 used to
// print nothing, -n -3 an internal message about slots).
func TestGenerateCount(t *testing.T) {
	task := testfix.TinyTask(t)
	for _, n := range []int{0, -3} {
		_, err := generate(t, task.Model, GenerateOptions{N: n, Sampling: sampler.Params{MaxNewTokens: 256, Temperature: 1, TopP: 1}})
		if want := fmt.Sprintf("-n %d: want at least 1", n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("-n %d: %v", n, err)
		}
	}
	out, err := generate(t, task.Model, GenerateOptions{N: 2, Sampling: sampler.Params{MaxNewTokens: 3, Temperature: 1, TopP: 1}})
	if err != nil || strings.Count(out, "--- completion") != 2 {
		t.Errorf("-n 2: %v\n%s", err, out)
	}
}

// TestGenerateKVCacheGiB: --kv-cache-gib pages the cache (the same
// completions as without it), and a budget below one rollout is an error
// naming the config key, not a hang.
func TestGenerateKVCacheGiB(t *testing.T) {
	task := testfix.TinyTask(t)
	o := GenerateOptions{N: 3, Sampling: sampler.Params{MaxNewTokens: 5, Seed: 7, Temperature: 1, TopP: 1, Graphs: true}}
	want, err := generate(t, task.Model, o)
	if err != nil {
		t.Fatal(err)
	}
	o.KVCacheGiB = 0.5
	got, err := generate(t, task.Model, o)
	if err != nil || got != want {
		t.Fatalf("paged: %v\n%s\nunpaged:\n%s", err, got, want)
	}
	o.KVCacheGiB = 0.0001
	if _, err := generate(t, task.Model, o); err == nil || !strings.Contains(err.Error(), "sampling.kv_cache_gib") {
		t.Fatalf("a budget below one rollout: %v", err)
	}
}
