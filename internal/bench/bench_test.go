package bench

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/model"
)

// BenchmarkTrainTiny times a forward+backward of the demo-sized model
// (go test -bench TrainTiny -cpuprofile cpu.out ./internal/bench/ to profile).
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
// (go test -run '^$' -bench CPUShapes/tiny -cpuprofile cpu.out ./internal/bench/).
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
