package model

import "testing"

// BenchmarkTrainTiny times a forward+backward of the demo-sized model
// (go test -bench TrainTiny -cpuprofile cpu.out ./model/ to profile).
func BenchmarkTrainTiny(b *testing.B) {
	s := BenchShape{Name: "demo", Opts: TinyOptions{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 538, Tied: true, RopeTheta: 1e4, MaxPositions: 512, InitStd: 0.02}, Batch: 16, SeqLen: 12, Iters: 1, ResponseTokens: 6}
	for i := 0; i < b.N; i++ {
		r, err := Measure(NewCPU(), s)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.TrainTokPerS, "train-tok/s")
	}
}

// BenchmarkCPUShapes times `gdrotrain bench`'s shapes on the CPU backend
// (go test -run '^$' -bench CPUShapes/tiny -cpuprofile cpu.out ./model/).
func BenchmarkCPUShapes(b *testing.B) {
	for _, s := range BenchShapes() {
		s.Iters = 1
		b.Run(s.Name, func(b *testing.B) {
			x, err := NewBencher(NewCPU(), s)
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
