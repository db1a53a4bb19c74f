package trainer

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// TestPlanCountsKVPool: with sampling.kv_cache_gib set, a GPU plan with a
// bf16 cache counts the page pool instead of every slot at full length
// (never more than that), and names the row; the CPU plan, whose cache
// keeps full storage, does not change.
func TestPlanCountsKVPool(t *testing.T) {
	mc := &model.Config{HiddenSize: 2048, IntermediateSize: 6144, NumHiddenLayers: 28, NumAttentionHeads: 16,
		NumKeyValueHeads: 8, HeadDim: 128, VocabSize: 151936, TieWordEmbeddings: true}
	cfg := Default()
	cfg.Sampling.MaxSlots, cfg.Data.MaxPromptLength, cfg.Sampling.MaxNewTokens = 256, 3200, 4096
	full := planFor(mc, cfg, true, "cuda")
	// 257 slots (the graphs' spare) × 7,296 tokens × 112 KiB of bf16 K and V.
	if want := int64(257) * 7296 * 28 * 2 * 8 * 128 * 2; full.Plan.KVCache != want || full.KVPaged {
		t.Fatalf("full KV cache %d bytes (paged %v), want %d", full.Plan.KVCache, full.KVPaged, want)
	}
	for _, c := range []struct {
		gib  float64
		want int64
	}{{50, 50 << 30}, {1000, full.Plan.KVCache}} {
		cfg.Sampling.KVCacheGiB = c.gib
		b := planFor(mc, cfg, true, "cuda")
		if b.Plan.KVCache != c.want || !b.KVPaged {
			t.Fatalf("kv_cache_gib %v: KV cache %d bytes (paged %v), want %d", c.gib, b.Plan.KVCache, b.KVPaged, c.want)
		}
		if !strings.Contains(b.Report(), "KV cache (bf16, paged pool)") {
			t.Fatalf("kv_cache_gib %v: the plan does not name the pool:\n%s", c.gib, b.Report())
		}
		if cpu := planFor(mc, cfg, false, "cpu"); cpu.KVPaged || cpu.Plan.KVCache != 2*full.Plan.KVCache {
			t.Fatalf("kv_cache_gib %v on the CPU: %d bytes (paged %v), want full fp32 storage", c.gib, cpu.Plan.KVCache, cpu.KVPaged)
		}
	}
}
