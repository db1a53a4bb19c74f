package trainer

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestCPUKVCacheFormats: on the CPU, precision.kv_cache auto is fp32
// (the same run as fp32, metric for metric, with precision.matmul bf16,
// which makes auto bf16 on a GPU), and bf16 and fp8 hold the sampler's
// cache in those formats: the sampler's log-probs then differ from the
// training forward's (the mismatch metrics, docs/algorithm.md §5.10) by
// the format's rounding, more for fp8 than bf16, and the fp8 figure is of
// the order the emulator measures for CUDA's fp8 cache on the same
// fixture (cuda's TestSamplerTrainerMismatch: mean |Δ log-prob| 1.9e-2,
// there with bf16 products as well).
func TestCPUKVCacheFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("four one-step runs of the tiny fixture")
	}
	task := testfix.TinyTask(t)
	metrics := map[string]map[string]any{}
	for _, kv := range []string{"auto", "fp32", "bf16", "fp8"} {
		cfg, err := LoadBytes(nil, "", append(task.Sets(), "run.name=kv-"+kv, "precision.kv_cache="+kv,
			"precision.matmul=bf16", "loss.kl_coef=0.01", "train.steps=1", "checkpoint.every=0", "validation.every=0"))
		if err != nil {
			t.Fatal(err)
		}
		runFixture(t, cfg)
		lines := readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))
		if len(lines) != 1 {
			t.Fatalf("kv_cache %s: %d metrics lines, want 1", kv, len(lines))
		}
		metrics[kv] = lines[0]
	}
	get := func(kv, key string) float64 {
		t.Helper()
		v, ok := metrics[kv][key].(float64)
		if !ok {
			t.Fatalf("kv_cache %s: no %s in the metrics line", kv, key)
		}
		return v
	}
	for k, v := range metrics["fp32"] {
		if strings.HasPrefix(k, "time_") || strings.HasSuffix(k, "_per_s") {
			continue
		}
		if w := metrics["auto"][k]; fmt.Sprint(w) != fmt.Sprint(v) {
			t.Errorf("kv_cache auto: %s = %v, fp32 %v (auto must be fp32 on the CPU)", k, w, v)
		}
	}
	for _, kv := range []string{"fp32", "bf16", "fp8"} {
		t.Logf("kv_cache %s: |Δ log-prob| mean %.3g max %.3g, KL %.3g", kv,
			get(kv, "mismatch_logp_abs_mean"), get(kv, "mismatch_logp_abs_max"), get(kv, "mismatch_kl"))
	}
	if d := get("fp32", "mismatch_logp_abs_max"); d > 1e-4 {
		t.Errorf("fp32 cache: max |Δ log-prob| %g, beyond rounding (1e-4)", d)
	}
	for _, c := range []struct{ lo, hi string }{{"fp32", "bf16"}, {"bf16", "fp8"}} {
		if a, b := get(c.lo, "mismatch_logp_abs_mean"), get(c.hi, "mismatch_logp_abs_mean"); !(b > a) {
			t.Errorf("a %s cache shows no more mismatch (%g) than a %s one (%g): the sampler's log-probs are not its cache's", c.hi, b, c.lo, a)
		}
	}
	// Within a factor of 5 of the emulator's 1.9e-2 either way.
	if m := get("fp8", "mismatch_logp_abs_mean"); m < 1.9e-2/5 || m > 1.9e-2*5 {
		t.Errorf("fp8 cache: mean |Δ log-prob| %g, not of the order of CUDA's 1.9e-2", m)
	}
	for _, kv := range []string{"bf16", "fp8"} {
		if kl := get(kv, "mismatch_kl"); !(kl >= 0) || kl > 1e-2 {
			t.Errorf("kv_cache %s: mismatch KL %g, want a small non-negative number", kv, kl)
		}
	}
}

// TestCPUPlanKVFormats: the CPU's memory plan counts the cache in the
// format it is held in: fp32 for auto (even with precision.matmul bf16)
// and fp32, half of that for bf16, codes and scales for fp8; a page pool
// (sampling.kv_cache_gib) never shrinks it, the CPU keeping full storage.
func TestCPUPlanKVFormats(t *testing.T) {
	mc := &model.Config{HiddenSize: 2048, IntermediateSize: 6144, NumHiddenLayers: 28, NumAttentionHeads: 16,
		NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 151936, TieWordEmbeddings: true}
	cfg := Default()
	cfg.Precision.MatMul = "bf16"
	cfg.Sampling.MaxSlots, cfg.Data.MaxPromptLength, cfg.Sampling.MaxNewTokens = 16, 512, 512
	cfg.Precision.KVCacheDType = "fp32"
	fp32 := planFor(mc, cfg, false, "cpu").Plan.KVCache
	for _, c := range []struct {
		kv   string
		gib  float64
		want int64
	}{
		{"auto", 0, fp32},
		{"bf16", 0, fp32 / 2},
		{"fp8", 0, fp32 / (4 * 8 * 128) * model.FP8KVRowBytes(8, 128)},
		{"bf16", 0.01, fp32 / 2},
	} {
		cfg.Precision.KVCacheDType, cfg.Sampling.KVCacheGiB = c.kv, c.gib
		b := planFor(mc, cfg, false, "cpu")
		if b.Plan.KVCache != c.want || b.KVPaged {
			t.Errorf("kv_cache %s, kv_cache_gib %v on the CPU: %d bytes (paged %v), want %d", c.kv, c.gib, b.Plan.KVCache, b.KVPaged, c.want)
		}
	}
}
