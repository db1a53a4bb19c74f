package cuda

import (
	"math"
	"testing"

	"github.com/gdrotrain/gdrotrain/model"
)

// profileShape is a small model whose step the emulator computes quickly.
func profileShape(layers int) model.BenchShape {
	o := model.DefaultTiny()
	o.Layers, o.Vocab = layers, 300
	return model.BenchShape{Name: "tiny", Opts: o, Batch: 2, SeqLen: 48, ResponseTokens: 40}
}

// TestProfileExtrapolation: a step counted at one and two layers and
// extrapolated to four gives the counts of a step run at four layers.
func TestProfileExtrapolation(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	s := profileShape(4)
	sp, err := ProfileTrainStep(b, s)
	if err != nil {
		t.Fatal(err)
	}
	_, direct, err := profileAt(b, s.Opts, s)
	if err != nil {
		t.Fatal(err)
	}
	got, want := sp.Step, direct
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"launches", got.Launches, want.Launches}, {"gemms", got.GEMMs, want.GEMMs}, {"memsets", got.Memsets, want.Memsets},
		{"host syncs", got.HostSyncs, want.HostSyncs}, {"h2d bytes", got.H2DBytes, want.H2DBytes}, {"d2h bytes", got.D2HBytes, want.D2HBytes},
	} {
		if c.got != c.want {
			t.Errorf("%s: extrapolated %d, counted %d", c.name, c.got, c.want)
		}
	}
	for e := range got.Flops {
		if math.Abs(got.Flops[e]-want.Flops[e]) > 1e-9*want.Flops[e] {
			t.Errorf("%s flops: extrapolated %g, counted %g", engineNames[e], got.Flops[e], want.Flops[e])
		}
	}
	if math.Abs(got.EstSeconds(H100)-want.EstSeconds(H100)) > 1e-9 {
		t.Errorf("estimate: extrapolated %g s, counted %g s", got.EstSeconds(H100), want.EstSeconds(H100))
	}
	t.Logf("4-layer tiny step: %d launches, %d GEMMs, %d host syncs, %d device allocs (first step %d)",
		got.Launches, got.GEMMs, got.HostSyncs, got.DeviceAllocs, sp.First.DeviceAllocs)
}

// TestProfileCountsArithmetic: the GEMM arithmetic the profile counts is
// the model's matrix arithmetic (model.TrainFLOPs less attention, plus the
// head's recomputation), all on
// tensor cores in bf16 and none in fp32; attention's is 14·D per causal
// pair and head per layer (forward 4·D, backward 10·D).
func TestProfileCountsArithmetic(t *testing.T) {
	s := profileShape(2)
	o := s.Opts
	causal := float64(s.Batch) * float64(s.SeqLen*(s.SeqLen+1)/2)
	attn := 14 * float64(o.HeadDim*o.Heads) * causal * float64(o.Layers)
	// TrainFLOPs counts attention as 3 × 2·T²·HD (T² over two for QKᵀ
	// and PV each); the rest is the matrices.
	matrices := model.TrainFLOPs(s) - 3*float64(o.Layers)*float64(s.Batch)*2*float64(s.SeqLen*s.SeqLen)*float64(o.Heads*o.HeadDim)
	// The backward recomputes the LM head's logits chunk by chunk rather
	// than keep them (a vocabulary row per response token): one more head
	// forward.
	matrices += 2 * float64(o.Hidden*o.Vocab) * float64(s.Batch*s.ResponseTokens)
	for _, prec := range []Precision{BF16, FP32} {
		sp, err := ProfileTrainStep(NewBackend(testDevice(t), prec), s)
		if err != nil {
			t.Fatal(err)
		}
		p := sp.Step
		tc, fp := p.FlopsTensorCore(), p.Flops[EngineFP32GEMM]
		gemm := tc + fp
		if math.Abs(gemm-matrices) > 1e-9*matrices {
			t.Errorf("%s: GEMM flops %g, model's matrices %g", prec, gemm, matrices)
		}
		if prec == BF16 && fp != 0 || prec == FP32 && tc != 0 {
			t.Errorf("%s: tensor-core %g, fp32 GEMM %g flops", prec, tc, fp)
		}
		if got := p.Flops[EngineAttention]; math.Abs(got-attn) > 1e-9*attn {
			t.Errorf("%s: attention flops %g, want %g", prec, got, attn)
		}
		t.Logf("%s: tensor-core fraction %.3f, est %.3f ms on an H100", prec, p.TensorCoreFraction(), 1e3*p.EstSeconds(H100))
	}
}
