package cuda

// Kernels against the model package's reference backend (model.ReferenceCPU:
// float64 accumulators, results rounded once to float32), over the shapes
// each route admits rather than the few the other tests pick: every head
// dimension a route's gate lets through, GQA ratios, sequences of one token
// and lengths that are not tile multiples, contexts crossing KV pages, and
// every sampling mode.
//
// The property tests draw a FIXED number of cases from a seeded generator,
// so a run is reproducible and its cost bounded; each failure prints the
// case's parameters (and its seed and index), enough to replay it alone.
// Work per case is capped (maxWork) so the whole file stays within a
// minute or so on the emulator on two cores.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

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

// kvTensor uploads a key or value tensor: on a CUDA backend with half set,
// as a bf16 KV cache (NewHalf, written by ScatterRows as the model writes
// its cache); otherwise fp32.
func kvTensor(b model.Backend, vals []float32, half bool, rows, heads, d int) *model.Tensor {
	gb, ok := b.(*Backend)
	if !ok || !half {
		return upload(b, vals, rows, heads, d)
	}
	t := gb.NewHalf(rows, heads, d)
	idx := make([]int32, rows)
	for i := range idx {
		idx[i] = int32(i)
	}
	gb.ScatterRows(t.View(rows, heads*d), upload(b, vals, rows, heads*d), idx, false)
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
// uses float64. TestAttentionMatchesCPU's bound; observed here ≤ 1.1e-5
// absolute on outputs of order 1 (the D = 256 rows), a third of it.
var fp32Attn = numcheck.Tol{Atol: 3e-5, Rtol: 3e-4}

// TestDecodeSplitEveryHeadDim runs the split-K decode kernels at every head
// dimension their gate (useDecodeSplit) admits up to DEC_DMAX, with fp32
// and bf16 caches and GQA ratios from 1 to DEC_PER, on rows that see 1, 37
// and 300 keys (300 > decMinKeys: two splits, the 1-key row's second one
// empty), against the float64 reference. Head dims whose 16-byte pieces
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
	for D := 2; D <= 2*attThreads; D += 2 {
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
			kernel := "attn_decode_split"
			if half {
				kernel += "_kvh"
			}
			before := b.Device().Launches()[kernel]
			run := func(be model.Backend) []float32 {
				Q, K, V := upload(be, q, nq, H, D), kvTensor(be, k, half, nk, G, D), kvTensor(be, v, half, nk, G, D)
				out, lse := be.New(nq, H, D), be.New(nq, H)
				be.Attention(out, lse, Q, K, V, segs, scale)
				return download(be, out, lse)
			}
			want, got := run(ref), run(b)
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
	if cases < 60 {
		t.Errorf("only %d head dims × caches admitted: the gate no longer takes D %% 8 == 0 up to 256", cases)
	}
	t.Logf("%d cases, worst |err| %.2g", cases, worst)
}
