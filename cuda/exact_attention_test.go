package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// exactCase is one table row of TestExactAttentionInvariant.
type exactCase struct {
	name    string
	H, G, D int
	cache   string // "f32", "bf16" or "fp8"
	paged   bool
	exact   bool // off: the companion case, which must find a difference
	halfQ   bool // q and out bf16 activations (a bf16-products backend)
	bf16    bool // a bf16-products backend: the tensor-core kernels (attn_exact_tc*) where D allows
	oneSM   bool // the device taken for one SM: decode steps fold their splits in the block, no combine
}

// exactSeqs are the sequences' lengths: across the 16-key tiles, and
// enough of them for batches of 8 with some joining late.
var exactSeqs = []int{5, 17, 1, 33, 9, 16, 24, 3, 70, 12}

// TestExactAttentionInvariant: in exact mode a token's attention output is
// the same bits whether a decode step computes it (from a KV cache,
// contiguous or paged, fp32, bf16 or fp8, in batches of 1, 3 and 8 with
// sequences joining and leaving, some prefilled several tokens at once) or
// one training-forward call over the packed sequences (its keys and values
// written to a scratch of the cache's format by the cache's own
// ScatterRows, as the model does in exact mode). With exact mode off the
// two routes differ (the companion case: the comparison can fail). The
// outputs stay within fp32Attn of the float64 CPU reference over the
// values the cache holds (the CUDA-core kernels), or within bf16's
// tolerance (the tensor-core kernels, which round q, k, v and the
// probabilities to bf16). Under bf16 products with D ≤ 128 the test fails
// unless the tensor-core kernels ran and the CUDA-core ones did not, and
// the step profile counted the work on their engine.
func TestExactAttentionInvariant(t *testing.T) {
	t.Setenv("GDROTRAIN_EMU_VMM_GRANULARITY", "4096")
	// Splits of 32 keys: windows of up to 70 keys meet three, decode steps
	// (few blocks) launch a block per split and attn_exact_combine, the
	// training call folds them in its blocks.
	exactSplitTest = 32
	t.Cleanup(func() { exactSplitTest = 0 })
	dev := testDevice(t)
	cases := []exactCase{
		{"fp32 cache, MHA", 2, 2, 16, "f32", false, true, false, false, false},
		{"bf16 cache, GQA 2", 4, 2, 32, "bf16", false, true, false, false, false},
		{"bf16 paged cache, GQA 3", 6, 2, 16, "bf16", true, true, false, false, false},
		{"fp8 cache, GQA 4", 4, 1, 32, "fp8", false, true, false, false, false},
		{"fp8 paged cache, GQA 2", 4, 2, 16, "fp8", true, true, false, false, false},
		{"bf16 cache, D 128, GQA 5", 5, 1, 128, "bf16", false, true, false, false, false},
		{"fp32 cache, D 18 (element loads), GQA 3", 3, 1, 18, "f32", false, true, false, false, false},
		{"bf16 queries and outputs, fp8 cache, D 160 (CUDA cores under bf16 products), GQA 2", 4, 2, 160, "fp8", false, true, true, false, false},
		{"exact off: bf16 cache, GQA 2", 4, 2, 32, "bf16", false, false, false, false, false},
		// bf16 products: the tensor-core kernels.
		{"tc: fp32 cache, MHA", 2, 2, 16, "f32", false, true, false, true, false},
		{"tc: bf16 cache, GQA 2", 4, 2, 32, "bf16", false, true, false, true, false},
		{"tc: bf16 paged cache, GQA 3", 6, 2, 16, "bf16", true, true, false, true, false},
		{"tc: fp8 cache, GQA 4", 4, 1, 32, "fp8", false, true, false, true, false},
		{"tc: fp8 paged cache, GQA 2", 4, 2, 16, "fp8", true, true, false, true, false},
		{"tc: bf16 cache, D 128, GQA 2", 4, 2, 128, "bf16", false, true, false, true, false},
		{"tc: fp32 cache, D 18 (element loads, D padded to 32), GQA 3", 3, 1, 18, "f32", false, true, false, true, false},
		{"tc: GQA 20 (two head chunks a decode step, 3 rows a training fragment)", 20, 1, 16, "bf16", false, true, false, true, false},
		{"tc: bf16 queries and outputs, fp8 cache, GQA 2", 4, 2, 32, "fp8", false, true, true, true, false},
		{"tc: bf16 queries and outputs, bf16 paged cache, GQA 3", 6, 2, 16, "bf16", true, true, true, true, false},
		{"tc: bf16 queries and outputs, fp32 cache, D 18", 3, 1, 18, "f32", false, true, true, true, false},
		{"tc: bf16 cache, GQA 2, decode splits folded in the block", 4, 2, 32, "bf16", false, true, false, true, true},
		{"bf16 products, D 160: the CUDA-core kernels", 2, 1, 160, "bf16", false, true, false, true, false},
		{"exact off, bf16 products: bf16 cache, GQA 2", 4, 2, 32, "bf16", false, false, false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prec := FP32
			if c.halfQ || c.bf16 {
				prec = BF16
			}
			b := NewBackend(dev, prec)
			b.SetBatchInvariant(c.exact)
			if c.oneSM {
				sms := dev.Info.SMs
				dev.Info.SMs = 1
				t.Cleanup(func() { dev.Info.SMs = sms })
			}
			tc := prec == BF16 && c.D <= exTCDMax
			if tc && dev.Info.Major < 8 {
				t.Skipf("sm_%d%d: no mma.sync, exact attention stays on CUDA cores", dev.Info.Major, dev.Info.Minor)
			}
			rng := rand.New(rand.NewPCG(46, uint64(c.H*1000+c.D)))
			seqs := exactData(rng, c)
			ran, absent := exactKernels(c, tc)
			before, pBefore := dev.Launches(), dev.Profile()
			dec := exactDecode(t, b, c, seqs)
			train := exactTrain(t, b, c, seqs)
			if !backendErrs(t, c.name, b) {
				return
			}
			for _, k := range absent {
				if dev.Launches()[k] > before[k] {
					t.Errorf("%s launched: exact mode under these products must take the other kernels", k)
				}
			}
			if p := dev.Profile().Sub(pBefore); c.exact && (p.Flops[EngineExactAttn] > 0) != tc {
				t.Errorf("tensor-core kernels %v, but the profile counted %.3g flops on %s (%.3g on %s)", tc,
					p.Flops[EngineExactAttn], EngineExactAttn, p.Flops[EngineAttention], EngineAttention)
			}
			kernels := ran
			differ := 0
			for i := range dec {
				if math.Float32bits(dec[i]) != math.Float32bits(train[i]) {
					differ++
				}
			}
			for _, k := range kernels {
				if ran := dev.Launches()[k] > before[k]; ran != c.exact {
					t.Errorf("exact mode %v: %s launched %v", c.exact, k, ran)
				}
			}
			if c.exact && differ > 0 {
				t.Errorf("%d of %d output elements differ between decode and training", differ, len(dec))
			}
			if !c.exact && differ == 0 {
				t.Errorf("exact mode off: decode and training agree bit for bit; the comparison cannot tell")
			}
			t.Logf("%d of %d elements differ", differ, len(dec))
			if c.exact {
				tol := fp32Attn
				switch {
				case tc: // q, k, v and P rounded to bf16 (observed: max |err| 0.011 against outputs up to ≈ 1)
					tol = numcheck.Tol{Atol: 2e-2, Rtol: 1e-2}
				case c.halfQ: // the output rounded to bf16
					tol = numcheck.Tol{Atol: 1e-2, Rtol: 1e-2}
				}
				st := compareTo(t, c.name+" against the CPU", train, exactReference(c, seqs), tol)
				t.Logf("against the CPU: max |err| %.2g", st.MaxAbs)
			}
		})
	}
}

// exactKernels are the kernels a case of TestExactAttentionInvariant
// must launch (with exact mode on; none of them with it off) and those it
// must not: decode steps take the one-row kernel (_s) where D allows, with
// the combine after a block per split unless the device's SMs are few
// enough for whole windows, prefills and the training call the large
// kernel; tc, the tensor-core ones, and then none of the CUDA-core ones.
func exactKernels(c exactCase, tc bool) (ran, absent []string) {
	suffix := map[string]string{"f32": "", "bf16": "_kvh", "fp8": "_kv8"}[c.cache]
	if c.halfQ {
		suffix = "_h" + suffix
	}
	combine := "attn_exact_combine"
	if c.halfQ {
		combine += "_h"
	}
	cuda := []string{"attn_exact" + suffix}
	if c.D <= exSmallD {
		cuda = append(cuda, "attn_exact_s"+suffix)
	}
	if !tc {
		ran = cuda
		if c.D <= exSmallD && !c.oneSM {
			ran = append(ran, combine)
		}
		return ran, nil
	}
	ran = []string{"attn_exact_tc" + suffix, "attn_exact_tc_s" + suffix}
	if c.oneSM {
		return ran, append(cuda, combine)
	}
	return append(ran, combine), cuda
}

// exactSeq is one sequence's per-token queries, keys and values (fp32, as
// the model's SplitQKV writes them).
type exactSeq struct{ q, k, v []float32 }

func exactData(rng *rand.Rand, c exactCase) []exactSeq {
	var out []exactSeq
	for _, n := range exactSeqs {
		out = append(out, exactSeq{
			q: roundedRandn(rng, n*c.H*c.D, 1, c.halfQ),
			k: roundedRandn(rng, n*c.G*c.D, 1, false),
			v: roundedRandn(rng, n*c.G*c.D, 1, false),
		})
	}
	return out
}

// exactCache allocates a cache of rows rows in the case's format (paged:
// every page mapped), and a release function.
func exactCache(t *testing.T, b *Backend, c exactCase, rows int) (k, v *model.Tensor, release func()) {
	switch {
	case c.paged:
		newPaged := b.NewPagedKV
		if c.cache == "fp8" {
			newPaged = b.NewPagedFP8KV
		}
		page := b.KVPageBytes()
		ts, pm, err := newPaged(2, rows, c.G, c.D, page, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rowBytes := int64(2 * c.G * c.D)
		if c.cache == "fp8" {
			rowBytes = model.FP8KVRowBytes(c.G, c.D)
		}
		for p := 0; int64(p)*page < int64(rows)*rowBytes; p++ {
			if err := pm.Map(p); err != nil {
				t.Fatal(err)
			}
		}
		return ts[0], ts[1], pm.Release
	case c.cache == "fp8":
		k, v = b.NewFP8(rows, c.G, c.D), b.NewFP8(rows, c.G, c.D)
	case c.cache == "bf16":
		k, v = b.NewHalf(rows, c.G, c.D), b.NewHalf(rows, c.G, c.D)
	default:
		k, v = b.New(rows, c.G, c.D), b.New(rows, c.G, c.D)
	}
	return k, v, func() { b.Release(k, v) }
}

// exactDecode decodes the sequences through a cache of one slot per
// sequence: steps of 1, 3 and 8 sequences in turn, taking the unfinished
// ones round robin from a start that moves, so sequences join late and
// leave when done; every third sequence prefills up to 5 tokens at its
// first step. It returns the outputs in packed training order.
func exactDecode(t *testing.T, b *Backend, c exactCase, seqs []exactSeq) []float32 {
	maxLen := 0
	for _, n := range exactSeqs {
		maxLen = max(maxLen, n)
	}
	ck, cv, release := exactCache(t, b, c, len(seqs)*maxLen)
	defer release()
	HD, GD := c.H*c.D, c.G*c.D
	outs := make([][]float32, len(seqs))
	done := make([]int, len(seqs))
	for i := range seqs {
		outs[i] = make([]float32, exactSeqs[i]*HD)
	}
	sizes, start := []int{1, 3, 8}, 0
	for step := 0; ; step++ {
		var pick []int
		for j := 0; j < len(seqs) && len(pick) < sizes[step%len(sizes)]; j++ {
			if i := (start + j) % len(seqs); done[i] < exactSeqs[i] {
				pick = append(pick, i)
			}
		}
		if len(pick) == 0 {
			break
		}
		start += 2
		var q, k, v []float32
		var rows []int32
		var segs []model.Segment
		for _, i := range pick {
			n := 1
			if done[i] == 0 && i%3 == 0 {
				n = min(5, exactSeqs[i])
			}
			p := done[i]
			segs = append(segs, model.Segment{Q0: len(rows), QLen: n, K0: i * maxLen, KLen: p + n})
			for j := p; j < p+n; j++ {
				rows = append(rows, int32(i*maxLen+j))
			}
			q = append(q, seqs[i].q[p*HD:(p+n)*HD]...)
			k = append(k, seqs[i].k[p*GD:(p+n)*GD]...)
			v = append(v, seqs[i].v[p*GD:(p+n)*GD]...)
		}
		got := exactCall(b, c, q, k, v, rows, segs, ck, cv)
		off := 0
		for si, i := range pick {
			n := segs[si].QLen
			copy(outs[i][done[i]*HD:], got[off:off+n*HD])
			off += n * HD
			done[i] += n
		}
	}
	var flat []float32
	for _, o := range outs {
		flat = append(flat, o...)
	}
	return flat
}

// exactTrain runs the training forward's call: every sequence packed, its
// keys and values written by ScatterRows to a scratch of the cache's format.
func exactTrain(t *testing.T, b *Backend, c exactCase, seqs []exactSeq) []float32 {
	var q, k, v []float32
	var rows []int32
	var segs []model.Segment
	for i, s := range seqs {
		n := exactSeqs[i]
		segs = append(segs, model.Segment{Q0: len(rows), QLen: n, K0: len(rows), KLen: n})
		for range n {
			rows = append(rows, int32(len(rows)))
		}
		q, k, v = append(q, s.q...), append(k, s.k...), append(v, s.v...)
	}
	sk, sv, release := exactCache(t, b, c, len(rows))
	defer release()
	return exactCall(b, c, q, k, v, rows, segs, sk, sv)
}

// exactCall writes k, v to cache rows rows and runs Attention over the
// cache with queries q; it returns the outputs.
func exactCall(b *Backend, c exactCase, q, k, v []float32, rows []int32, segs []model.Segment, ck, cv *model.Tensor) []float32 {
	n, GD := len(rows), c.G*c.D
	Q, K, V := model.NewFrom(b, q, n, c.H, c.D), model.NewFrom(b, k, n, GD), model.NewFrom(b, v, n, GD)
	out, lse := b.New(n, c.H, c.D), b.New(n, c.H)
	if c.halfQ {
		b.Release(Q, out)
		Q, out = halfTensor(b, q, n, c.H, c.D), halfTensor(b, nil, n, c.H, c.D)
	}
	b.ScatterRows(ck.View(ck.Shape[0], GD), K, rows, false)
	b.ScatterRows(cv.View(cv.Shape[0], GD), V, rows, false)
	b.Attention(out, lse, Q, ck, cv, segs, float32(1/math.Sqrt(float64(c.D))))
	got := model.Values(b, out)
	b.Release(Q, K, V, out, lse)
	return got
}

// exactReference is the CPU's attention over the packed sequences, on the
// values the case's cache holds.
func exactReference(c exactCase, seqs []exactSeq) []float32 {
	ref := refBackend()
	var q, k, v []float32
	var segs []model.Segment
	n := 0
	for i, s := range seqs {
		L := exactSeqs[i]
		segs = append(segs, model.Segment{Q0: n, QLen: L, K0: n, KLen: L})
		n += L
		q = append(q, s.q...)
		k, v = append(k, held(c, s.k)...), append(v, held(c, s.v)...)
	}
	rq, rk, rv := model.NewFrom(ref, q, n, c.H, c.D), model.NewFrom(ref, k, n, c.G, c.D), model.NewFrom(ref, v, n, c.G, c.D)
	out, lse := ref.New(n, c.H, c.D), ref.New(n, c.H)
	ref.Attention(out, lse, rq, rk, rv, segs, float32(1/math.Sqrt(float64(c.D))))
	return model.Values(ref, out)
}

// held is x as the case's cache holds it.
func held(c exactCase, x []float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x); r += c.D {
		switch c.cache {
		case "bf16":
			for i := r; i < r+c.D; i++ {
				out[i] = bf16Round(x[i])
			}
		case "fp8":
			copy(out[r:], model.RoundTripE4M3(x[r:r+c.D]))
		default:
			copy(out[r:], x[r:r+c.D])
		}
	}
	return out
}

// TestExactKVTrainingForward: a tiny model in exact mode with a bf16 and
// an fp8 cache, under fp32 and bf16 products. With ExactKV the training forward's attention reads the
// keys and values as the cache holds them (written by the cache's own
// ScatterRows), so its log-probs meet the sampler's (decoded one token at
// a time after a prefill of 3) to the rounding of the ops around
// attention; without it they differ by the cache's rounding, which the
// test must see (so it can fail). The backward runs on the rounded keys
// and values.
func TestExactKVTrainingForward(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 300
	tokens := []int32{5, 17, 42, 99, 3, 250, 8, 11, 12, 13, 200, 201, 7, 77, 150, 151, 152, 9, 10, 299, 1, 2}
	for _, c := range []struct {
		prec  Precision
		cache string
	}{{FP32, "bf16"}, {FP32, "fp8"}, {BF16, "bf16"}, {BF16, "fp8"}} {
		cache := c.cache
		var gap [2]float64
		roundsAsCache := false // the tensor-core kernel rounds fp32 keys and values to bf16, as a bf16 cache holds them
		for i, exactKV := range []bool{false, true} {
			_, m := tinyPair(t, c.prec, o)
			if c.prec == BF16 {
				if _, err := m.ShadowWeights(); err != nil {
					t.Fatal(err)
				}
			}
			b := m.B.(*Backend)
			b.SetBatchInvariant(true)
			m.KVCacheBF16, m.KVCacheFP8, m.ExactKV = cache == "bf16", cache == "fp8", exactKV
			if err := m.CheckKVCache(); err != nil {
				t.Fatal(err)
			}
			dec := exactSampled(t, m, tokens)
			kernel := map[string]string{"bf16": "attn_exact_kvh", "fp8": "attn_exact_kv8"}[cache]
			if b.exactAttnTC(m.Cfg.HeadDim) {
				kernel = strings.Replace(kernel, "exact", "exact_tc", 1)
				roundsAsCache = cache == "bf16"
			}
			before := b.Device().Launches()[kernel]
			pass, err := m.Forward([]model.Sequence{{Tokens: tokens, Start: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if ran := b.Device().Launches()[kernel] > before; ran != exactKV {
				t.Errorf("%s cache, ExactKV %v: the training forward launched %s: %v", cache, exactKV, kernel, ran)
			}
			for j, lp := range pass.LogProbs[0] {
				if !math.IsNaN(dec[j]) { // the prefill's first tokens
					gap[i] = max(gap[i], math.Abs(float64(lp)-dec[j]))
				}
			}
			grads := model.NewLike(m.B, m.Cfg, m.Trainable())
			dl := [][]float32{make([]float32, len(pass.LogProbs[0]))}
			for j := range dl[0] {
				dl[0][j] = 1
			}
			if err := m.Backward(pass, dl, grads); err != nil {
				t.Fatalf("%s cache, ExactKV %v: backward: %v", cache, exactKV, err)
			}
			for _, np := range grads.Named(m.Cfg) {
				model.Release(m.B, *np.Ptr)
			}
		}
		t.Logf("%s products, %s cache: max |Δ log-prob| sampler vs trainer: %.3g without ExactKV, %.3g with", c.prec, cache, gap[0], gap[1])
		// Observed on the emulator, fp32 / bf16 products: 3e-7 / 7e-7
		// (bf16 cache) and 7e-7 / 7e-7 (fp8) with ExactKV (the host's
		// float64 log-softmax against the device's, and the ops around
		// attention); 1.3e-2 / 3.1e-2 and 0.21 / 0.30 without, except
		// under bf16 products with a bf16 cache, where the tensor-core
		// kernel rounds the training forward's fp32 keys and values to the
		// bf16 the cache holds: 7.6e-7 with and without.
		if gap[1] > 1e-5 {
			t.Errorf("%s cache with ExactKV: log-probs differ by %g, want ≤ 1e-5", cache, gap[1])
		}
		if roundsAsCache {
			if gap[0] > 1e-5 {
				t.Errorf("%s products, %s cache without ExactKV: log-probs differ by %g, want ≤ 1e-5 (the tensor-core kernel rounds keys and values as the cache does)", c.prec, cache, gap[0])
			}
		} else if gap[0] < 10*gap[1] || gap[0] < 1e-5 {
			t.Errorf("%s cache without ExactKV: log-probs differ by only %g (with: %g): the test cannot tell the cache's rounding", cache, gap[0], gap[1])
		}
	}
}

// exactSampled decodes tokens through m's cache (a prefill of 3, then one
// at a time) and returns the log-probability of each token after the
// first, from the logits (float64 log-softmax on the host).
func exactSampled(t *testing.T, m *model.Model, tokens []int32) []float64 {
	kv := m.NewKVCache(1, len(tokens))
	defer kv.Release()
	var out []float64
	for p := 0; p < len(tokens)-1; {
		n := 1
		if p == 0 {
			n = 3
		}
		logits, err := m.Step(kv, []model.StepInput{{Slot: 0, Tokens: tokens[p : p+n]}})
		if err != nil {
			t.Fatal(err)
		}
		if p == 0 { // the prefill's logits are its last token's only
			for j := 1; j < n; j++ {
				out = append(out, math.NaN())
			}
		}
		row := logits[len(logits)-1]
		mx := math.Inf(-1)
		for _, x := range row {
			mx = max(mx, float64(x))
		}
		var s float64
		for _, x := range row {
			s += math.Exp(float64(x) - mx)
		}
		out = append(out, float64(row[tokens[p+n]])-mx-math.Log(s))
		p += n
	}
	return out
}

// checkExactAttention checks the attention forwards launched since before
// (d.Launches()): attn_exact* only, at least one, and under the model's
// bf16 products the tensor-core kernels (attn_exact_tc*) and their combine
// alone. It returns how many ran.
func checkExactAttention(t *testing.T, name string, d *Device, before map[string]int) int {
	t.Helper()
	exact, cudaCore := 0, 0
	for k, n := range d.Launches() {
		if n == before[k] || !strings.HasPrefix(k, "attn_") || strings.HasPrefix(k, "attn_delta") || strings.Contains(k, "bwd") {
			continue
		}
		if !strings.HasPrefix(k, "attn_exact") {
			t.Errorf("%s: exact mode launched %s %d times", name, k, n-before[k])
			continue
		}
		exact += n - before[k]
		if !strings.HasPrefix(k, "attn_exact_tc") && !strings.HasPrefix(k, "attn_exact_combine") {
			cudaCore += n - before[k]
		}
	}
	if exact == 0 {
		t.Errorf("%s: attn_exact never launched", name)
	}
	if cudaCore > 0 {
		t.Errorf("%s: %d of %d exact attention launches on the CUDA-core kernels, want none", name, cudaCore, exact)
	}
	return exact
}

// TestExactAttentionBackward: the backward (the fast kernels) reads the
// lse exact mode's forward writes, folded over splits (of 32 keys here):
// the gradients match the float64 CPU's within the fp32 tolerance, or,
// under bf16 products (the tensor-core forward, whose scores are of q and
// k rounded to bf16 as the backward's are), within bf16's.
func TestExactAttentionBackward(t *testing.T) {
	exactSplitTest = 32
	t.Cleanup(func() { exactSplitTest = 0 })
	ref := refBackend()
	rng := rand.New(rand.NewPCG(46, 7))
	const H, G, D = 4, 2, 32
	segs := []model.Segment{{Q0: 0, QLen: 40, K0: 0, KLen: 40}, {Q0: 40, QLen: 70, K0: 40, KLen: 70}}
	n := 110
	q, k, v := roundedRandn(rng, n*H*D, 1, false), roundedRandn(rng, n*G*D, 1, false), roundedRandn(rng, n*G*D, 1, false)
	dout := roundedRandn(rng, n*H*D, 1, false)
	scale := float32(1 / math.Sqrt(D))
	grads := func(be model.Backend) []float32 {
		Q, K, V := model.NewFrom(be, q, n, H, D), model.NewFrom(be, k, n, G, D), model.NewFrom(be, v, n, G, D)
		out, lse := be.New(n, H, D), be.New(n, H)
		be.Attention(out, lse, Q, K, V, segs, scale)
		dq, dk, dv := be.New(n, H, D), be.New(n, G, D), be.New(n, G, D)
		be.AttentionBackward(dq, dk, dv, model.NewFrom(be, dout, n, H, D), Q, K, V, out, lse, segs, scale)
		return model.Values(be, out, lse, dq, dk, dv)
	}
	want := grads(ref)
	for _, c := range []struct {
		prec   Precision
		kernel string
		tol    numcheck.Tol
	}{{FP32, "attn_exact", fp32Attn}, {BF16, "attn_exact_tc", bf16Attn}} {
		b := NewBackend(testDevice(t), c.prec)
		b.SetBatchInvariant(true)
		before := b.Device().Launches()[c.kernel]
		got := grads(b)
		if !backendErrs(t, "exact attention backward", b, ref) {
			return
		}
		if b.Device().Launches()[c.kernel] == before {
			t.Fatalf("%s products: %s never launched", c.prec, c.kernel)
		}
		st := compareTo(t, fmt.Sprintf("%s products: exact attention forward and backward against the CPU", c.prec), got, want, c.tol)
		t.Logf("%s products: max |err| %.2g", c.prec, st.MaxAbs)
	}
}

// TestExactTCFlops: the step profile's count of the tensor-core exact
// kernels' arithmetic, by hand: 64·Dp flops per key of every 16-key tile a
// fragment of 16 (row, head) pairs reaches, its widest window rounded up.
func TestExactTCFlops(t *testing.T) {
	for _, c := range []struct {
		name          string
		qCount, first []int32
		H, G, D, hb   int
		want          float64
	}{
		// One row, 2 heads a KV head: one fragment, 100 keys → 7 tiles.
		{"decode, GQA 2", []int32{1}, []int32{100}, 16, 8, 128, 2, 64 * 128 * 8 * 112},
		// 32 rows × 2 heads: four fragments whose last rows (7, 15, 23,
		// 31) see 8, 16, 24 and 32 keys: 16 + 16 + 32 + 32 keys.
		{"training tile", []int32{32}, []int32{1}, 16, 8, 128, 2, 64 * 128 * 8 * 96},
		// 20 heads in chunks of 16 and 4, D 18 padded to 32: a tile each.
		{"two head chunks, D 18", []int32{1}, []int32{5}, 20, 1, 18, 16, 64 * 32 * 1 * 32},
	} {
		if got := exactTCFlops(c.qCount, c.first, c.H, c.G, c.D, c.hb); got != c.want {
			t.Errorf("%s: %g flops, want %g", c.name, got, c.want)
		}
	}
}
