package cuda

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/internal/bench"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// profileShape is a small model whose step the emulator computes quickly.
func profileShape(layers int) bench.Shape {
	o := model.DefaultTiny()
	o.Layers, o.Vocab = layers, 300
	return bench.Shape{Name: "tiny", Opts: o, Batch: 2, SeqLen: 48, ResponseTokens: 40}
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
// the model's matrix arithmetic (bench.TrainFLOPs less attention, plus the
// head's recomputation), all on tensor cores in bf16 and none in fp32.
// Attention through the kernels is 14·D per causal pair and head per layer
// (forward 4·D, backward 10·D) on CUDA cores; through the tensor-core
// products it is the same 14·D over the whole T×T rectangle, on the
// product engine.
func TestProfileCountsArithmetic(t *testing.T) {
	s := profileShape(2)
	o := s.Opts
	HD, L, B, T := float64(o.HeadDim*o.Heads), float64(o.Layers), float64(s.Batch), float64(s.SeqLen)
	causal := B * T * (T + 1) / 2
	kernelAttn := 14 * HD * causal * L
	productAttn := 14 * HD * B * T * T * L
	// TrainFLOPs counts attention as 3 × 2·T²·HD (T² over two for QKᵀ
	// and PV each); the rest is the matrices.
	matrices := bench.TrainFLOPs(s) - 3*L*B*2*T*T*HD
	// The backward recomputes the LM head's logits chunk by chunk rather
	// than keep them (a vocabulary row per response token): one more head
	// forward.
	matrices += 2 * float64(o.Hidden*o.Vocab) * float64(s.Batch*s.ResponseTokens)
	for _, prec := range []Precision{BF16, FP32} {
		for _, route := range []int{-1, 1} {
			b := NewBackend(testDevice(t), prec)
			b.attnGEMM = route
			sp, err := ProfileTrainStep(b, s)
			if err != nil {
				t.Fatal(err)
			}
			p := sp.Step
			tc, fp := p.FlopsTensorCore(), p.Flops[EngineFP32GEMM]
			wantGEMM, wantAttn := matrices, kernelAttn
			if route > 0 {
				wantGEMM, wantAttn = matrices+productAttn, 0
			}
			if gemm := tc + fp; math.Abs(gemm-wantGEMM) > 1e-9*wantGEMM {
				t.Errorf("%s route %d: GEMM flops %g, want %g", prec, route, gemm, wantGEMM)
			}
			if prec == BF16 && fp != 0 || prec == FP32 && tc != 0 {
				t.Errorf("%s route %d: tensor-core %g, fp32 GEMM %g flops", prec, route, tc, fp)
			}
			if got := p.Flops[EngineAttention]; math.Abs(got-wantAttn) > 1e-9*wantAttn {
				t.Errorf("%s route %d: attention-kernel flops %g, want %g", prec, route, got, wantAttn)
			}
			t.Logf("%s route %d: tensor-core fraction %.3f, est %.3f ms on an H100", prec, route, p.TensorCoreFraction(), 1e3*p.EstSeconds(H100))
		}
	}
}

// TestSteadyStateMemory: after a first optimizer step has filled the pool,
// a step asks cuMemAlloc for nothing and leaves no buffer behind; so do a
// forward-only pass (old and reference log-probs) and a sampled
// generation, on both attention routes and with recomputation. Any
// temporary the model or backend forgets to release shows up as a live
// buffer added (and a use after release as an error).
func TestSteadyStateMemory(t *testing.T) {
	for _, c := range []struct {
		name      string
		route     int
		recompute bool
	}{{"kernels", -1, false}, {"cuBLAS attention", 1, false}, {"fused attention", 0, false}, {"recompute", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBackend(testDevice(t), BF16)
			b.attnGEMM = c.route
			if c.route != 0 {
				b.attnFlash = -1
			}
			s := profileShape(2)
			cfg, err := s.Opts.Config()
			if err != nil {
				t.Fatal(err)
			}
			m := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 1, cfg.InitializerRange, 0), Recompute: c.recompute}
			if c.route == 0 { // as the trainer does: the products read bf16 weight copies
				if _, err := m.ShadowWeights(); err != nil {
					t.Fatal(err)
				}
			}
			grads := model.NewParams(b, cfg)
			opt := optim.NewAdamW(b, cfg, optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
			seqs := []model.Sequence{{Tokens: make([]int32, 40), Start: 10}, {Tokens: make([]int32, 33), Start: 5}}
			for i := range seqs {
				for j := range seqs[i].Tokens {
					seqs[i].Tokens[j] = int32((7*i + 13*j) % cfg.VocabSize)
				}
			}
			work := func() error {
				if err := optimizerStep(m, seqs, grads, opt); err != nil {
					return err
				}
				p, err := m.Forward(seqs)
				if err != nil {
					return err
				}
				p.Release()
				reqs := []sampler.Request{{UID: "a", Prompt: []int32{1, 2, 3}, N: 2}, {UID: "b", Prompt: []int32{4, 5}, N: 1}}
				_, err = sampler.Generate(t.Context(), m, reqs, sampler.Params{Temperature: 1, TopP: 1, MaxNewTokens: 6, MaxSlots: 4}, nil)
				return err
			}
			if err := work(); err != nil {
				t.Fatal(err)
			}
			before := b.Device().Profile()
			if err := work(); err != nil {
				t.Fatal(err)
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			// Tensors other tests dropped (they share the device) may come
			// back through the garbage collector meanwhile: each lowers
			// the live count by one and raises the leak count by one, so
			// live + leaked counts what this step left behind either way.
			d := b.Device().Profile().Sub(before)
			if d.DeviceAllocs != 0 || d.LiveBuffers+d.Leaked != 0 {
				t.Errorf("second step: %d device allocations, %d buffers left live, %d returned by the garbage collector; want 0 and 0 in all",
					d.DeviceAllocs, d.LiveBuffers, d.Leaked)
			}
		})
	}
}

// TestReleaseErrors: a released tensor cannot be used or released again,
// and the error names the op.
func TestReleaseErrors(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	x := b.New(4)
	b.Release(x)
	b.Scale(x, 2)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "scale: tensor argument 0 [4] was released") {
		t.Errorf("use after release: got %v", err)
	}
	b.ResetErr()
	b.Release(x)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "already released") {
		t.Errorf("double release: got %v", err)
	}
	b.ResetErr()
}

// TestLeakedBlockWaitsForSync: a tensor the garbage collector finds
// unreleased gives its block back only at the next synchronisation, not
// at once: an op may still hold the block's raw address after the tensor's
// last use (a temporary argument) and allocate before its last read of it,
// which on the old behaviour let a widened copy overwrite the op's own
// input (TestAttentionHalf failed under frequent collection).
func TestLeakedBlockWaitsForSync(t *testing.T) {
	d := testDevice(t)
	b := NewBackend(d, FP32)
	const n = 12345 // a size no other test's buffers round to
	addr := func() uint64 {
		x := b.New(n)
		p := x.Store.(*buffer).ptr
		return p
	}
	before := d.MemStats().Leaked
	leaked := addr() // its tensor is garbage once addr returns
	for deadline := time.Now().Add(10 * time.Second); d.MemStats().Leaked == before; {
		if time.Now().After(deadline) {
			t.Skip("the collector did not run the finalizer in time")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	x := b.New(n)
	if p := x.Store.(*buffer).ptr; p == leaked {
		t.Fatal("a leaked block was handed out again before a synchronisation")
	}
	b.Release(x)
	if err := d.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	var held []*model.Tensor
	for range 2 { // x's block and the leaked one are both free now
		y := b.New(n)
		got[y.Store.(*buffer).ptr] = true
		held = append(held, y)
	}
	if !got[leaked] {
		t.Error("the leaked block did not return to the pool at the synchronisation")
	}
	b.Release(held...)
}

// TestProfileFlashRoute: under bf16 products the automatic route is the
// fused tensor-core attention: its arithmetic is counted on the tensor
// cores (18·D per visited pair and head: 4·D forward, 6·D for dq, 8·D for
// dk and dv), none on CUDA cores or in cuBLAS, and the products left in
// cuBLAS are the model's matrices alone.
func TestProfileFlashRoute(t *testing.T) {
	s := profileShape(2)
	o := s.Opts
	b := NewBackend(testDevice(t), BF16)
	sp, err := ProfileTrainStep(b, s)
	if err != nil {
		t.Fatal(err)
	}
	p := sp.Step
	L, HD := float64(o.Layers), float64(o.Heads*o.HeadDim)
	// One segment of 48 tokens: one query tile of 64 rows visiting one
	// key tile (forward, 64 keys) or two (dq, 32 keys each: 64 keys);
	// the dk/dv kernel visits the same pairs.
	pairs := float64(s.Batch) * 64 * 64
	want := 18 * HD * pairs * L
	if got := p.Flops[EngineFlash]; math.Abs(got-want) > 1e-9*want {
		t.Errorf("fused attention flops %g, want %g", got, want)
	}
	if p.Flops[EngineAttention] != 0 || p.Flops[EngineFP32GEMM] != 0 {
		t.Errorf("CUDA-core attention %g, fp32 GEMM %g flops; want 0", p.Flops[EngineAttention], p.Flops[EngineFP32GEMM])
	}
	matrices := bench.TrainFLOPs(s) - 3*L*float64(s.Batch)*2*float64(s.SeqLen*s.SeqLen)*HD +
		2*float64(o.Hidden*o.Vocab)*float64(s.Batch*s.ResponseTokens)
	if got := p.Flops[EngineTensorBF16]; math.Abs(got-matrices) > 1e-9*matrices {
		t.Errorf("cuBLAS flops %g, want the matrices' %g", got, matrices)
	}
}

// TestDecodeProfile: a steady-state decode step waits on the host twice
// (the chunk sums, then every row's chunk in one download) when issued
// eagerly, and once as a graph replay, which is one graph launch and no
// other launch; either allocates nothing, leaves nothing behind, reads at
// least its bandwidth bound, and reports the keys bench --profile --json
// promises.
func TestDecodeProfile(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	o := model.DefaultTiny()
	o.Layers, o.Vocab = 3, 3000
	for _, graphs := range []bool{false, true} {
		dp, err := ProfileDecodeStep(b, DecodeShape{Name: "tiny", Opts: o, Batch: 5, Context: 40, Graphs: graphs})
		if err != nil {
			t.Fatal(err)
		}
		p := dp.Step
		wantSyncs := int64(2)
		if graphs {
			wantSyncs = 1
		}
		if p.HostSyncs != wantSyncs || p.DeviceAllocs != 0 || p.LiveBuffers+p.Leaked != 0 {
			t.Errorf("graphs %v: %d host syncs (want %d), %d device allocations, %d buffers left, %d leaked",
				graphs, p.HostSyncs, wantSyncs, p.DeviceAllocs, p.LiveBuffers, p.Leaked)
		}
		other := p.Launches + p.GEMMs + p.Memsets
		if graphs && (p.GraphLaunches != 1 || other != 0 || p.GraphNodes == 0) {
			t.Errorf("graph step: %d graph launches of %d nodes and %d other launches, want 1 launch and no other", p.GraphLaunches, p.GraphNodes, other)
		}
		if !graphs && p.GraphLaunches != 0 {
			t.Errorf("eager step: %d graph launches", p.GraphLaunches)
		}
		var bytes float64
		for _, x := range p.Bytes {
			bytes += x
		}
		if bytes < dp.BoundBytes {
			t.Errorf("graphs %v: decode step counts %.0f bytes, below its bound %.0f (bf16 weights + live KV)", graphs, bytes, dp.BoundBytes)
		}
		j := dp.JSON(H100)
		for _, k := range []string{"decode_batch", "context", "launches_per_step", "graph_launches_per_step", "host_syncs_per_step",
			"bytes_per_step", "est_tok_s", "est_fraction_of_bound"} {
			if _, ok := j[k]; !ok {
				t.Errorf("JSON lacks %q", k)
			}
		}
		if f := j["est_fraction_of_bound"].(float64); !(f > 0 && f <= 1) {
			t.Errorf("est_fraction_of_bound %v outside (0, 1]", f)
		}
		t.Logf("tiny decode step, graphs %v: %d launches (%d graph launches of %d nodes), %d GEMMs, %d host syncs, %.0f bytes (bound %.0f), est %.1f%% of the bound",
			graphs, j["launches_per_step"], p.GraphLaunches, p.GraphNodes, p.GEMMs, p.HostSyncs, bytes, dp.BoundBytes, 100*j["est_fraction_of_bound"].(float64))
	}
}
