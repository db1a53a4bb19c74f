package main

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// TestGenerateCount: -n below 1 is an error naming the flag (-n 0 used to
// print nothing, -n -3 an internal message about slots).
func TestGenerateCount(t *testing.T) {
	task := testfix.TinyTask(t)
	for _, n := range []string{"0", "-3"} {
		_, err := runCmd(t, "", "generate", "--model", task.Model, "--prompt", "1+1=", "--mode", "raw", "--device", "cpu", "-n", n)
		if err == nil || !strings.Contains(err.Error(), "-n "+n+": want at least 1") {
			t.Errorf("-n %s: %v", n, err)
		}
	}
	out, err := runCmd(t, "", "generate", "--model", task.Model, "--prompt", "1+1=", "--mode", "raw", "--device", "cpu", "-n", "2", "--max-new-tokens", "3")
	if err != nil || strings.Count(out, "--- completion") != 2 {
		t.Errorf("-n 2: %v\n%s", err, out)
	}
}

// TestGenerateKVCacheGiB: --kv-cache-gib pages the cache (the same
// completions as without it), and a budget below one rollout is an error
// naming the config key, not a hang.
func TestGenerateKVCacheGiB(t *testing.T) {
	task := testfix.TinyTask(t)
	args := []string{"generate", "--model", task.Model, "--prompt", "1+1=", "--mode", "raw", "--device", "cpu", "-n", "3", "--max-new-tokens", "5", "--seed", "7"}
	want, err := runCmd(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runCmd(t, "", append(args, "--kv-cache-gib", "0.5")...)
	if err != nil || got != want {
		t.Fatalf("paged: %v\n%s\nunpaged:\n%s", err, got, want)
	}
	if _, err := runCmd(t, "", append(args, "--kv-cache-gib", "0.0001")...); err == nil || !strings.Contains(err.Error(), "sampling.kv_cache_gib") {
		t.Fatalf("a budget below one rollout: %v", err)
	}
}
