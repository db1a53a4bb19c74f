package cuda

// Kernels against the model package's reference backend (model.ReferenceCPU:
// float64 accumulators, results rounded once to float32), over the shapes
// each route admits rather than the few the other tests pick: every head
// dimension a route's gate lets through, GQA ratios, sequences of one token
// and lengths that are not tile multiples, contexts crossing KV pages, and
// every sampling mode.
//
// The property tests draw a FIXED number of cases, each from a generator
// seeded by the test's seed and the case's index, so a run is reproducible
// and its cost bounded; a failing case prints its parameters and the -run
// pattern of its subtest, which replays it alone. Attention's work per
// case is capped (maxAttnWork), so the file takes about 20 s on the
// emulator on two cores. Under go test -short (make test-short) each
// property runs fewer cases (cases) and the head-dim sweeps a sample
// (headDims).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/rng"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// fuzz runs n cases of a property, each a subtest "case=i" drawing from its
// own generator seeded (seed, i), so that any case replays alone with
// -run 'TestName/case=i$'. desc, set by the case, is logged when it fails.
func fuzz(t *testing.T, seed uint64, n int, run func(t *testing.T, i int, rng *rand.Rand, desc *string)) {
	t.Helper()
	for i := range n {
		t.Run(fmt.Sprintf("case=%d", i), func(t *testing.T) {
			var desc string
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("failing case (replay with -run '%s$'): %s", t.Name(), desc)
				}
			})
			run(t, i, rand.New(rand.NewPCG(seed, uint64(i))), &desc)
		})
	}
}

// cases is a property's case count: full, or short under go test -short
// (make test-short), where each property still meets every route, layout or
// mode it cycles through once. Case i draws from the same generator either
// way, so the short lane's cases are the first of the full lane's.
func cases(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// headDims is every even head dim up to MaxHeadDim, or under go test -short
// a sample of them: the smallest, sizes whose 16-byte pieces per row are
// not a power of two (24, 48, 96: issue 28), the tiny models' and Qwen3's
// (64, 128), one past a power of two (130) and the largest.
func headDims() []int {
	if testing.Short() {
		return []int{2, 8, 24, 36, 48, 64, 96, 128, 130, MaxHeadDim}
	}
	var ds []int
	for D := 2; D <= MaxHeadDim; D += 2 {
		ds = append(ds, D)
	}
	return ds
}

// pick returns one of xs.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// evenDim draws an even head dimension in [2, MaxHeadDim] (everything
// model.Config.Validate admits that the CUDA backend serves) for which ok
// holds, favouring none: sizes whose pieces per warp lane are not powers
// of two come up as often as the rest.
func evenDim(r *rand.Rand, ok func(D int) bool) int {
	for {
		if D := 2 + 2*r.IntN(MaxHeadDim/2); ok(D) {
			return D
		}
	}
}

// refBackend is the float64 reference every case compares against.
func refBackend() model.Backend { return model.NewReferenceCPU() }

// roundedRandn draws n normal values of the given scale, rounded to bf16
// when half is set (so that a bf16 cache holds them exactly and the
// reference sees the very values the kernel reads).
func roundedRandn(rng *rand.Rand, n int, scale float64, half bool) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * rng.NormFloat64())
		if half {
			out[i] = bf16Round(out[i])
		}
	}
	return out
}

// tracked is the CUDA backend recording the tensors a case allocates, so
// that the case gives them all back: the tests share one device, and
// buffers left to the garbage collector would count as leaks in the
// memory checks of tests that run later.
type tracked struct {
	*Backend
	made []*model.Tensor
}

func track(b *Backend) *tracked { return &tracked{Backend: b} }

func (b *tracked) add(t *model.Tensor) *model.Tensor { b.made = append(b.made, t); return t }

func (b *tracked) New(shape ...int) *model.Tensor     { return b.add(b.Backend.New(shape...)) }
func (b *tracked) NewHalf(shape ...int) *model.Tensor { return b.add(b.Backend.NewHalf(shape...)) }
func (b *tracked) Scratch(shape ...int) *model.Tensor { return b.add(b.Backend.Scratch(shape...)) }
func (b *tracked) ActivationHalf(shape ...int) *model.Tensor {
	return b.add(b.Backend.ActivationHalf(shape...))
}

// releaseAll gives back every tensor made and not released since.
func (b *tracked) releaseAll() {
	for _, t := range b.made {
		if buf, ok := t.Store.(*buffer); ok && !buf.released {
			b.Backend.Release(t)
		}
	}
	b.made = nil
}

// kvTensor uploads a key or value tensor: on a backend with bf16 storage
// (model.KVStore) with half set, as a bf16 KV cache (written by
// ScatterRows as the model writes its cache); otherwise fp32.
func kvTensor(b model.Backend, vals []float32, half bool, rows, heads, d int) *model.Tensor {
	hs, ok := b.(model.KVStore)
	if !ok || !half {
		return model.NewFrom(b, vals, rows, heads, d)
	}
	t := hs.NewHalf(rows, heads, d)
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	b.ScatterRows(t.View(rows, heads*d), model.NewFrom(b, vals, rows, heads*d), idx, false)
	return t
}

// compareTo compares got with the reference's want and fails with the
// case's description.
func compareTo(t *testing.T, what string, got, want []float32, tol numcheck.Tol) numcheck.Stats {
	t.Helper()
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	st, err := numcheck.Compare(got, w, tol)
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
	return st
}

// backendErrs fails the test with either backend's recorded error.
func backendErrs(t *testing.T, what string, bs ...model.Backend) bool {
	t.Helper()
	for _, b := range bs {
		if err := b.Err(); err != nil {
			b.ResetErr()
			t.Errorf("%s: %s: %v", what, b.Name(), err)
			return false
		}
	}
	return true
}

// fp32Attn is the tolerance of the fp32 attention kernels (every route but
// the fused bf16 one): they accumulate dot products of D ≤ 256 terms and
// softmax sums of up to a few hundred keys in float32 where the reference
// uses float64. TestAttentionMatchesCPU's bound; observed here ≤ 4.8e-6
// absolute on outputs and gradients of order 1 (4 % of it).
var fp32Attn = numcheck.Tol{Atol: 3e-5, Rtol: 3e-4}

// TestDecodeSplitEveryHeadDim runs the split-K decode kernels at every head
// dimension their gate (useDecodeSplit) admits up to DEC_DMAX, with fp32
// and bf16 caches and GQA ratios from 1 to DEC_PER, on rows that see 1, 37
// and 300 keys (300 > decMinKeys: two splits, the 1-key row's second one
// empty), against the float64 reference; the ratios meet every head count
// the kernels are compiled for (PER 1, 2, 4, 8) with both caches. Head dims whose 16-byte pieces
// per row (D/4 fp32, D/8 bf16) are not a power of two put lanes of
// different keys into one shuffle reduction in a kernel that assumes they
// are (issue 28); D = 24, 48, 96 erred by 0.2–0.4.
func TestDecodeSplitEveryHeadDim(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	// The split-K kernels for every call (the route graphs always take).
	b.attnTiles, b.attnGEMM, b.attnFlash, b.attnDecode = -1, -1, -1, 1
	ref := refBackend()
	rng := rand.New(rand.NewPCG(28, 2))
	// (H, G): query heads per key/value head 1, 2, 3, 4, 5 and 8 (DEC_PER).
	ratios := [][2]int{{2, 2}, {4, 2}, {3, 1}, {8, 2}, {5, 1}, {8, 1}}
	segs := []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 1}, {Q0: 1, QLen: 1, K0: 5, KLen: 37}, {Q0: 2, QLen: 1, K0: 50, KLen: 300}}
	const nq, nk = 3, 350
	cases, worst := 0, 0.0
	met := map[string]bool{} // the kernels launched: every PER, both caches
	for _, D := range headDims() {
		for ci, half := range []bool{false, true} {
			r := ratios[(D/8+3*ci)%len(ratios)]
			H, G := r[0], r[1]
			if !b.useDecodeSplit(D, H, G) {
				continue
			}
			name := fmt.Sprintf("D=%d H=%d G=%d bf16 cache %v", D, H, G, half)
			q := roundedRandn(rng, nq*H*D, 1, false)
			k, v := roundedRandn(rng, nk*G*D, 1, half), roundedRandn(rng, nk*G*D, 1, half)
			scale := float32(1 / math.Sqrt(float64(D)))
			suffix := ""
			if half {
				suffix = "_kvh"
			}
			kernel := decodeSplitKernel(suffix, H/G)
			met[kernel] = true
			before := b.Device().Launches()[kernel]
			run := func(be model.Backend) []float32 {
				Q, K, V := model.NewFrom(be, q, nq, H, D), kvTensor(be, k, half, nk, G, D), kvTensor(be, v, half, nk, G, D)
				out, lse := be.New(nq, H, D), be.New(nq, H)
				be.Attention(out, lse, Q, K, V, segs, scale)
				return model.Values(be, out, lse)
			}
			tb := track(b)
			want, got := run(ref), run(tb)
			tb.releaseAll()
			if !backendErrs(t, name, ref, b) {
				continue
			}
			if b.Device().Launches()[kernel] == before {
				t.Errorf("%s: %s never launched", name, kernel)
			}
			worst = math.Max(worst, compareTo(t, name, got, want, fp32Attn).MaxAbs)
			cases++
		}
	}
	want := 60 // of the 32 multiples of 8 up to 256, × 2 caches
	if testing.Short() {
		want = 12 // of headDims' 7 multiples of 8, × 2 caches
	}
	if cases < want {
		t.Errorf("only %d head dims × caches admitted: the gate no longer takes D %% 8 == 0 up to 256", cases)
	}
	for _, suffix := range []string{"", "_kvh"} {
		for _, per := range []int{1, 2, 4, 8} {
			if k := decodeSplitKernel(suffix, per); !met[k] {
				t.Errorf("no case launched %s", k)
			}
		}
	}
	t.Logf("%d cases, worst |err| %.2g", cases, worst)
}

// attnRoute forces one attention route (the backend's test switches, as
// TestAttentionMatchesCPU sets them).
type attnRoute struct {
	name                       string
	tiles, gemm, flash, decode int
	fwd, bwd                   string // the kernel each direction must launch ("" when the choice is the backend's)
}

var attnRoutes = []attnRoute{
	{"row", -1, -1, -1, -1, "attn_fwd", "attn_bwd_dq"},
	{"tiled", 1, -1, -1, -1, "attn_fwd_tiled", "attn_bwd_dq_tiled"},
	{"gemm", 0, 1, -1, -1, "attn_gemm_softmax", "attn_gemm_probs"},
	{"flash", 0, -1, 1, -1, "attn_flash_fwd", "attn_flash_bwd_dq"},
	{"decode", -1, -1, -1, 1, "attn_decode_split", ""}, // the kernel for H/G heads: decodeSplitKernel
	{"auto", 0, 0, 0, 0, "", ""},
}

func (r attnRoute) set(b *Backend) {
	b.attnTiles, b.attnGEMM, b.attnFlash, b.attnDecode = r.tiles, r.gemm, r.flash, r.decode
}

// admits reports whether the route serves head dim D with H/G query heads
// per key/value head, by the backend's own gates (the route set on b).
func (r attnRoute) admits(b *Backend, D, H, G int) bool {
	long := []model.Segment{{QLen: 64, KLen: 64}}
	switch r.name {
	case "tiled":
		return b.useTiles(D, long, 64)
	case "flash":
		return b.useFlash(D, long, 64)
	case "decode":
		return b.useDecodeSplit(D, H, G)
	}
	return true
}

// bf16Attn is the tolerance of attention through bf16 products (the fused
// kernels, and cuBLAS under bf16 products): q, k, v, the probabilities and
// dout are rounded to 8 significant bits. TestAttentionMatchesCPU's bound;
// observed here ≤ 1.9e-2 absolute (77 % of it: the fused kernels' gradients
// from bf16 activations at D = 64).
var bf16Attn = numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}

// segLen draws a sequence length: one token, lengths around the kernels'
// tiles (32, 64) and the split-K decode's 256-key splits, or anything up
// to most.
func segLen(r *rand.Rand, most int) int {
	n := pick(r, 1, 2+r.IntN(30), pick(r, 31, 33, 63, 65, 127, 129, 255, 257), 1+r.IntN(most))
	return min(n, most)
}

// attnLayout draws the segments of one attention call: packed training
// sequences (queries are their keys), decode rows (one query over a cache
// region, regions apart in a larger cache) or chunked prefill (the last
// queries of a longer prefix).
func attnLayout(r *rand.Rand, kind string, most int) (segs []model.Segment, nq, nk int) {
	switch kind {
	case "packed":
		for range 1 + r.IntN(3) {
			n := segLen(r, most)
			segs = append(segs, model.Segment{Q0: nq, QLen: n, K0: nq, KLen: n})
			nq += n
		}
		return segs, nq, nq
	case "decode":
		for range 1 + r.IntN(5) {
			n := pick(r, 1, segLen(r, 4*most), pick(r, 255, 256, 257, 511, 513))
			nk += r.IntN(9) // a gap: rows of other slots
			segs = append(segs, model.Segment{Q0: nq, QLen: 1, K0: nk, KLen: n})
			nq, nk = nq+1, nk+n
		}
		return segs, nq, nk
	default: // chunked prefill
		for range 1 + r.IntN(2) {
			n, past := segLen(r, most), r.IntN(2*most)
			segs = append(segs, model.Segment{Q0: nq, QLen: n, K0: nk, KLen: past + n})
			nq, nk = nq+n, nk+past+n
		}
		return segs, nq, nk
	}
}

// attnWork is the multiply-adds of a call: QKᵀ and PV per visible pair and
// head, three times that with the backward.
func attnWork(segs []model.Segment, H, D int, backward bool) float64 {
	var pairs float64
	for _, s := range segs {
		for i := range s.QLen {
			pairs += float64(s.KLen - s.QLen + i + 1)
		}
	}
	w := 2 * pairs * float64(H*D)
	if backward {
		w *= 3
	}
	return w
}

// maxAttnWork bounds a case's attention work (multiply-adds): the emulator
// runs about 10⁷ a second, so a case takes a few tenths of a second.
const maxAttnWork = 1e7

// TestFuzzAttention: random calls on every route (forced, and the
// backend's own choice) at every head dim the route admits, GQA ratios 1
// to 12, packed, decode and chunked-prefill layouts with lengths of 1 and
// around the tiles, fp32 and bf16 KV caches and bf16 activations, forward
// (out and lse) and, for training layouts, the backward (dq, dk, dv),
// against model.ReferenceCPU.
func TestFuzzAttention(t *testing.T) {
	d := testDevice(t)
	backends := map[Precision]*Backend{FP32: NewBackend(d, FP32), BF16: NewBackend(d, BF16)}
	ref := refBackend()
	kinds := []string{"packed", "decode", "chunked"}
	fuzz(t, 0xa77e, cases(12*len(attnRoutes), len(kinds)*len(attnRoutes)), func(t *testing.T, i int, r *rand.Rand, desc *string) {
		// Every route takes every layout, in turn.
		route, kind := attnRoutes[i%len(attnRoutes)], kinds[i/len(attnRoutes)%len(kinds)]
		prec := pick(r, FP32, BF16)
		b := backends[prec]
		route.set(b)
		G := pick(r, 1, 2, 3)
		H := G * pick(r, 1, 2, 3, 4, 8, 12)
		if route.name == "decode" {
			H = G * pick(r, 1, 2, 3, 5, 8) // DEC_PER = 8 at most
		}
		D := evenDim(r, func(D int) bool { return route.admits(b, D, H, G) })
		// bf16 activations (q, k, v and out) are what a bf16-product
		// training pass hands attention; a bf16 cache is decoding's and
		// prefill's. GEMM attention takes neither (the backend widens or
		// picks another route), the split-K kernels no backward.
		act16 := prec == BF16 && route.name != "decode" && r.IntN(2) == 0
		halfKV := !act16 && route.name != "gemm" && r.IntN(2) == 0
		backward := !halfKV && kind != "decode" && route.name != "decode" && r.IntN(3) > 0
		segs, nq, nk := attnLayout(r, kind, 160)
		for most := 160; attnWork(segs, H, D, backward) > maxAttnWork && most > 1; {
			most /= 2
			segs, nq, nk = attnLayout(r, kind, most)
		}
		*desc = fmt.Sprintf("route %s, matmul %s, H=%d G=%d D=%d, %s nq=%d nk=%d segs %+v, bf16 cache %v, bf16 activations %v, backward %v",
			route.name, prec, H, G, D, kind, nq, nk, segs, halfKV, act16, backward)
		tol := fp32Attn
		if route.name == "flash" || act16 || (prec == BF16 && (route.name == "gemm" || route.name == "auto")) {
			tol = bf16Attn
		}
		q, k, v := roundedRandn(r, nq*H*D, 1, act16), roundedRandn(r, nk*G*D, 1, act16 || halfKV), roundedRandn(r, nk*G*D, 1, act16 || halfKV)
		dout := roundedRandn(r, nq*H*D, 1, false)
		scale := float32(1 / math.Sqrt(float64(D)))
		run := func(be model.Backend) []float32 {
			var Q, K, V, out *model.Tensor
			if act16 {
				Q, K, V, out = halfTensor(be, q, nq, H, D), halfTensor(be, k, nk, G, D), halfTensor(be, v, nk, G, D), halfTensor(be, nil, nq, H, D)
			} else {
				Q, K, V, out = model.NewFrom(be, q, nq, H, D), kvTensor(be, k, halfKV, nk, G, D), kvTensor(be, v, halfKV, nk, G, D), be.New(nq, H, D)
			}
			lse := be.New(nq, H)
			be.Attention(out, lse, Q, K, V, segs, scale)
			res := model.Values(be, out, lse)
			if act16 {
				if _, ok := be.(model.HalfPrecision); !ok {
					// The GPU keeps a rounded output, which its backward
					// reads (Σ dout ⊙ out): the reference rounds its own.
					for i := range res[:out.Numel()] {
						res[i] = bf16Round(res[i])
					}
					be.Upload(out, res[:out.Numel()])
				}
			}
			if backward {
				dq, dk, dv := be.New(nq, H, D), be.New(nk, G, D), be.New(nk, G, D)
				be.AttentionBackward(dq, dk, dv, model.NewFrom(be, dout, nq, H, D), Q, K, V, out, lse, segs, scale)
				res = append(res, model.Values(be, dq, dk, dv)...)
			}
			return res
		}
		before := d.Launches()
		tb := track(b)
		want, got := run(ref), run(tb)
		tb.releaseAll()
		if !backendErrs(t, *desc, ref, b) {
			return
		}
		after := d.Launches()
		for _, k := range []string{route.fwd, route.bwd} {
			if k == "" || (k == route.bwd && !backward) {
				continue
			}
			if k == route.fwd && route.name == "decode" {
				suffix := "" // the split kernel for H/G heads (decodeSplitKernel)
				if halfKV {
					suffix = "_kvh"
				}
				k = decodeSplitKernel(suffix, H/G)
			} else if k == route.fwd && act16 && route.name == "flash" {
				k += "_h"
			} else if k == route.fwd && halfKV && route.name != "gemm" {
				k += "_kvh"
			} else if k == route.bwd && act16 && route.name == "flash" {
				k += "_h"
			}
			if after[k] == before[k] {
				t.Errorf("%s: kernel %s never launched", *desc, k)
			}
		}
		st := compareTo(t, *desc, got, want, tol)
		t.Logf("%s: max abs err %.2g, %.0f%% of the tolerance", *desc, st.MaxAbs, 100*st.Used)
	})
}

// TestFuzzRMSNorm: RMSNorm forward (out, rstd) and backward (dx, and dw
// accumulated onto what it held) over row widths from 1 to past two
// blocks' worth, inputs of very small to very large magnitude, and the
// bf16 output a bf16-product pass writes, against model.ReferenceCPU.
func TestFuzzRMSNorm(t *testing.T) {
	d := testDevice(t)
	backends := map[Precision]*Backend{FP32: NewBackend(d, FP32), BF16: NewBackend(d, BF16)}
	ref := refBackend()
	fuzz(t, 0x4e05, cases(24, 6), func(t *testing.T, _ int, r *rand.Rand, desc *string) {
		rows := pick(r, 1, 1+r.IntN(40))
		n := pick(r, 1, 2+r.IntN(300), pick(r, 255, 256, 257, 511, 513, 1025), 1000+r.IntN(3200))
		scale := pick(r, 1e-3, 1.0, 1e3)
		eps := pick(r, float32(1e-6), float32(1e-5))
		half := r.IntN(3) == 0 // a bf16 output (ActivationHalf under bf16 products)
		*desc = fmt.Sprintf("rows=%d n=%d |x| ~ %g eps=%g bf16 out %v", rows, n, scale, eps, half)
		b := backends[FP32]
		if half {
			b = backends[BF16]
		}
		x, w, dy := roundedRandn(r, rows*n, scale, false), roundedRandn(r, n, 1, false), roundedRandn(r, rows*n, 1, false)
		w0 := roundedRandn(r, n, 1, false)
		run := func(be model.Backend) []float32 {
			X, W := model.NewFrom(be, x, rows, n), model.NewFrom(be, w, n)
			out, rstd := be.New(rows, n), be.New(rows)
			if as, ok := be.(model.HalfPrecision); ok && half {
				out = as.ActivationHalf(rows, n)
			}
			be.RMSNorm(out, rstd, X, W, eps)
			res := model.Values(be, out, rstd)
			dx, dw := be.New(rows, n), model.NewFrom(be, w0, n)
			be.RMSNormBackward(dx, dw, model.NewFrom(be, dy, rows, n), X, W, rstd)
			return append(res, model.Values(be, dx, dw)...)
		}
		tb := track(b)
		want, got := run(ref), run(tb)
		tb.releaseAll()
		if !backendErrs(t, *desc, ref, b) {
			return
		}
		// Float32 kernels against float64 sums: opTol of the self-test
		// (observed there ≤ 4e-6 at n = 1000, here ≤ 2 % of it), on values
		// of order 1; rstd and
		// dx scale as 1/|x|, so their atol does too. A bf16 output is the
		// float32 one rounded to 8 significant bits, 2⁻⁸ relative at worst
		// (observed 99 % of it), and the kernel's float32 value may round
		// the other way than the reference's: one bf16 step, 2⁻⁷.
		outTol, tol := numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}, numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}
		if half {
			outTol = numcheck.Tol{Atol: 1e-6, Rtol: 0x1p-7}
		}
		inv := numcheck.Tol{Atol: tol.Atol / scale, Rtol: tol.Rtol}
		parts := []struct {
			name string
			n    int
			tol  numcheck.Tol
		}{{"out", rows * n, outTol}, {"rstd", rows, inv}, {"dx", rows * n, inv}, {"dw", n, numcheck.Tol{Atol: tol.Atol * float64(rows), Rtol: tol.Rtol}}}
		off := 0
		for _, p := range parts {
			st := compareTo(t, *desc+": "+p.name, got[off:off+p.n], want[off:off+p.n], p.tol)
			t.Logf("%s: %s max abs err %.2g, %.0f%% of the tolerance", *desc, p.name, st.MaxAbs, 100*st.Used)
			off += p.n
		}
	})
}

// TestFuzzRoPE: rotations (and their inverse) at every even head dim, from
// position 0 to far past the tables' first growth, two bases, against
// model.ReferenceCPU (angles in float64 there, float64 tables rounded to
// float32 here: a rotated element errs by a few float32 ulps of the row's
// magnitude; tolerance 1e-6 + 1e-5·|want|, observed ≤ 2.4e-7, 15 % of it).
func TestFuzzRoPE(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	ref := refBackend()
	fuzz(t, 0x20be, cases(24, 6), func(t *testing.T, _ int, r *rand.Rand, desc *string) {
		N, H := pick(r, 1, 1+r.IntN(40)), 1+r.IntN(6)
		D := evenDim(r, func(int) bool { return true })
		theta := pick(r, 1e4, 1e6)
		inverse := r.IntN(2) == 0
		pos := make([]int32, N)
		most := pick(r, 8, 4096, 40000)
		for i := range pos {
			pos[i] = int32(r.IntN(most))
		}
		*desc = fmt.Sprintf("N=%d H=%d D=%d theta=%g inverse %v positions %v", N, H, D, theta, inverse, pos)
		x := roundedRandn(r, N*H*D, 1, false)
		run := func(be model.Backend) []float32 {
			X := model.NewFrom(be, x, N, H, D)
			be.RoPE(X, pos, theta, inverse)
			return model.Values(be, X)
		}
		tb := track(b)
		want, got := run(ref), run(tb)
		tb.releaseAll()
		if backendErrs(t, *desc, ref, b) {
			st := compareTo(t, *desc, got, want, numcheck.Tol{Atol: 1e-6, Rtol: 1e-5})
			t.Logf("max abs err %.2g, %.0f%% of the tolerance", st.MaxAbs, 100*st.Used)
		}
	})
}

// TestFuzzSplitQKV: the fused projection's split (per-head RMSNorm, RoPE,
// the values' copy) and its backward at every even head dim, GQA ratios 1
// to 12, fp32 and bf16 products (bf16 qkv in, bf16 qn, kn, v out), against
// model.ReferenceCPU.
func TestFuzzSplitQKV(t *testing.T) {
	d := testDevice(t)
	backends := map[Precision]*Backend{FP32: NewBackend(d, FP32), BF16: NewBackend(d, BF16)}
	ref := refBackend()
	fuzz(t, 0x9c7, cases(24, 6), func(t *testing.T, _ int, r *rand.Rand, desc *string) {
		G := pick(r, 1, 2, 3)
		dims := model.QKVDims{N: pick(r, 1, 1+r.IntN(24)), G: G, H: G * pick(r, 1, 2, 4, 12)}
		dims.D = evenDim(r, func(int) bool { return true })
		half := r.IntN(3) == 0
		pos := make([]int32, dims.N)
		for i := range pos {
			pos[i] = int32(r.IntN(9000))
		}
		*desc = fmt.Sprintf("%+v bf16 %v positions %v", dims, half, pos)
		b := backends[FP32]
		if half {
			b = backends[BF16]
		}
		N, H, D, W := dims.N, dims.H, dims.D, dims.Width()
		x, qw, kw := roundedRandn(r, N*W, 2, half), roundedRandn(r, D, 1, false), roundedRandn(r, D, 1, false)
		dq, dk, dv := roundedRandn(r, N*H*D, 1, false), roundedRandn(r, N*G*D, 1, false), roundedRandn(r, N*G*D, 1, false)
		run := func(be model.Backend) []float32 {
			// halfTensor writes through a product with an identity of
			// the last dimension's size: (N·W/D, D) rows keep it small.
			X, QW, KW := halfTensor(be, x, N*W/D, D).View(N, W), model.NewFrom(be, qw, D), model.NewFrom(be, kw, D)
			qn, kn, v := halfTensor(be, nil, N, H, D), halfTensor(be, nil, N, G, D), halfTensor(be, nil, N, G, D)
			if !half {
				X, qn, kn, v = model.NewFrom(be, x, N, W), be.New(N, H, D), be.New(N, G, D), be.New(N, G, D)
			}
			rq, rk := be.New(N*H), be.New(N*G)
			be.SplitQKV(qn, kn, v, rq, rk, X, QW, KW, pos, 1e6, 1e-6)
			dx, dqw, dkw := be.New(N, W), model.NewFrom(be, qw, D), model.NewFrom(be, kw, D) // the norms' gradients accumulate
			be.SplitQKVBackward(dx, dqw, dkw, model.NewFrom(be, dq, N, H, D), model.NewFrom(be, dk, N, G, D), model.NewFrom(be, dv, N, G, D), X, QW, KW, rq, rk, pos, 1e6)
			return model.Values(be, qn, kn, v, rq, rk, dx, dqw, dkw)
		}
		tb := track(b)
		want, got := run(ref), run(tb)
		tb.releaseAll()
		if !backendErrs(t, *desc, ref, b) {
			return
		}
		// Float32 kernels against float64 sums: the self-test's opTol
		// (observed ≤ 1.7e-5, 2 % of it with the gradients' atol). bf16 outputs are the float32 ones
		// rounded, 2⁻⁸ relative at worst (observed 99 % of it), or one
		// bf16 step (2⁻⁷) where the two values round either way.
		tol, outTol := numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}, numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}
		if half {
			outTol = numcheck.Tol{Atol: 1e-6, Rtol: 0x1p-7}
		}
		outs := N * (H + 2*G) * D
		st := compareTo(t, *desc+": qn, kn, v", got[:outs], want[:outs], outTol)
		// The weights' gradients sum over N·H rows.
		sb := compareTo(t, *desc+": rstds, dqkv, dqw, dkw", got[outs:], want[outs:], numcheck.Tol{Atol: tol.Atol * math.Sqrt(float64(N*H)), Rtol: tol.Rtol})
		t.Logf("outputs: max abs err %.2g, %.0f%% of the tolerance; backward: %.2g, %.0f%%", st.MaxAbs, 100*st.Used, sb.MaxAbs, 100*sb.Used)
	})
}

// sortedTopK is DeviceSampler.TopK's definition on the host: a row's k
// largest values, descending, ties broken by the lower id.
func sortedTopK(row []float32, k int) ([]int32, []float32) {
	idx := make([]int32, len(row))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int {
		switch {
		case row[a] > row[b]:
			return -1
		case row[a] < row[b]:
			return 1
		}
		return int(a) - int(b)
	})
	vals := make([]float32, k)
	for i, id := range idx[:k] {
		vals[i] = row[id]
	}
	return idx[:k], vals
}

// TestFuzzSampling: the device's sampling reductions and draws over
// vocabularies from 1 to a few thousand ids (around the 256-thread
// blocks too), logits with ties and masked (−∞) ids, in every sampling
// mode. The draw (SampleTokens: greedy, tempered, top-k, top-k + top-p) is
// sampler.Sample's with the same uniform: the same token, unless the
// uniform sits within float64 rounding of a boundary of the cumulative
// distribution (both sums are float64, in different orders), and the same
// log-prob within 1e-5 (two float32 roundings of logs whose inputs differ
// by a few float64 ulps). Top-p alone has no device draw (DeviceSamples
// must say so); the sampler then walks the device's TopK, ChunkSums and
// Chunks, checked here against their host definitions: TopK and Chunks
// exactly, ChunkSums' float64 sums within 1e-12 relative (the order of
// the additions differs).
func TestFuzzSampling(t *testing.T) {
	base := NewBackend(testDevice(t), FP32)
	modes := []string{"greedy", "tempered", "top-k", "top-k top-p", "top-p"}
	fuzz(t, 0x5a3b, cases(8*len(modes), len(modes)), func(t *testing.T, i int, r *rand.Rand, desc *string) {
		b := track(base)
		defer b.releaseAll()
		R := pick(r, 1, 1+r.IntN(8))
		V := pick(r, 1, 2+r.IntN(40), pick(r, 255, 256, 257, 511, 513), 600+r.IntN(4000))
		mode := modes[i%len(modes)]
		p := model.SampleParams{Temperature: pick(r, 0.3, 0.7, 1, 1.6), TopP: 1}
		switch mode {
		case "greedy":
			p.Temperature = 0
		case "top-k":
			p.TopK = 1 + r.IntN(min(V, 64))
		case "top-k top-p":
			p.TopK, p.TopP = 1+r.IntN(min(V, 64)), pick(r, 0.3, 0.8, 0.95)
		case "top-p":
			p.TopP = pick(r, 0.3, 0.8, 0.95)
		}
		ties, masked := r.IntN(3) == 0, r.IntN(4) == 0
		spread := pick(r, 0.1, 1.0, 5.0, 20.0)
		logits := roundedRandn(r, R*V, spread, false)
		for i := range logits {
			if ties {
				logits[i] = float32(math.Round(float64(logits[i])*2) / 2) // many equal values
			}
			if masked && i%V != 0 && r.IntN(3) == 0 {
				logits[i] = float32(math.Inf(-1)) // a masked id (never the whole row)
			}
		}
		*desc = fmt.Sprintf("R=%d V=%d %s %+v, logits ~ %g, ties %v, masked ids %v", R, V, mode, p, spread, ties, masked)
		L := model.NewFrom(b, logits, R, V)
		row := func(i int) []float32 { return logits[i*V : (i+1)*V] }

		k := 1 + r.IntN(min(V, 64))
		ids, vals := b.TopK(L, k)
		temp := pick(r, 0.5, 1.0, 1.3)
		chunk := pick(r, 1, 7, 256, 512, 1000)
		mx, sums := b.ChunkSums(L, temp, chunk)
		chunks := (V + chunk - 1) / chunk
		var reqRows, reqChunks []int32
		for range 1 + r.IntN(4) {
			reqRows, reqChunks = append(reqRows, int32(r.IntN(R))), append(reqChunks, int32(r.IntN(chunks)))
		}
		got := b.Chunks(L, reqRows, reqChunks, chunk)
		if !backendErrs(t, *desc, b) {
			return
		}
		for i := range R {
			wi, wv := sortedTopK(row(i), k)
			if !slices.Equal(ids[i], wi) || !slices.Equal(vals[i], wv) {
				t.Errorf("%s: row %d top-%d: ids %v values %v, want %v %v", *desc, i, k, ids[i], vals[i], wi, wv)
			}
			m := math.Inf(-1)
			for _, v := range row(i) {
				m = math.Max(m, float64(v)/temp)
			}
			if mx[i] != m {
				t.Errorf("%s: row %d: chunk sums' max %v, want %v", *desc, i, mx[i], m)
			}
			for c := range chunks {
				var s float64
				for _, v := range row(i)[c*chunk : min(V, (c+1)*chunk)] {
					s += math.Exp(float64(v)/temp - m)
				}
				if math.Abs(sums[i][c]-s) > 1e-12*s {
					t.Errorf("%s: row %d chunk %d of %d (temperature %g): sum %v, want %v", *desc, i, c, chunk, temp, sums[i][c], s)
				}
			}
		}
		for j := range reqRows {
			lo := int(reqChunks[j]) * chunk
			if want := row(int(reqRows[j]))[lo:min(V, lo+chunk)]; !slices.Equal(got[j], want) {
				t.Errorf("%s: chunk request %d (row %d, chunk %d of %d): %d values differ from the logits' %d", *desc, j, reqRows[j], reqChunks[j], chunk, len(got[j]), len(want))
			}
		}

		if mode == "top-p" {
			if b.DeviceSamples(p) {
				t.Errorf("%s: DeviceSamples accepts top-p without top-k", *desc)
			}
			return
		}
		if !b.DeviceSamples(p) {
			t.Fatalf("%s: DeviceSamples refuses a supported mode", *desc)
		}
		draws := make([]model.Draw, R)
		for i := range draws {
			draws[i] = model.Draw{Key: rng.Key(r.Uint64()), Counter: uint64(r.IntN(1000))}
		}
		out := b.New(R, 2)
		b.SampleTokens(out, L, draws, p)
		res := model.Values(b, out)
		if !backendErrs(t, *desc, b) {
			return
		}
		for i := range R {
			u := rng.Uniform(draws[i].Key, draws[i].Counter)
			tok, lp := sampler.Sample(row(i), p.Temperature, p.TopK, p.TopP, u)
			gt := int32(math.Float32bits(res[2*i]))
			if gt != tok {
				// A boundary case moves with u by a few float64 ulps.
				lo, _ := sampler.Sample(row(i), p.Temperature, p.TopK, p.TopP, u*(1-1e-12))
				hi, _ := sampler.Sample(row(i), p.Temperature, p.TopK, p.TopP, math.Min(u*(1+1e-12), math.Nextafter(1, 0)))
				if gt != lo && gt != hi {
					t.Errorf("%s: row %d (u = %v): token %d, sampler.Sample %d", *desc, i, u, gt, tok)
				}
				continue
			}
			if dl := math.Abs(float64(res[2*i+1] - lp)); dl > 1e-5+1e-6*math.Abs(float64(lp)) {
				t.Errorf("%s: row %d token %d: log-prob %v, sampler.Sample %v", *desc, i, tok, res[2*i+1], lp)
			}
		}
	})
}

// TestFuzzModelDecode: a tiny model of a random head dim (every even size
// the CUDA backend serves), GQA ratio and depth, prefilled and decoded
// through its KV cache, on the GPU and on model.ReferenceCPU: fp32 caches,
// bf16 caches, and paged bf16 caches whose 4 KiB pages (the emulator's
// granularity here) hold a few tokens each, so contexts cross pages;
// decode steps eager (logits compared) or as CUDA graphs drawing the
// token on the device (tokens and log-probs compared with
// sampler.Sample on the reference's logits). Prompts of 1 to 40 tokens
// take the per-row, split-K and tiled or GEMM prefill routes.
func TestFuzzModelDecode(t *testing.T) {
	t.Setenv("GDROTRAIN_EMU_VMM_GRANULARITY", "4096")
	d := testDevice(t)
	caches := []string{"fp32", "bf16", "paged bf16"}
	fuzz(t, 0xdec0de, cases(24, 2*len(caches)), func(t *testing.T, i int, r *rand.Rand, desc *string) {
		o := model.DefaultTiny()
		o.Layers, o.Hidden, o.Intermediate, o.Vocab = pick(r, 1, 2), pick(r, 32, 64), 64, 300
		o.KVHeads = pick(r, 1, 2)
		o.Heads = o.KVHeads * pick(r, 1, 2, 3, 4, 8, 12)
		o.HeadDim = evenDim(r, func(int) bool { return true })
		// Every cache, with eager and with graphed decode steps.
		cache, graphs := caches[i%len(caches)], i/len(caches)%2 == 0
		slots, maxLen := 1+r.IntN(3), 96
		prompts := make([][]int32, slots)
		for s := range prompts {
			prompts[s] = make([]int32, pick(r, 1, 1+r.IntN(40)))
			for i := range prompts[s] {
				prompts[s][i] = int32(r.IntN(o.Vocab))
			}
		}
		steps := 3 + r.IntN(5)
		*desc = fmt.Sprintf("layers %d hidden %d heads %d kv heads %d head_dim %d, %s cache, graphs %v, %d slots, prompts of %d tokens, %d decode steps",
			o.Layers, o.Hidden, o.Heads, o.KVHeads, o.HeadDim, cache, graphs, slots, lens(prompts), steps)
		cfg, err := o.Config()
		if err != nil {
			t.Fatal(err)
		}
		cb, gb := refBackend(), track(NewBackend(d, FP32))
		defer gb.releaseAll()
		cpu := &model.Model{Cfg: cfg, B: cb, P: model.RandomParams(cb, cfg, 17, 0.2, 0.3)}
		gpu := &model.Model{Cfg: cfg, B: gb, P: model.RandomParams(gb, cfg, 17, 0.2, 0.3), KVCacheBF16: cache != "fp32"}
		ckv := cpu.NewKVCache(slots+1, maxLen)
		var gkv *model.KVCache
		if cache == "paged bf16" {
			rowBytes := int64(2 * o.KVHeads * o.HeadDim)
			budget := 2 * int64(o.Layers) * int64(slots+1) * (int64(maxLen)*rowBytes + 2*4096)
			if gkv, err = gpu.NewPagedKVCache(slots+1, maxLen, model.KVPaging{BudgetBytes: budget}); err != nil {
				t.Fatal(err)
			}
		} else {
			gkv = gpu.NewKVCache(slots+1, maxLen)
		}
		defer gkv.Release()
		// A bf16 cache rounds keys and values to 8 significant bits, and
		// the reference's fp32 cache does not: logits (and log-probs) of
		// order 1–10 move by up to 2.6e-2 here (79 % of TestHalfKVCache's
		// 2e-2 + 2e-2·|want|; a wrong kernel moves them by O(1)), hence
		// 3e-2. fp32: kernels accumulating in float32 against float64
		// over two layers, observed ≤ 6e-6 (5 % of 1e-4 + 1e-4·|want|).
		tol := numcheck.Tol{Atol: 1e-4, Rtol: 1e-4}
		if cache != "fp32" {
			tol = numcheck.Tol{Atol: 3e-2, Rtol: 3e-2}
		}
		var dg *model.DecodeGraph
		p := model.SampleParams{Temperature: 1, TopP: 1}
		if graphs {
			if dg, err = gpu.NewDecodeGraph(gkv, p); err != nil {
				t.Fatal(err)
			}
			defer dg.Release()
		}
		// step runs one step on both models (growing the paged cache's
		// slots first) and returns the reference's logits; eager GPU
		// logits are compared with them.
		worst, used := 0.0, 0.0 // the largest logit or log-prob error seen, and its share of the tolerance
		grow := func(in []model.StepInput) {
			t.Helper()
			for _, s := range in {
				if err := gkv.Grow(s.Slot, gkv.Len[s.Slot]+len(s.Tokens)); err != nil {
					t.Fatal(err)
				}
			}
		}
		step := func(in []model.StepInput, eager bool) [][]float32 {
			t.Helper()
			want, err := cpu.Step(ckv, in)
			if err != nil {
				t.Fatal(err)
			}
			if !eager {
				return want
			}
			grow(in)
			got, err := gpu.Step(gkv, in)
			if err != nil {
				t.Fatalf("%s: %v", *desc, err)
			}
			for i := range in {
				st := compareTo(t, fmt.Sprintf("slot %d at %d tokens", in[i].Slot, ckv.Len[in[i].Slot]), got[i], want[i], tol)
				worst, used = math.Max(worst, st.MaxAbs), math.Max(used, st.Used)
			}
			return want
		}
		var in []model.StepInput
		for s, pr := range prompts {
			in = append(in, model.StepInput{Slot: s, Tokens: pr})
		}
		logits := step(in, true)
		for k := range steps {
			next := make([]model.StepInput, slots)
			for s := range next {
				tok, _ := sampler.Sample(logits[s], 1, 0, 1, rng.Uniform(uint64(s), uint64(k)))
				next[s] = model.StepInput{Slot: s, Tokens: []int32{tok}}
			}
			if !graphs {
				logits = step(next, true)
				continue
			}
			draws := make([]model.Draw, slots)
			for s := range draws {
				draws[s] = model.Draw{Key: uint64(100 + s), Counter: uint64(k)}
			}
			grow(next)
			toks, lps, _, err := dg.Step(next, draws)
			if err != nil {
				t.Fatalf("%s: %v", *desc, err)
			}
			logits = step(next, false)
			for s := range next {
				// The graph's draw is sampler.Sample's on its own logits:
				// the token whose cumulative interval (ids in order, the
				// unfiltered walk) holds u there, which on the reference's
				// logits lies within their error of u; its log-prob is the
				// reference's log-softmax at that token.
				u := rng.Uniform(draws[s].Key, draws[s].Counter)
				lo, hi, lp := cdfInterval(logits[s], toks[s])
				if slack := 2 * (tol.Atol + tol.Rtol); hi < u-slack || lo > u+slack {
					t.Errorf("slot %d step %d: graph drew %d, whose interval [%.6f, %.6f) of the reference's distribution is far from u = %.6f", s, k, toks[s], lo, hi, u)
				}
				dl := math.Abs(float64(lps[s]) - lp)
				worst, used = math.Max(worst, dl), math.Max(used, dl/(tol.Atol+tol.Rtol*math.Abs(lp)))
				if dl > tol.Atol+tol.Rtol*math.Abs(lp) {
					t.Errorf("slot %d step %d token %d: log-prob %v, reference %v", s, k, toks[s], lps[s], lp)
				}
			}
		}
		if err := gb.Err(); err != nil {
			t.Errorf("%s: %v", *desc, err)
		}
		t.Logf("%s: max abs err %.2g, %.0f%% of the tolerance", *desc, worst, 100*used)
	})
}

// lens lists the lengths of xs.
func lens(xs [][]int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = len(x)
	}
	return out
}

// cdfInterval returns the cumulative probability of softmax(logits) before
// and through id tok (ids in order) and tok's log-probability, in float64.
func cdfInterval(logits []float32, tok int32) (lo, hi, logp float64) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	for i, v := range logits[:tok+1] {
		p := math.Exp(float64(v)-mx) / sum
		if i == int(tok) {
			return lo, lo + p, math.Log(p)
		}
		lo += p
	}
	return lo, lo, math.Inf(-1)
}
