package optim

import (
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestPaddedLen: W·⌈n/W⌉, whose block r starts with rank r's Range.
func TestPaddedLen(t *testing.T) {
	for _, c := range []struct{ n, world, want int }{
		{0, 4, 0}, {1, 4, 4}, {7, 1, 7}, {7, 0, 7}, {8, 4, 8}, {9, 4, 12}, {4096, 3, 4098}, {5, 8, 8},
	} {
		s := Shard{World: c.world}
		if got := s.PaddedLen(c.n); got != c.want {
			t.Errorf("PaddedLen(%d) at W = %d: %d, want %d", c.n, c.world, got, c.want)
		}
		if !s.Sharded() {
			continue
		}
		chunk := c.want / c.world
		for r := range c.world {
			s.Rank = r
			if lo, hi := s.Range(c.n); hi > lo && (lo != r*chunk || hi > (r+1)*chunk) {
				t.Errorf("n %d, W %d: rank %d's range [%d, %d) is not at the start of block [%d, %d)", c.n, c.world, r, lo, hi, r*chunk, (r+1)*chunk)
			}
		}
	}
}

// TestShardMastersCPU: the CPU backends hold no bf16-only weights, so
// ShardMasters changes nothing there (the CPU path stays moment-only
// ZeRO-1) and the masters' gather and load say why they cannot run.
func TestShardMastersCPU(t *testing.T) {
	mc, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.NewBackend()
	p := model.RandomParams(b, mc, 1, 0.1, 0)
	before := hostParams(b, mc, p)
	o, err := NewShardedAdamW(b, mc, p, AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, Shard{Rank: 1, World: 2})
	if err != nil {
		t.Fatal(err)
	}
	done, err := o.ShardMasters(b, mc, p)
	if err != nil || done {
		t.Fatalf("ShardMasters on the CPU: %v, %v; want false, nil", done, err)
	}
	if o.MastersSharded() {
		t.Error("MastersSharded after a refused ShardMasters")
	}
	equalParams(t, "weights after a refused ShardMasters", hostParams(b, mc, p), before)
	if _, err := o.GatherMasters(b, mc, p, nil, true); err == nil || !strings.Contains(err.Error(), "no sharded masters") {
		t.Errorf("GatherMasters without masters: %v", err)
	}
	if err := o.LoadMasters(b, mc, p, t.TempDir()); err == nil || !strings.Contains(err.Error(), "no sharded masters") {
		t.Errorf("LoadMasters without masters: %v", err)
	}
}
