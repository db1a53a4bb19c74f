package optim

import (
	"fmt"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestNewPicksStrategy: the world size and ZeRO stage pick the strategy
// once; ZeRO-2 gets a gradient window and accumulators, the others a whole
// gradient; a data-parallel strategy without its collectives is refused.
func TestNewPicksStrategy(t *testing.T) {
	mc, err := model.DefaultTiny().Config()
	if err != nil {
		t.Fatal(err)
	}
	var comm struct {
		AllReducer
		ShardComm
	}
	sum := summer(func(string, []float64) error { return nil })
	for _, tc := range []struct {
		world, zero int
		want        string
	}{{0, 1, "*optim.single"}, {1, 2, "*optim.single"}, {2, 0, "*optim.replicated"}, {2, 1, "*optim.zero1"}, {3, 2, "*optim.zero2"}} {
		b := cpu.NewBackend()
		m := &model.Model{Cfg: mc, B: b, P: model.RandomParams(b, mc, 1, 0.1, 0)}
		s, err := New(m, Setup{Shard: Shard{Rank: 1 % max(tc.world, 1), World: tc.world}, ZeRO: tc.zero,
			Reducer: comm, Comm: comm, Group: sum})
		if err != nil {
			t.Fatalf("world %d, ZeRO-%d: %v", tc.world, tc.zero, err)
		}
		if got := fmt.Sprintf("%T", s); got != tc.want {
			t.Errorf("world %d, ZeRO-%d: %s, want %s", tc.world, tc.zero, got, tc.want)
		}
		if err := s.AllocGrads(); err != nil {
			t.Fatal(err)
		}
		layers := s.Grads().Layers
		shared := layers[0].Q == layers[1].Q
		if shared != (tc.zero >= 2 && tc.world > 1) {
			t.Errorf("world %d, ZeRO-%d: layers share their gradients: %v", tc.world, tc.zero, shared)
		}
		if (s.Flush() != nil) != shared {
			t.Errorf("world %d, ZeRO-%d: a flush without the window or the reverse", tc.world, tc.zero)
		}
		if s.MastersSharded() || s.Steps() != 0 {
			t.Errorf("world %d, ZeRO-%d: masters sharded on the CPU, or %d steps", tc.world, tc.zero, s.Steps())
		}
	}
	b := cpu.NewBackend()
	m := &model.Model{Cfg: mc, B: b, P: model.RandomParams(b, mc, 1, 0.1, 0)}
	if _, err := New(m, Setup{Shard: Shard{World: 2}, ZeRO: 0}); err == nil {
		t.Error("replicated without a reducer accepted")
	}
	if _, err := New(m, Setup{Shard: Shard{World: 2}, ZeRO: 1, Reducer: comm}); err == nil {
		t.Error("ZeRO without collectives accepted")
	}
}

type summer func(string, []float64) error

func (f summer) SumFloat64(name string, x []float64) error { return f(name, x) }
