package cpu_test

// An external test package: tools/bench imports this package.

import (
	"fmt"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/tools/bench"
)

// BenchmarkExactModel measures exact mode's cost on the benchmark's
// ≈50M-parameter model (bench.Shapes): the training forward (what the
// π_old pass costs, and what exact mode skips) and forward+backward over
// 2 × 128 tokens, and 16 sequences decoding one token each against 256
// cached tokens, beside the default mode. Run with -benchtime=1x.
func BenchmarkExactModel(bm *testing.B) {
	s := bench.Shapes()[1]
	for _, exact := range []bool{false, true} {
		bm.Run(fmt.Sprintf("exact=%v", exact), func(bm *testing.B) {
			b := cpu.NewBackend()
			b.SetBatchInvariant(exact)
			for bm.Loop() {
				r, err := bench.Measure(b, s)
				if err != nil {
					bm.Fatal(err)
				}
				d, err := bench.MeasureDecode(b, s.Opts, bench.DecodeOptions{Batch: 16, Context: 256, Steps: 4, Exact: exact})
				if err != nil {
					bm.Fatal(err)
				}
				bm.ReportMetric(r.FwdTokPerS, "fwd-tok/s")
				bm.ReportMetric(r.TrainTokPerS, "train-tok/s")
				bm.ReportMetric(d.TokPerS, "decode-tok/s")
			}
		})
	}
}
