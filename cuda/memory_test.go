package cuda

// The allocator under a model's work: a steady-state step allocates
// nothing and leaves nothing behind, released tensors refuse use, and a
// leaked block returns to the pool only at a synchronisation.

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/sampler"
)

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
			o := model.DefaultTiny()
			o.Layers, o.Vocab = 2, 300 // the step profile tests' tiny shape
			cfg, err := o.Config()
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
// last use (a temporary argument) and allocate before its last read of it:
// a block handed out again at once would let a widened copy overwrite the
// op's own input (as TestAttentionHalf does under frequent collection).
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

// optimizerStep is the trainer's update on one micro-batch (the step
// profile's, tools/profile/step.go, which this package's tests cannot import): gradients
// zeroed, forward, a token-mean loss's ∂/∂log π (host side, as the GRPO
// loss is), backward, clipping, AdamW.
func optimizerStep(m *model.Model, seqs []model.Sequence, grads *model.Params, opt *optim.AdamW) error {
	optim.ZeroGrads(m.B, m.Cfg, grads)
	pass, err := m.Forward(seqs)
	if err != nil {
		return err
	}
	total := 0
	for _, lp := range pass.LogProbs {
		total += len(lp)
	}
	dl := make([][]float32, len(pass.LogProbs))
	for i, lp := range pass.LogProbs {
		dl[i] = make([]float32, len(lp))
		for j := range dl[i] {
			dl[i][j] = -1 / float32(total)
		}
	}
	if err := m.Backward(pass, dl, grads); err != nil {
		return err
	}
	if _, err := optim.ClipGradNorm(m.B, m.Cfg, grads, 1); err != nil {
		return err
	}
	if err := opt.Update(m.B, m.Cfg, m.P, grads, 1e-6); err != nil {
		return err
	}
	return m.B.Err()
}
