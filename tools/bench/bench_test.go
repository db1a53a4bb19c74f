package bench

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// BenchmarkTrainTiny times a forward+backward of the demo-sized model
// (go test -bench TrainTiny -cpuprofile cpu.out ./tools/bench/ to profile).
func BenchmarkTrainTiny(b *testing.B) {
	s := Shape{Name: "demo", Opts: model.RandomOptions{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 538, Tied: true, RopeTheta: 1e4, MaxPositions: 512, InitStd: 0.02}, Batch: 16, SeqLen: 12, Iters: 1, ResponseTokens: 6}
	for i := 0; i < b.N; i++ {
		r, err := Measure(cpu.NewBackend(), s)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.TrainTokPerS, "train-tok/s")
	}
}

// BenchmarkCPUShapes times `gdrotrain bench`'s shapes on the CPU backend
// (go test -run '^$' -bench CPUShapes/tiny -cpuprofile cpu.out ./tools/bench/).
func BenchmarkCPUShapes(b *testing.B) {
	for _, s := range Shapes() {
		s.Iters = 1
		b.Run(s.Name, func(b *testing.B) {
			x, err := NewBencher(cpu.NewBackend(), s)
			if err != nil {
				b.Fatal(err)
			}
			if err := x.Warm(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := x.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQwen3Shapes: the benchmark's Qwen3 shapes are those of the
// published configs in docs/qwen3-shapes.
func TestQwen3Shapes(t *testing.T) {
	for _, c := range []struct {
		dir  string
		opts model.RandomOptions
	}{{"1.7b", Qwen3_1_7B()}, {"8b", Qwen3_8B()}} {
		want, err := model.LoadConfig(filepath.Join("..", "..", "docs", "qwen3-shapes", c.dir))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.opts.Config()
		if err != nil {
			t.Fatal(err)
		}
		g := []int{got.NumHiddenLayers, got.HiddenSize, got.IntermediateSize, got.NumAttentionHeads, got.NumKeyValueHeads, got.HeadDim, got.VocabSize}
		w := []int{want.NumHiddenLayers, want.HiddenSize, want.IntermediateSize, want.NumAttentionHeads, want.NumKeyValueHeads, want.HeadDim, want.VocabSize}
		if !slices.Equal(g, w) || got.TieWordEmbeddings != want.TieWordEmbeddings {
			t.Errorf("%s: layers, hidden, intermediate, heads, kv heads, head dim, vocab %v tied %v; config.json %v tied %v",
				c.dir, g, got.TieWordEmbeddings, w, want.TieWordEmbeddings)
		}
	}
}

// TestWeightsOncePerShape: a bench run's rows of one model shape (training
// rows of two batch sizes, bf16 and fp8 KV decode rows) share one set of
// random weights, drawn once; another shape gets its own.
func TestWeightsOncePerShape(t *testing.T) {
	b := cpu.NewBackend()
	w := NewWeights(b)
	o := model.DefaultTiny()
	var ps []*model.Params
	for _, s := range []Shape{{Name: "a", Opts: o, Batch: 2, SeqLen: 16, Iters: 1, ResponseTokens: 8},
		{Name: "b", Opts: o, Batch: 1, SeqLen: 32, Iters: 1, ResponseTokens: 8}} {
		x, err := NewBencherWith(b, s, w)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.Run(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, x.m.P)
	}
	for _, fp8 := range []bool{false, true} {
		r, err := MeasureDecode(b, o, DecodeOptions{Batch: 2, Context: 8, Steps: 1, FP8: fp8, Weights: w})
		if err != nil {
			if fp8 {
				t.Logf("fp8 KV cache on the CPU backend: %v", err) // a backend without one says so
				continue
			}
			t.Fatal(err)
		}
		if r.TokPerS <= 0 || r.FP8 != fp8 {
			t.Errorf("decode fp8=%v: %+v", fp8, r)
		}
	}
	if w.Made != 1 || w.Served < 3 || ps[0] != ps[1] {
		t.Fatalf("one shape: made %d sets for %d rows (same params: %v), want 1", w.Made, w.Served, ps[0] == ps[1])
	}
	other := o
	other.Layers = 3
	x, err := NewBencherWith(b, Shape{Name: "c", Opts: other, Batch: 1, SeqLen: 16, Iters: 1, ResponseTokens: 8}, w)
	if err != nil {
		t.Fatal(err)
	}
	if w.Made != 2 || x.m.P == ps[0] {
		t.Errorf("a second shape: made %d sets, want 2 (its own)", w.Made)
	}
}
