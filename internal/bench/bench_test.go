package bench

import (
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
