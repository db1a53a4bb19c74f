package cuda

// Exact mode's products (backend_gemm_exact.go) are batch-invariant: the
// rows of a product equal, bit for bit, the same rows computed in a product
// of fewer rows at another offset. The emulator's cuBLAS runs with its K
// order depending on the shape (cudaemu.GemmOrderEnv=shape), as a GPU's
// algorithm choice makes it, so a product left on cuBLAS fails the test;
// TestExactMatMulNeedsExact shows it does, with exact mode off.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	fastcpu "github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
)

// gemmExactCase is one kind of product: its precision and operand storages.
type gemmExactCase struct {
	name    string
	prec    Precision
	halfA   bool // a is a bf16 activation
	frozenB bool // b is a frozen (bf16) weight
	shadowB bool // b is fp32 with a bf16 copy (Shadow)
	halfC   bool // c is a bf16 activation
	noMMA   bool // bf16 products on the FFMA kernel, as below sm_80
	noWG    bool // bf16 products on mma.sync where the warpgroup-MMA kernels would run (GDROTRAIN_EXACT_WGMMA=0)
}

var exactCases = []gemmExactCase{
	{name: "fp32", prec: FP32},
	{name: "tf32", prec: TF32},
	{name: "fp32-frozen", prec: FP32, frozenB: true},
	{name: "bf16", prec: BF16},
	{name: "bf16-shadow", prec: BF16, shadowB: true},
	{name: "bf16-frozen-halfact", prec: BF16, halfA: true, frozenB: true},
	{name: "bf16-halfC", prec: BF16, halfC: true},
	{name: "bf16-halfact-halfC", prec: BF16, halfA: true, shadowB: true, halfC: true},
	{name: "bf16-pre-sm80", prec: BF16, halfA: true, frozenB: true, noMMA: true},
	{name: "bf16-pre-sm80-halfC", prec: BF16, halfC: true, noMMA: true},
	{name: "bf16-mma.sync", prec: BF16, halfA: true, frozenB: true, noWG: true},
}

// The shapes: the full product has exactFullRows rows of op(a); sub-batches
// of the other sizes start at varying offsets. N is odd and K odd (133,
// accumulating products) or a multiple of 8 (136, the others: the mma
// kernel's 16-byte loads where K is contiguous), so every kernel's tiles
// have tails in all three dimensions and both load paths run.
const (
	exactFullRows = 256
	exactN        = 37
)

func exactK(accumulate bool) int {
	if accumulate {
		return 133
	}
	return 136
}

var exactSubRows = []int{1, 2, 3, 7, 16, 17, 64, 130}

// exactProblem is the host data of one product: op(a) is M × K, stored
// (M, K) or, transposed, (K, M); op(b) is K × N, stored (K, N) or (N, K).
type exactProblem struct {
	c             gemmExactCase
	transA, trans bool
	accumulate    bool
	k             int       // K
	a, b, c0      []float32 // a for exactFullRows rows; c0 the initial c (accumulate)
	last          Profile   // what the last product (MatMul alone) asked of the device
}

func newExactProblem(c gemmExactCase, transA, transB, accumulate bool, seed uint64) *exactProblem {
	rng := rand.New(rand.NewPCG(seed, 11))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
			if c.halfA {
				v[i] = bf16Round(v[i])
			}
		}
		return v
	}
	p := &exactProblem{c: c, transA: transA, trans: transB, accumulate: accumulate, k: exactK(accumulate)}
	p.a = randn(exactFullRows * p.k)
	p.b = randn(p.k * exactN)
	p.c0 = randn(exactFullRows * exactN)
	return p
}

// rowsA returns op(a)'s rows [off, off+m) in a's storage order.
func (p *exactProblem) rowsA(off, m int) []float32 {
	out := make([]float32, 0, m*p.k)
	if !p.transA { // (M, K)
		return append(out, p.a[off*p.k:(off+m)*p.k]...)
	}
	for k := 0; k < p.k; k++ { // (K, M): columns off … off+m−1 of each row
		out = append(out, p.a[k*exactFullRows+off:k*exactFullRows+off+m]...)
	}
	return out
}

func (p *exactProblem) shapeA(m int) []int {
	if p.transA {
		return []int{p.k, m}
	}
	return []int{m, p.k}
}

func (p *exactProblem) shapeB() []int {
	if p.trans {
		return []int{exactN, p.k}
	}
	return []int{p.k, exactN}
}

// product computes rows [off, off+m) of the product on b.
func (p *exactProblem) product(t *testing.T, b *Backend, w *model.Tensor, off, m int) []float32 {
	t.Helper()
	var a *model.Tensor
	if p.c.halfA {
		a = halfTensor(b, p.rowsA(off, m), p.shapeA(m)...)
	} else {
		a = model.NewFrom(b, p.rowsA(off, m), p.shapeA(m)...)
	}
	var c *model.Tensor
	if p.c.halfC {
		c = b.ActivationHalf(m, exactN)
	} else {
		c = model.NewFrom(b, p.c0[off*exactN:(off+m)*exactN], m, exactN)
	}
	before := b.d.Profile()
	b.MatMul(c, a, w, p.transA, p.trans, p.accumulate)
	p.last = b.d.Profile().Sub(before)
	out := model.Values(b, c)
	b.Release(a, c)
	if err := b.Err(); err != nil {
		t.Fatalf("M=%d at row %d: %v", m, off, err)
	}
	return out
}

// weight uploads op(b) as the case stores it.
func (p *exactProblem) weight(t *testing.T, b *Backend) *model.Tensor {
	t.Helper()
	w := model.NewFrom(b, p.b, p.shapeB()...)
	switch {
	case p.c.frozenB:
		if err := b.Freeze(w); err != nil {
			t.Fatal(err)
		}
	case p.c.shadowB:
		if ok, err := b.Shadow(w); err != nil || !ok {
			t.Fatalf("shadow: %v %v", ok, err)
		}
	}
	return w
}

// cpuReference is the full product on the CPU from the operands as the
// case rounds them (bf16 or tf32, nearest even), in float32.
func (p *exactProblem) cpuReference(t *testing.T) []float32 {
	t.Helper()
	round := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			switch {
			case p.c.prec == BF16 || p.c.frozenB || p.c.halfA || p.c.halfC:
				out[i] = bf16Round(x)
			case p.c.prec == TF32:
				u := math.Float32bits(x)
				u += 0xfff + (u >> 13 & 1)
				out[i] = math.Float32frombits(u &^ 0x1fff)
			default:
				out[i] = x
			}
		}
		return out
	}
	cb := fastcpu.NewBackend()
	a := model.NewFrom(cb, round(p.a), p.shapeA(exactFullRows)...)
	w := model.NewFrom(cb, round(p.b), p.shapeB()...)
	c := model.NewFrom(cb, p.c0, exactFullRows, exactN)
	cb.MatMul(c, a, w, p.transA, p.trans, p.accumulate)
	if err := cb.Err(); err != nil {
		t.Fatal(err)
	}
	return model.Values(cb, c)
}

// firstRowDiff returns the first row of sub (m rows from off) whose bits
// differ from full's, or −1.
func firstRowDiff(full, sub []float32, off, m int) (int, int) {
	for i := 0; i < m; i++ {
		for j := 0; j < exactN; j++ {
			if math.Float32bits(sub[i*exactN+j]) != math.Float32bits(full[(off+i)*exactN+j]) {
				return off + i, j
			}
		}
	}
	return -1, -1
}

// exactVariants runs f for every case, transpose and accumulate.
func exactVariants(t *testing.T, cases []gemmExactCase, f func(t *testing.T, p *exactProblem)) {
	seed := uint64(1)
	for _, c := range cases {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					if acc && c.halfC {
						continue // MatMul refuses accumulating into bf16
					}
					seed++
					p := newExactProblem(c, tA, tB, acc, seed)
					t.Run(fmt.Sprintf("%s/tA=%v/tB=%v/acc=%v", c.name, tA, tB, acc), func(t *testing.T) { f(t, p) })
				}
			}
		}
	}
}

// subOffset places a sub-batch of m rows somewhere other than row 0 where
// it can (different for different m).
func subOffset(m int) int { return (m * 37) % (exactFullRows - m + 1) }

func TestExactMatMulBatchInvariant(t *testing.T) {
	d := testDevice(t)
	if devKind == "emulator" {
		t.Setenv(cudaemu.GemmOrderEnv, "shape") // a product left on cuBLAS fails
	}
	// Two SMs, so that the full product (2 blocks of 128 rows) takes the
	// 128-row mma kernel and the sub-batches of up to 128 rows the 64-row
	// one (exactMMATileRows), as a training batch and a decode step do.
	defer func(sms int) { d.Info.SMs = sms }(d.Info.SMs)
	d.Info.SMs = 2
	exactVariants(t, exactCases, func(t *testing.T, p *exactProblem) {
		b := NewBackend(d, p.c.prec)
		b.SetBatchInvariant(true)
		b.exactNoMMA = p.c.noMMA
		if p.c.noWG {
			b.exactWG = -1
		}
		before := d.Profile()
		w := p.weight(t, b)
		full := p.product(t, b, w, 0, exactFullRows)
		e := EngineExactMMA
		switch {
		case p.c.noMMA || (p.c.prec != BF16 && !p.c.frozenB):
			e = EngineExactFFMA
		case b.exactWGMMA():
			e = EngineExactWG
		}
		if got, want := p.last.Flops[e], 2.0*exactFullRows*exactN*float64(p.k); got != want {
			t.Errorf("profile: %g flops on %s for the full product; want 2MNK = %g", got, e, want)
		}
		for _, m := range exactSubRows {
			for _, off := range []int{0, subOffset(m)} {
				sub := p.product(t, b, w, off, m)
				if i, j := firstRowDiff(full, sub, off, m); i >= 0 {
					t.Fatalf("M=%d from row %d: row %d column %d is %g (bits %#x) alone, %g (%#x) among %d rows",
						m, off, i, j, sub[(i-off)*exactN+j], math.Float32bits(sub[(i-off)*exactN+j]),
						full[i*exactN+j], math.Float32bits(full[i*exactN+j]), exactFullRows)
				}
			}
		}
		if n := d.Profile().Sub(before).GEMMs; n != 0 {
			t.Errorf("%d cuBLAS calls in exact mode; want none", n)
		}
		// Close to the CPU's product of the same rounded operands: only the
		// order of the fp32 sums differs (|Σ| ≤ √K·4 here, K ≤ 136), and a
		// bf16 c rounds to 8 significant bits.
		tol := numcheck.Tol{Atol: 2e-5, Rtol: 2e-5}
		if p.c.halfC {
			tol = numcheck.Tol{Atol: 1e-4, Rtol: 4e-3}
		}
		want := p.cpuReference(t)
		w64 := make([]float64, len(want))
		for i, v := range want {
			w64[i] = float64(v)
		}
		if _, err := numcheck.Compare(full, w64, tol); err != nil {
			t.Errorf("against the CPU: %v", err)
		}
		b.Release(w)
	})
}

// TestExactMatMulNeedsExact is the comparison above with exact mode off:
// on the emulator with its shape-dependent cuBLAS order (on a GPU, cuBLAS's
// algorithm choice) some row differs between the full product and a
// sub-batch, so the test above can fail.
func TestExactMatMulNeedsExact(t *testing.T) {
	d := testDevice(t)
	if devKind != "emulator" {
		t.Skip("cuBLAS's choice of algorithm by shape is the GPU's own: the emulator's order is set for it")
	}
	t.Setenv(cudaemu.GemmOrderEnv, "shape")
	cases := []gemmExactCase{exactCases[0], exactCases[3]} // fp32 and bf16 products
	exactVariants(t, cases, func(t *testing.T, p *exactProblem) {
		b := NewBackend(d, p.c.prec)
		w := p.weight(t, b)
		full := p.product(t, b, w, 0, exactFullRows)
		differ := 0
		for _, m := range exactSubRows {
			if i, _ := firstRowDiff(full, p.product(t, b, w, subOffset(m), m), subOffset(m), m); i >= 0 {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("cuBLAS products: every sub-batch equals the full product's rows; the batch-invariance test could not fail")
		}
		b.Release(w)
	})
}

// TestTrainingStepExactProducts: a whole training step (forward, backward,
// AdamW) of the tiny model in exact mode matches the CPU within
// TestTrainingStepMatchesCPU's tolerances; its forward runs every product
// (the projections, the LM head's chunks) on exact mode's kernels without
// one cuBLAS call (attention's products are the attention kernels'), and
// the backward on cuBLAS (model.Backward turns exact mode off: gradients
// need no batch invariance), after which exact mode is on again.
func TestTrainingStepExactProducts(t *testing.T) {
	for _, c := range stepCases {
		t.Run(string(c.prec), func(t *testing.T) {
			o := model.DefaultTiny()
			o.Vocab = 300
			cpu, gpu := tinyPair(t, c.prec, o)
			b := gpu.B.(*Backend)
			b.SetBatchInvariant(true)
			// Attention's own cuBLAS route (fp32 K/V) is not a MatMul: off,
			// so every cuBLAS call counted would be a product left there.
			b.ForceAttention(-1, 0)
			before := b.d.Profile()
			pass, err := gpu.Forward([]model.Sequence{{Tokens: []int32{1, 2, 3, 4, 5}, Start: 1}})
			if err != nil {
				t.Fatal(err)
			}
			pass.Release()
			if p := b.d.Profile().Sub(before); p.GEMMs != 0 || p.Flops[EngineExactMMA]+p.Flops[EngineExactWG]+p.Flops[EngineExactFFMA] == 0 {
				t.Errorf("%d cuBLAS calls and %g exact flops in an exact forward; want none and some",
					p.GEMMs, p.Flops[EngineExactMMA]+p.Flops[EngineExactWG]+p.Flops[EngineExactFFMA])
			}
			before = b.d.Profile()
			compareSteps(t, c, o, cpu, gpu, func(m *model.Model) *model.Params {
				return model.NewParams(m.B, m.Cfg) // every weight
			})
			p := b.d.Profile().Sub(before)
			if p.GEMMs == 0 || p.Flops[EngineExactMMA]+p.Flops[EngineExactWG]+p.Flops[EngineExactFFMA] == 0 || !b.IsBatchInvariant() {
				t.Errorf("%d cuBLAS calls and %g exact flops in an exact step, exact mode %v after; want the backward's, some and on",
					p.GEMMs, p.Flops[EngineExactMMA]+p.Flops[EngineExactWG]+p.Flops[EngineExactFFMA], b.IsBatchInvariant())
			}
		})
	}
}

// mmaRefShapes are the shapes TestExactMMAMatchesReference runs: M and N
// around the tile sizes (128) and the fragment sizes (16, 8), K odd, a
// multiple of 8 but not of 16 or 32, and past several chunks.
var mmaRefShapes = []struct{ m, n, k int }{
	{1, 8, 8}, {3, 37, 136}, {17, 129, 133}, {128, 128, 32}, {129, 130, 40}, {131, 257, 264}, {64, 1, 17}, {2, 300, 72},
}

// mmaRefOperand uploads vals (op(x) stored as the transpose says) at
// element offset off of a buffer: fp32, or bf16 storage (frozen, the
// values rounded to nearest even) when half. It returns the tensor to
// release and the operand as the kernels take it.
func mmaRefOperand(t *testing.T, b *Backend, vals []float32, off int, half bool) (*model.Tensor, exactOperand) {
	t.Helper()
	w := model.NewFrom(b, append(make([]float32, off), vals...), off+len(vals))
	if half {
		if err := b.Freeze(w); err != nil {
			t.Fatal(err)
		}
	}
	p, isHalf, ok := b.operand("test", 0, w)
	if !ok {
		t.Fatal(b.Err())
	}
	return w, exactOperand{p + uint64(off*widthOf(isHalf)), isHalf}
}

// TestExactMMAMatchesReference holds the tiled tensor-core kernels (both
// block heights, as matMulExact launches them: mma.sync, gemm_exact_mma_*
// and gemm_exact_mma64_*, and, on a device with the sm_90a kernels, warpgroup
// MMA, gemm_exact_wg_* and gemm_exact_wg64_*) to gemm_exact_mma_ref bit for
// bit: every storage of a, b and c, both transposes, accumulate, ragged M,
// N and K, and operands at an odd element offset (no 16-byte loads or
// cp.async, the element-wise paths). The reference is the arithmetic the
// kernels must keep (2·⌈K/32⌉ mma k-steps of 16 in order from +0, then c +
// dot), so any change of fragment layout, K order or epilogue shows as a
// differing bit (the emulator's mma and wgmma sum a k-step's 16 products in
// order, so an order change does). On a GPU the warpgroup kernels are held
// to it too: nothing promises HGMMA rounds a k-step as HMMA does, and where
// it does not, this test says so.
func TestExactMMAMatchesReference(t *testing.T) {
	d := testDevice(t)
	b := NewBackend(d, BF16)
	b.SetBatchInvariant(true)
	if !b.exactMMA() {
		t.Skip("no mma.sync below sm_80")
	}
	families := []bool{false} // wg: the warpgroup-MMA kernels
	if d.Info.HasWGMMA() {
		families = append(families, true)
	}
	rng := rand.New(rand.NewPCG(7, 46))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	round := func(v []float32) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = bf16Round(x)
		}
		return out
	}
	variant := 0
	for _, s := range mmaRefShapes {
		for storage := 0; storage < 8; storage++ { // bit 0: a bf16, bit 1: b bf16, bit 2: c bf16
			for tr := 0; tr < 4; tr++ {
				for _, acc := range []bool{false, true} {
					halfA, halfB, halfC := storage&1 != 0, storage&2 != 0, storage&4 != 0
					if acc && halfC {
						continue
					}
					variant++
					off := variant % 2 // every other product misaligned
					rows := exactMMARows
					if variant/2%2 == 1 { // both tiles, aligned and not
						rows = exactMMARowsSmall
					}
					name := fmt.Sprintf("%dx%dx%d/%s/tA=%v/tB=%v/acc=%v/off=%d/rows=%d", s.m, s.n, s.k,
						storageLetter(halfA)+storageLetter(halfB)+storageLetter(halfC), tr&1 != 0, tr&2 != 0, acc, off, rows)
					av, bv, cv := randn(s.m*s.k), randn(s.k*s.n), randn(s.m*s.n)
					got, want := mmaRefRun(t, b, families, rows, s.m, s.n, s.k, av, bv, cv, round, off, halfA, halfB, halfC, tr&1 != 0, tr&2 != 0, acc)
					for f, wg := range families {
						for i := range want {
							w := want[i]
							if halfC {
								w = bf16Round(w)
							}
							if g := got[f][i]; math.Float32bits(g) != math.Float32bits(w) {
								t.Fatalf("%s/wg=%v: c[%d, %d] = %g (bits %#x), reference %g (%#x)", name, wg, i/s.n, i%s.n,
									g, math.Float32bits(g), w, math.Float32bits(w))
							}
						}
					}
				}
			}
		}
	}
}

// mmaRefRun computes c = op(a)·op(b) (+ c0) with the tiled kernels of block
// height rows, one family each (families: warpgroup MMA or not), and with
// the reference (on the operands rounded to bf16 in fp32 storage, which
// the reference rounds again to the same bits), returning both.
func mmaRefRun(t *testing.T, b *Backend, families []bool, rows, M, N, K int, av, bv, cv []float32, round func([]float32) []float32,
	off int, halfA, halfB, halfC, transA, transB, acc bool) (got [][]float32, want []float32) {
	t.Helper()
	sai, sak := int64(K), int64(1)
	if transA {
		sai, sak = 1, int64(M)
	}
	sbj, sbk := int64(1), int64(N)
	if transB {
		sbj, sbk = int64(K), 1
	}
	ta, x := mmaRefOperand(t, b, av, off, halfA)
	tb, y := mmaRefOperand(t, b, bv, off, halfB)
	accFlag := int32(0)
	if acc {
		accFlag = 1
	}
	for _, wg := range families {
		var c *model.Tensor
		if halfC {
			c = b.ActivationHalf(M, N)
		} else {
			c = model.NewFrom(b, cv, M, N)
		}
		pc, _, _ := b.operand("test", 0, c)
		b.launchExactMMA(wg, rows, storageLetter(halfA)+storageLetter(halfB)+storageLetter(halfC), M, N,
			[]any{pc, x.p, y.p, int32(M), int32(N), int32(K), sai, sak, sbj, sbk, accFlag})
		got = append(got, model.Values(b, c))
		b.Release(c)
	}

	ra, rx := mmaRefOperand(t, b, round(av), 0, false)
	rb, ry := mmaRefOperand(t, b, round(bv), 0, false)
	rc := model.NewFrom(b, cv, M, N)
	prc, _, _ := b.operand("test", 0, rc)
	b.launch("gemm_exact_mma_ref", [3]int{(N + 7) / 8, (M + 15) / 16}, 32,
		prc, rx.p, ry.p, int32(M), int32(N), int32(K), sai, sak, sbj, sbk, accFlag)
	want = model.Values(b, rc)
	b.Release(ta, tb, ra, rb, rc)
	if err := b.Err(); err != nil {
		t.Fatalf("%d × %d × %d: %v", M, N, K, err)
	}
	return got, want
}

// TestExactMMATileRows: 128-row tiles where their grid gives every SM a
// block, 64-row tiles (twice the blocks) below.
func TestExactMMATileRows(t *testing.T) {
	for _, c := range []struct{ m, n, sms, want int }{
		{1, 2048, 132, exactMMARowsSmall},       // a decode step: 16 blocks of 128 rows
		{256, 2048, 132, exactMMARowsSmall},     // 2 × 16 = 32
		{256, 151936, 132, exactMMARows},        // an LM head chunk: 2 × 1187
		{16384, 2048, 132, exactMMARows},        // a training batch: 128 × 16
		{1056, 2048, 132, exactMMARows},         // 9 × 16 = 144 ≥ 132
		{128 * 11, 128 * 12, 132, exactMMARows}, // exactly one block an SM
		{128*11 - 1, 128 * 12, 132, exactMMARows},
		{128 * 10, 128 * 13, 132, exactMMARowsSmall}, // 130 blocks
	} {
		if got := exactMMATileRows(c.m, c.n, c.sms); got != c.want {
			t.Errorf("M=%d N=%d on %d SMs: %d-row tiles, want %d", c.m, c.n, c.sms, got, c.want)
		}
	}
}
