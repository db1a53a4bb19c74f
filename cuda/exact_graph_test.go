package cuda

// Decode graphs in exact mode (precision.exact_logprobs, docs/algorithm.md
// §5.10): a graphed step draws on the device, then LogSoftmaxGatherDrawn
// reads the drawn tokens where they lie and gives each row the log-prob and
// entropy LogSoftmaxGather computes, inside the graph.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// TestLogSoftmaxGatherDrawn: the targets read from a draw's output on the
// device give LogSoftmaxGather's log-probs, log-sum-exps and entropies on
// the same tokens given from the host, bit for bit, for several row
// counts (1 to 64), with the tokens SampleTokens drew and with tokens written beside
// NaN log-probs (only the token column is read); a target outside the
// vocabulary gives a NaN log-prob, a draw tensor of the wrong size an
// error.
func TestLogSoftmaxGatherDrawn(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	const V = 1000
	rnd := rand.New(rand.NewPCG(46, 1))
	for _, R := range []int{1, 3, 17, 64} {
		host := make([]float32, R*V)
		for i := range host {
			host[i] = float32(rnd.NormFloat64() * 4)
		}
		logits := model.NewFrom(b, host, R, V)
		drawn := b.New(R, 2)
		draws := make([]model.Draw, R)
		for r := range draws {
			draws[r] = model.Draw{Key: rng.Key(uint64(R), uint64(r)), Counter: 3}
		}
		b.SampleTokens(drawn, logits, draws, model.SampleParams{Temperature: 0.8, TopK: 40, TopP: 0.9})
		words := make([]float32, 2*R)
		b.Download(drawn, words)
		sampled := make([]int32, R)
		for r := range sampled {
			sampled[r] = int32(math.Float32bits(words[2*r]))
		}
		// Written by the host: every id's neighbourhood, NaN beside it.
		chosen := make([]int32, R)
		table := make([]float32, 2*R)
		for r := range chosen {
			chosen[r] = int32((r*389 + R) % V)
			table[2*r], table[2*r+1] = math.Float32frombits(uint32(chosen[r])), float32(math.NaN())
		}
		written := model.NewFrom(b, table, R, 2)
		for _, c := range []struct {
			name    string
			drawn   *model.Tensor
			targets []int32
		}{{"sampled", drawn, sampled}, {"written", written, chosen}} {
			got, want := b.New(3*R), b.New(3*R)
			vec := func(t *model.Tensor, k int) *model.Tensor { return t.Rows(k*R, (k+1)*R) }
			b.LogSoftmaxGatherDrawn(vec(got, 0), vec(got, 1), vec(got, 2), logits, c.drawn)
			b.LogSoftmaxGather(vec(want, 0), vec(want, 1), vec(want, 2), logits, c.targets)
			g, w := make([]float32, 3*R), make([]float32, 3*R)
			b.Download(got, g)
			b.Download(want, w)
			if err := b.Err(); err != nil {
				t.Fatalf("%d rows, %s: %v", R, c.name, err)
			}
			for i := range g {
				if math.Float32bits(g[i]) != math.Float32bits(w[i]) || math.IsNaN(float64(g[i])) {
					t.Fatalf("%d rows, %s: %s of row %d: %v from the device's targets, %v from the host's",
						R, c.name, []string{"log-prob", "log-sum-exp", "entropy"}[i/R], i%R, g[i], w[i])
				}
			}
			b.Release(got, want)
		}
		b.Release(logits, drawn, written)
	}

	// A target outside [0, V): NaN, not a read past the row.
	logits := model.NewFrom(b, make([]float32, 2*V), 2, V)
	bad := model.NewFrom(b, []float32{math.Float32frombits(V), 0, math.Float32frombits(5), 0}, 2, 2)
	out := b.New(3 * 2)
	b.LogSoftmaxGatherDrawn(out.Rows(0, 2), out.Rows(2, 4), nil, logits, bad)
	lp := make([]float32, 6)
	b.Download(out, lp)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	if want := float32(-math.Log(V)); !math.IsNaN(float64(lp[0])) || math.Abs(float64(lp[1]-want)) > 1e-5 {
		t.Errorf("targets %d and 5 of uniform rows: log-probs %v, want NaN and %v", V, lp[:2], want)
	}
	b.LogSoftmaxGatherDrawn(out.Rows(0, 2), out.Rows(2, 4), nil, logits, b.New(3, 2))
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "drawn") {
		t.Errorf("a draw of 3 rows for 2 rows of logits: error %v", err)
	}
	b.ResetErr()
}

// TestExactDecodeGraphSteps: with exact log-probs a graphed decode step
// returns each row's entropy beside its log-prob, the replayed graphs
// (counted per bucket by DecodeGraph.Steps, over several buckets) give the
// tokens, log-probs and entropies of the same steps run eagerly bit for
// bit, and the log-probs are not the draw's (tempered, filtered) ones.
func TestExactDecodeGraphSteps(t *testing.T) {
	exactSplitTest = 16 // decode steps of a block per split, their count the graph's
	t.Cleanup(func() { exactSplitTest = 0 })
	o := model.DefaultTiny()
	o.Vocab = 1000
	m := graphModel(t, o)
	b := m.B.(*Backend)
	b.SetBatchInvariant(true)
	defer b.SetBatchInvariant(false)
	d := b.Device()
	p := model.SampleParams{Temperature: 0.7, TopK: 20, TopP: 0.9, ExactLogProbs: true}
	want := runDecode(t, m, 6, p, true)
	p0 := d.Profile()
	got := runDecode(t, m, 6, p, false)
	prof := d.Profile().Sub(p0)
	tempered := runDecode(t, m, 6, model.SampleParams{Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP}, false)
	n, same := 0, 0
	for r := range want.tokens {
		if fmt.Sprint(got.tokens[r]) != fmt.Sprint(want.tokens[r]) || fmt.Sprint(tempered.tokens[r]) != fmt.Sprint(want.tokens[r]) {
			t.Fatalf("row %d: graphed %v, eager %v, without exact log-probs %v", r, got.tokens[r], want.tokens[r], tempered.tokens[r])
		}
		for k := range want.lps[r] {
			if math.Float32bits(got.lps[r][k]) != math.Float32bits(want.lps[r][k]) ||
				math.Float32bits(got.ents[r][k]) != math.Float32bits(want.ents[r][k]) {
				t.Fatalf("row %d token %d: graphed log-prob %v entropy %v, eager %v %v", r, k, got.lps[r][k], got.ents[r][k],
					want.lps[r][k], want.ents[r][k])
			}
			if !(got.ents[r][k] > 0) || !(got.lps[r][k] <= 0) {
				t.Fatalf("row %d token %d: log-prob %v, entropy %v", r, k, got.lps[r][k], got.ents[r][k])
			}
			if got.lps[r][k] == tempered.lps[r][k] {
				same++
			}
		}
		n += len(want.lps[r])
	}
	steps := got.checkReplays(t, n, prof.GraphLaunches)
	if same*2 > n {
		t.Errorf("%d of %d exact log-probs equal the draw's tempered ones", same, n)
	}
	t.Logf("%d tokens, %d steps in buckets %v, %d graph launches", n, steps, got.steps, prof.GraphLaunches)
}

// TestExactGenerateGraphs: sampler.Generate with exact log-probs gives the
// same tokens, log-probs and entropies, bit for bit, with decode graphs
// and without (eager steps, LogSoftmaxGather on the host's targets), over
// a plain and a paged cache, with sequences joining and leaving and steps
// of a block per attention split; the graphs ran; and every log-prob and
// entropy equals the training forward's over the packed rows, whatever the
// micro-batch. No attention forward but the tensor-core exact kernels
// runs (checkExactAttention: a graph's eager warm-up and capture counted),
// and splits of 16 keys put the decode steps on the split launch and its
// combine, whose split count under a graph is the cache's.
func TestExactGenerateGraphs(t *testing.T) {
	t.Setenv("GDROTRAIN_EMU_VMM_GRANULARITY", "4096")
	exactSplitTest = 16
	t.Cleanup(func() { exactSplitTest = 0 })
	m := pagedModel(t)
	m.ExactKV = true
	b := m.B.(*Backend)
	b.SetBatchInvariant(true)
	defer b.SetBatchInvariant(false)
	d := b.Device()
	reqs := []sampler.Request{{UID: "a", Prompt: []int32{5, 17, 42}, N: 3}, {UID: "b", Prompt: []int32{8, 1}, N: 2},
		{UID: "c", Prompt: []int32{9}, N: 4}, {UID: "d", Prompt: []int32{300, 301, 302, 303}, N: 2}}
	p := sampler.Params{Temperature: 0.6, TopK: 20, TopP: 0.8, MaxNewTokens: 24, Seed: 5, Step: 2, StopIDs: []int32{999, 7},
		MaxSlots: 4, ExactLogProbs: true}
	type result struct {
		out   [][]sampler.Completion
		stats sampler.Stats
	}
	var runs []result
	for _, c := range []struct {
		graphs bool
		pages  int64
	}{{false, 0}, {true, 0}, {true, 8}} {
		name := fmt.Sprintf("graphs %v, %d pages", c.graphs, c.pages)
		q := p
		q.Graphs = c.graphs
		q.KVBudgetBytes = c.pages * b.KVPageBytes() * int64(2*m.Cfg.NumHiddenLayers)
		before, launches := d.Profile().GraphLaunches, d.Launches()
		out, st, err := sampler.GenerateStats(context.Background(), m, reqs, q, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if launched := d.Profile().GraphLaunches - before; (launched > 0) != c.graphs {
			t.Fatalf("%s: %d graph launches", name, launched)
		}
		n := checkExactAttention(t, name, d, launches)
		checkExactProducts(t, name, b, launches)
		t.Logf("%s: %d steps, %d pre-emptions, %d exact attention launches", name, st.Steps, st.Preemptions, n)
		runs = append(runs, result{out, st})
	}
	want := runs[0].out
	var seqs []model.Sequence
	var lps, ents [][]float32
	for i, comps := range want {
		for k, w := range comps {
			if len(w.LogProbs) != len(w.Tokens) || len(w.Entropy) != len(w.Tokens) {
				t.Fatalf("%s/%d: %d tokens, %d log-probs, %d entropies", w.UID, w.Index, len(w.Tokens), len(w.LogProbs), len(w.Entropy))
			}
			for _, r := range runs[1:] {
				g := r.out[i][k]
				if fmt.Sprint(g.Tokens, g.Stopped, bitsOf(g.LogProbs), bitsOf(g.Entropy)) != fmt.Sprint(w.Tokens, w.Stopped, bitsOf(w.LogProbs), bitsOf(w.Entropy)) {
					t.Errorf("%s/%d: graphed %v %v %v, eager %v %v %v", w.UID, w.Index, g.Tokens, g.LogProbs, g.Entropy, w.Tokens, w.LogProbs, w.Entropy)
				}
			}
			seqs = append(seqs, model.Sequence{Tokens: append(append([]int32(nil), reqs[i].Prompt...), w.Tokens...), Start: len(reqs[i].Prompt)})
			lps, ents = append(lps, w.LogProbs), append(ents, w.Entropy)
		}
	}
	launches := d.Launches()
	for _, mb := range []int{1, 5, len(seqs)} {
		for lo := 0; lo < len(seqs); lo += mb {
			pass, err := m.Forward(seqs[lo:min(lo+mb, len(seqs))])
			if err != nil {
				t.Fatal(err)
			}
			for i := range pass.LogProbs {
				if fmt.Sprint(bitsOf(pass.LogProbs[i]), bitsOf(pass.Entropy[i])) != fmt.Sprint(bitsOf(lps[lo+i]), bitsOf(ents[lo+i])) {
					t.Errorf("micro-batch %d, rollout %d: training log-probs %v entropies %v, sampler's %v %v", mb, lo+i,
						pass.LogProbs[i], pass.Entropy[i], lps[lo+i], ents[lo+i])
				}
			}
			pass.Release()
		}
	}
	checkExactProducts(t, "training forwards", b, launches)
}

// bitsOf is xs's bit patterns (NaN and −0 compared as bits).
func bitsOf(xs []float32) []uint32 {
	out := make([]uint32, len(xs))
	for i, x := range xs {
		out[i] = math.Float32bits(x)
	}
	return out
}

// checkExactProducts checks the exact tensor-core products launched since
// before (d.Launches()): one family alone, at least one launch, the
// warpgroup-MMA kernels (gemm_exact_wg*) where b routes there (on a device
// with the sm_90a kernels, the default: TestExactWGMMARoute), never then an
// mma.sync one (gemm_exact_mma*), since nothing promises the two round a
// k-step alike and a run mixing them could give a row different bits in
// decode and in training; elsewhere the mma.sync ones alone.
func checkExactProducts(t *testing.T, name string, b *Backend, before map[string]int) {
	t.Helper()
	want, never := "gemm_exact_mma", "gemm_exact_wg"
	if b.exactWGMMA() {
		want, never = never, want
	}
	n := 0
	for k, c := range b.d.Launches() {
		switch {
		case c == before[k]:
		case strings.HasPrefix(k, never):
			t.Errorf("%s: %s launched %d times on sm_%d%d (sm_90a kernels %v); want %s* only", name, k, c-before[k],
				b.d.Info.Major, b.d.Info.Minor, b.d.Info.HasWGMMA(), want)
		case strings.HasPrefix(k, want):
			n += c - before[k]
		}
	}
	if n == 0 {
		t.Errorf("%s: no %s* product launched", name, want)
	}
}

// TestExactWGMMARoute: exact bf16 products take the warpgroup-MMA kernels
// on every device with the sm_90a kernels (compute capability 9.0, CUBIN),
// whatever the product, unless GDROTRAIN_EXACT_WGMMA=0 (read when the
// backend is made) or the FFMA route is forced; nowhere else.
func TestExactWGMMARoute(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		ptx, off     bool
		noMMA        bool
		want         bool
	}{
		{major: 9, want: true},
		{major: 9, off: true},
		{major: 9, ptx: true},
		{major: 9, noMMA: true},
		{major: 8},
		{major: 8, minor: 9},
		{major: 10},
		{major: 12},
	} {
		env := ""
		if c.off {
			env = "0"
		}
		t.Setenv(ExactWGMMAEnv, env)
		b := NewBackend(&Device{Info: Info{Major: c.major, Minor: c.minor, KernelsPTX: c.ptx}}, BF16)
		b.exactNoMMA = c.noMMA
		if got := b.exactWGMMA(); got != c.want {
			t.Errorf("sm_%d%d PTX %v, %s=%q, FFMA forced %v: warpgroup-MMA products %v, want %v", c.major, c.minor, c.ptx,
				ExactWGMMAEnv, env, c.noMMA, got, c.want)
		}
	}
}
