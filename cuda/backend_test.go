package cuda

// Backend tests run on a real GPU where libcuda is found, and otherwise on
// the CPU emulator (internal/testinfra/cudaemu): the same bindings, launches, cuBLAS
// calls and kernel arithmetic, executed by a g++ build of the kernels behind
// a fake libcuda/libcublas/libnvrtc. Only the emulator's absence (no g++)
// skips them, with a message, or fails them where GDROTRAIN_REQUIRE_EMULATOR
// is set (as in CI). The emulator's modes (GDROTRAIN_EMU_FAST16BF=tf32,
// GDROTRAIN_EMU_FMA=1; see internal/testinfra/cudaemu) change its rounding as a GPU
// might; every tolerance here holds in each, and make test runs them.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	fastcpu "github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/model/backendtest"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/sampler"
)

var (
	devOnce sync.Once
	testDev *Device
	devErr  error
	devKind string
	emuDir  string
)

// testDeviceEnv=gpu makes the tests run on the GPU or fail: never on the
// emulator, never skipped for want of a device, and with
// GDROTRAIN_CUDA_LIB_DIR read as the folder of the real libraries. The GPU
// kit (scripts/gpu_kit.sh) sets it, so a node whose GPU cannot be opened
// reports failures instead of an emulator run or a row of skips that pass.
const testDeviceEnv = "GDROTRAIN_TEST_DEVICE"

// testDevice opens the GPU, or the emulator where there is none.
func testDevice(t *testing.T) *Device {
	t.Helper()
	devOnce.Do(func() {
		want := os.Getenv(testDeviceEnv)
		if want != "" && want != "gpu" {
			devErr = fmt.Errorf("%s=%q: want gpu or nothing", testDeviceEnv, want)
			return
		}
		if os.Getenv(LibDirEnv) == "" || want == "gpu" {
			d, err := Open(0, t.Logf)
			if err == nil {
				testDev, devKind = d, "gpu"
				return
			}
			if !IsNoGPU(err) || want == "gpu" {
				devErr, devKind = err, "gpu"
				return
			}
		}
		if !cudaemu.Available() {
			devKind = "none"
			return
		}
		dir, err := os.MkdirTemp("", "gdrotrain-emu-")
		if err != nil {
			devErr = err
			return
		}
		emuDir = dir
		// The rank processes of the NCCL and data-parallel tests (this
		// binary re-executed, this environment inherited) build the same
		// emulator: they take its objects from here instead of running
		// g++ again (about 10 CPU seconds each, some 40 processes a run).
		if os.Getenv(cudaemu.CacheEnv) == "" {
			os.Setenv(cudaemu.CacheEnv, filepath.Join(dir, "objects"))
		}
		if devErr = cudaemu.Build(dir, Sources()); devErr != nil {
			return
		}
		os.Setenv(LibDirEnv, dir)
		os.Setenv(CacheDirEnv, filepath.Join(dir, "kernel-cache"))
		testDev, devErr = Open(0, t.Logf)
		devKind = "emulator"
	})
	if devErr != nil {
		t.Fatalf("open %s: %v", devKind, devErr)
	}
	if testDev == nil {
		// A failure instead where GDROTRAIN_REQUIRE_EMULATOR is set (CI).
		cudaemu.SkipUnavailable(t, "there is no GPU and no g++ for the CPU emulator")
	}
	if devKind == "emulator" {
		// The emulator's schedule numbers launches from the scope's start:
		// a test of its own replays alone, under -run, with the seed it
		// prints when it fails.
		os.Setenv(cudaemu.SeedScopeEnv, t.Name())
		t.Cleanup(func() {
			if t.Failed() {
				seed := os.Getenv(cudaemu.SeedEnv)
				if seed == "" {
					seed = "1"
				}
				t.Logf("emulator schedule: %s=%s %s=%q (replays with: %s=%s go test -run '^%s$' ./cuda/)",
					cudaemu.SeedEnv, seed, cudaemu.SeedScopeEnv, t.Name(), cudaemu.SeedEnv, seed, t.Name())
			}
		})
	}
	return testDev
}

func TestMain(m *testing.M) {
	code := m.Run()
	if emuDir != "" {
		os.RemoveAll(emuDir)
	}
	os.Exit(code)
}

// TestConformance runs the backend conformance suite with fp32 products.
func TestConformance(t *testing.T) {
	d := testDevice(t)
	t.Logf("device: %s (%s)", d.Info, devKind)
	// Kernels accumulate in float32 where the CPU reference uses float64.
	o := backendtest.Options{Tol: numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}, FDTol: backendtest.FP32.FDTol}
	backendtest.Run(t, NewBackend(d, FP32), o)
}

// TestConformanceBF16 runs the suite with bf16 tensor-core products. MatMul
// rounds its inputs (to 8 significant bits, so an output summing K
// unit-size products errs by ≈ 2⁻⁸·√K; the suite scales MatMul's atol by
// √K), and so does the prefill of AttentionHeadDims where it takes the
// fused kernels (head dims in steps of 16 up to 128): TestAttentionMatchesCPU's
// bf16 tolerance. Every other op is TestConformance's fp32 kernel and keeps
// its tolerance. Observed on the emulator in its three modes (go test -v
// prints each check's share of its tolerance): MatMul's worst element takes
// 43 % of 2e-2·√K + 2e-2·|want| (31×33×127, |err| 0.065; 5 % with tf32
// inputs); the other ops at most 1 % of 2e-5 + 2e-4·|want|.
func TestConformanceBF16(t *testing.T) {
	d := testDevice(t)
	o := backendtest.Options{Tol: numcheck.Tol{Atol: 2e-5, Rtol: 2e-4}, FDTol: backendtest.FP32.FDTol,
		Ops: map[string]numcheck.Tol{"MatMul": {Atol: 2e-2, Rtol: 2e-2}, "AttentionHeadDims": {Atol: 2e-2, Rtol: 2e-2}}}
	backendtest.Run(t, NewBackend(d, BF16), o)
}

// pair runs the same op on the CPU reference and the CUDA backend.
type pair struct {
	t   *testing.T
	cpu model.Backend
	gpu model.Backend
	rng *rand.Rand
}

func newPair(t *testing.T, prec Precision) *pair {
	return &pair{t: t, cpu: fastcpu.NewBackend(), gpu: NewBackend(testDevice(t), prec), rng: rand.New(rand.NewPCG(5, 9))}
}

func (p *pair) randn(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * p.rng.NormFloat64())
	}
	return out
}

// check runs op on both backends and compares every output it returns.
func (p *pair) check(name string, tol numcheck.Tol, op func(b model.Backend) []float32) {
	p.t.Helper()
	want := op(p.cpu)
	got := op(p.gpu)
	if err := p.cpu.Err(); err != nil {
		p.t.Fatalf("%s: cpu: %v", name, err)
	}
	if err := p.gpu.Err(); err != nil {
		p.t.Fatalf("%s: cuda: %v", name, err)
	}
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	st, err := numcheck.Compare(got, w, tol)
	if err != nil {
		p.t.Errorf("%s: %v", name, err)
		return
	}
	p.t.Logf("%-32s max abs err %.2e over %d values", name, st.MaxAbs, len(got))
}

// TestAttentionMatchesCPU covers training segments (packed sequences, more
// than one key tile), decode segments (one query over a cache slot) and the
// head sizes of the tiny models and of Qwen3 (D = 128), with each route:
// the per-row kernels, the tiled kernels, the tensor-core products
// (backend_attention_gemm.go), the fused tensor-core kernels
// (backend_attention_flash.go, bf16 operands) and the automatic choice.
func TestAttentionMatchesCPU(t *testing.T) {
	fp32 := numcheck.Tol{Atol: 3e-5, Rtol: 3e-4}
	// bf16 operands: q, k, v, the probabilities and dout rounded to 2⁻⁹
	// relative; the worst errors observed are 4.4e-3 (outputs, values
	// ≈ 1) and 2.2e-2 (gradients of up to ≈ 4).
	bf16 := numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}
	for _, mode := range []struct {
		name               string
		tiles, gemm, flash int
		tol                numcheck.Tol
	}{{"row kernels", -1, -1, -1, fp32}, {"tiled kernels", 1, -1, -1, fp32}, {"tensor-core products", 0, 1, -1, fp32},
		{"fused tensor-core kernels", 0, -1, 1, bf16}, {"split-K decode kernels", 0, -1, -2, fp32}, {"auto", 0, 0, 0, fp32}} {
		t.Run(mode.name, func(t *testing.T) { attentionMatchesCPU(t, mode.tiles, mode.gemm, mode.flash, mode.tol) })
	}
}

// attentionMatchesCPU runs the cases with a route forced; flash −2 forces
// the split-K decode kernels for every call (the fused ones off).
func attentionMatchesCPU(t *testing.T, tiles, gemm, flash int, tol numcheck.Tol) {
	p := newPair(t, FP32)
	gb := p.gpu.(*Backend)
	gb.attnTiles, gb.attnGEMM, gb.attnFlash, gb.attnDecode = tiles, gemm, flash, -1
	if flash == -2 {
		gb.attnFlash, gb.attnDecode = -1, 1
	}
	before := p.gpu.(*Backend).Device().Launches()
	defer func() {
		after := p.gpu.(*Backend).Device().Launches()
		if flash == -2 {
			n := 0
			for _, per := range []int{1, 2, 4, 8} {
				k := decodeSplitKernel("", per)
				n += after[k] - before[k]
			}
			if n == 0 {
				t.Errorf("split-K mode: attn_decode_split_p* never launched")
			}
			return
		}
		if flash > 0 {
			for _, k := range []string{"attn_flash_fwd", "attn_flash_fwd_kvh", "attn_flash_bwd_dq", "attn_flash_bwd_dkv"} {
				if k != "attn_flash_fwd_kvh" && after[k]-before[k] == 0 {
					t.Errorf("fused mode: kernel %s never launched", k)
				}
			}
			return
		}
		if n := after["attn_gemm_softmax"] - before["attn_gemm_softmax"]; (gemm > 0) != (n > 0) && gemm != 0 {
			t.Errorf("gemm mode %d: attn_gemm_softmax launched %d times", gemm, n)
		}
		if gemm > 0 {
			for _, k := range []string{"attn_fwd", "attn_fwd_tiled", "attn_bwd_dq", "attn_bwd_dq_tiled", "attn_bwd_dkv", "attn_bwd_dkv_tiled"} {
				if n := after[k] - before[k]; n > 0 {
					t.Errorf("tensor-core mode: kernel %s launched %d times", k, n)
				}
			}
			return
		}
		for _, k := range []string{"attn_fwd", "attn_fwd_tiled", "attn_bwd_dq", "attn_bwd_dq_tiled", "attn_bwd_dkv", "attn_bwd_dkv_tiled"} {
			n := after[k] - before[k]
			tiled := strings.HasSuffix(k, "_tiled")
			if (tiles > 0 && !tiled && n > 0) || (tiles < 0 && tiled && n > 0) || (tiles != 0 && n == 0 && tiled == (tiles > 0)) {
				t.Errorf("mode %d: kernel %s launched %d times", tiles, k, n)
			}
		}
	}()
	cases := []attnCase{
		{"packed training", 4, 2, 16, 330, 330, []model.Segment{{Q0: 0, QLen: 20, K0: 0, KLen: 20}, {Q0: 20, QLen: 310, K0: 20, KLen: 310}}, true},
		{"qwen3 head dim", 8, 2, 128, 140, 140, []model.Segment{{Q0: 0, QLen: 140, K0: 0, KLen: 140}}, true},
		{"decode over slots", 4, 1, 16, 3, 600, []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 290}, {Q0: 1, QLen: 1, K0: 300, KLen: 1}, {Q0: 2, QLen: 1, K0: 301, KLen: 299}}, false},
		{"chunked prefill", 2, 2, 16, 50, 200, []model.Segment{{Q0: 0, QLen: 50, K0: 100, KLen: 100}}, true},
		{"odd tiles, D=36", 6, 3, 36, 77, 77, []model.Segment{{Q0: 0, QLen: 33, K0: 0, KLen: 33}, {Q0: 33, QLen: 1, K0: 33, KLen: 1}, {Q0: 34, QLen: 43, K0: 34, KLen: 43}}, true},
	}
	if tiles != 0 || gemm != 0 || flash != 0 {
		// Every head dim the forced route admits (model.Config.Validate
		// takes every even one; the backend serves them up to MaxHeadDim):
		// one query over 33 cache rows (past a 32-key tile) beside a
		// 9-token sequence, forward and backward. The backend's own choice
		// runs them in the conformance suite (AttentionHeadDims).
		segs := []model.Segment{{Q0: 0, QLen: 1, K0: 0, KLen: 33}, {Q0: 1, QLen: 9, K0: 33, KLen: 9}}
		for _, D := range headDims() { // a sample under -short
			admitted := (tiles <= 0 || gb.useTiles(D, segs, 10)) && (flash != 1 || gb.useFlash(D, segs, 10)) &&
				(flash != -2 || gb.useDecodeSplit(D, 4, 2))
			if admitted {
				cases = append(cases, attnCase{fmt.Sprintf("head_dim %d", D), 4, 2, D, 10, 42, segs, true})
			}
		}
	}
	for _, c := range cases {
		q, k, v := p.randn(c.nq*c.H*c.D, 1), p.randn(c.nk*c.G*c.D, 1), p.randn(c.nk*c.G*c.D, 1)
		dout := p.randn(c.nq*c.H*c.D, 1)
		scale := float32(1 / math.Sqrt(float64(c.D)))
		p.check("attention "+c.name, tol, func(b model.Backend) []float32 {
			Q, K, Vt := model.NewFrom(b, q, c.nq, c.H, c.D), model.NewFrom(b, k, c.nk, c.G, c.D), model.NewFrom(b, v, c.nk, c.G, c.D)
			out, lse := b.New(c.nq, c.H, c.D), b.New(c.nq, c.H)
			b.Attention(out, lse, Q, K, Vt, c.segs, scale)
			res := model.Values(b, out, lse)
			if c.backward {
				dq, dk, dv := b.New(c.nq, c.H, c.D), b.New(c.nk, c.G, c.D), b.New(c.nk, c.G, c.D)
				b.AttentionBackward(dq, dk, dv, model.NewFrom(b, dout, c.nq, c.H, c.D), Q, K, Vt, out, lse, c.segs, scale)
				res = append(res, model.Values(b, dq, dk, dv)...)
			}
			return res
		})
	}
}

// attnCase is one attention comparison: H query heads over G key/value
// heads of size D, nq query rows and nk key rows in segments.
type attnCase struct {
	name     string
	H, G, D  int
	nq, nk   int
	segs     []model.Segment
	backward bool
}

// TestAttentionHalf: attention on bf16 activations (a training pass under
// bf16 products: q, k, v and out bf16, model.HalfPrecision) against the
// CPU's fp32 attention of the same bf16 values, on every route. The fused
// kernels read and write bf16 directly (the _h kernels); the other routes
// widen the queries (and, backward, q, k, v) and round the output. The
// CPU's output is rounded as the GPU's is. Tolerance: the fused route's
// bf16 one from TestAttentionMatchesCPU (its probabilities and dout are
// rounded as before). Observed on the emulator: the fused route's worst
// |err| 2.4e-2 (a D = 128 gradient; 2.2e-2 with fp32 inputs); the widened
// per-row and tiled routes' 9.8e-4 (fp32 kernels on the same values; the
// rounded output and the δ = Σ dO ⊙ O it feeds); the tensor-core
// products' 1.6e-2 (bf16 products, as with fp32 activations).
func TestAttentionHalf(t *testing.T) {
	bf16 := numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}
	for _, mode := range []struct {
		name                   string
		tiles, gemm, flash, wg int
		want                   []string // kernels the route must launch
	}{
		{"fused", 0, -1, 1, -1, []string{"attn_flash_fwd_h", "attn_flash_bwd_dq_h", "attn_flash_bwd_dkv_h", "attn_delta_h"}},
		// The emulator is an sm_90 device: head dim 128 takes the warpgroup-MMA kernels.
		{"fused, warpgroup MMA", 0, -1, 1, 0, []string{"attn_wg_fwd_h", "attn_wg_bwd_dq_h", "attn_wg_bwd_dkv_h", "attn_flash_fwd_h"}},
		{"row kernels", -1, -1, -1, 0, []string{"attn_fwd", "attn_bwd_dq", "attn_delta_h", "bf16_to_f32"}},
		{"tiled kernels", 1, -1, -1, 0, []string{"attn_fwd_tiled", "attn_bwd_dq_tiled", "bf16_to_f32"}},
		{"tensor-core products", 0, 1, -1, 0, []string{"attn_gemm_softmax", "attn_gemm_probs", "bf16_to_f32"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			p := newPair(t, BF16)
			gb := p.gpu.(*Backend)
			if info := gb.Device().Info; mode.wg == 0 && mode.flash > 0 && !info.HasWGMMA() {
				t.Skipf("the warpgroup-MMA kernels run on sm_90 only (this device: sm_%d%d)", info.Major, info.Minor)
			}
			gb.attnTiles, gb.attnGEMM, gb.attnFlash, gb.attnDecode, gb.attnWG = mode.tiles, mode.gemm, mode.flash, -1, mode.wg
			before := gb.Device().Launches()
			attentionHalfCases(p, bf16)
			after := gb.Device().Launches()
			for _, k := range mode.want {
				if after[k] == before[k] {
					t.Errorf("kernel %s never launched", k)
				}
			}
		})
	}
}

// attentionHalfCases runs forward and backward of training-shaped cases
// with bf16 activations on the GPU and fp32 copies of them on the CPU.
func attentionHalfCases(p *pair, tol numcheck.Tol) {
	cases := []struct {
		name    string
		H, G, D int
		segs    []model.Segment
	}{
		{"packed training", 4, 2, 16, []model.Segment{{Q0: 0, QLen: 20, K0: 0, KLen: 20}, {Q0: 20, QLen: 310, K0: 20, KLen: 310}}},
		{"qwen3 head dim", 8, 2, 128, []model.Segment{{Q0: 0, QLen: 140, K0: 0, KLen: 140}}},
		{"odd tiles, D=36", 6, 3, 36, []model.Segment{{Q0: 0, QLen: 33, K0: 0, KLen: 33}, {Q0: 33, QLen: 43, K0: 33, KLen: 43}}},
	}
	rounded := func(n int) []float32 {
		v := p.randn(n, 1)
		for i := range v {
			v[i] = bf16Round(v[i])
		}
		return v
	}
	for _, c := range cases {
		n := c.segs[len(c.segs)-1].Q0 + c.segs[len(c.segs)-1].QLen
		q, k, v := rounded(n*c.H*c.D), rounded(n*c.G*c.D), rounded(n*c.G*c.D)
		dout := p.randn(n*c.H*c.D, 1)
		scale := float32(1 / math.Sqrt(float64(c.D)))
		p.check("bf16 attention "+c.name, tol, func(b model.Backend) []float32 {
			Q, K, V := halfTensor(b, q, n, c.H, c.D), halfTensor(b, k, n, c.G, c.D), halfTensor(b, v, n, c.G, c.D)
			out, lse := halfTensor(b, nil, n, c.H, c.D), b.New(n, c.H)
			b.Attention(out, lse, Q, K, V, c.segs, scale)
			res := model.Values(b, out, lse)
			if _, ok := b.(model.HalfPrecision); !ok {
				for i := range res[:out.Numel()] { // the GPU keeps a rounded output
					res[i] = bf16Round(res[i])
				}
				b.Upload(out, res[:out.Numel()])
			}
			dq, dk, dv := b.New(n, c.H, c.D), b.New(n, c.G, c.D), b.New(n, c.G, c.D)
			b.AttentionBackward(dq, dk, dv, model.NewFrom(b, dout, n, c.H, c.D), Q, K, V, out, lse, c.segs, scale)
			return append(res, model.Values(b, dq, dk, dv)...)
		})
	}
}

// halfTensor is a bf16 activation holding vals (already bf16 values) where
// the backend has them, else an fp32 tensor; nil vals leaves it unwritten.
func halfTensor(b model.Backend, vals []float32, shape ...int) *model.Tensor {
	as, ok := b.(model.HalfPrecision)
	if !ok {
		return model.NewFrom(b, vals, shape...)
	}
	t := as.ActivationHalf(shape...)
	if vals != nil {
		cols := shape[len(shape)-1]
		rows := len(vals) / cols
		b.MatMul(t.View(rows, cols), model.NewFrom(b, vals, rows, cols), model.NewFrom(b, identity(cols), cols, cols), false, false, false) // exact
	}
	return t
}

// tinyPair returns the same random tiny model on the CPU and on the GPU.
func tinyPair(t *testing.T, prec Precision, o model.RandomOptions) (cpu, gpu *model.Model) {
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	cb, gb := fastcpu.NewBackend(), NewBackend(testDevice(t), prec)
	cpu = &model.Model{Cfg: cfg, B: cb, P: model.RandomParams(cb, cfg, 17, 0.2, 0.3)}
	gpu = &model.Model{Cfg: cfg, B: gb, P: model.RandomParams(gb, cfg, 17, 0.2, 0.3)}
	return cpu, gpu
}

// TestTrainingStepMatchesCPU runs forward, backward, clipping and one AdamW
// step of a tiny model on both backends and compares log-probabilities,
// entropies, every gradient, the gradient norm (relative error within the
// gradient rtol) and the updated weights. The worst share of each tolerance
// observed on the emulator, over its three modes (go test -v prints them):
//
//	         log-probs  entropy  gradients  grad norm     updated weights
//	fp32     1 %        0 %      1 %        2e-7 rel      1 %
//	bf16     37 %       12 %     32 %       1.6e-3 rel    23 %
//
// bf16's worst are the log-probs (|err| 0.076 on values near −5.7), the
// embedding's gradient (|err| 0.0079) and its updated rows (|err| 2.8e-5);
// with tf32 product inputs every bf16 figure is ≤ 4 %.
func TestTrainingStepMatchesCPU(t *testing.T) {
	for _, c := range stepCases {
		t.Run(string(c.prec), func(t *testing.T) {
			o := model.DefaultTiny()
			o.Vocab = 300
			cpu, gpu := tinyPair(t, c.prec, o)
			compareSteps(t, c, o, cpu, gpu, func(m *model.Model) *model.Params {
				return model.NewParams(m.B, m.Cfg) // every weight
			})
		})
	}
}

// stepCase is a precision and the tolerances of a training step's
// log-probs, gradients and updated parameters against the CPU's.
type stepCase struct {
	prec              Precision
	logp, grad, param numcheck.Tol
}

var stepCases = []stepCase{
	{FP32, numcheck.Tol{Atol: 1e-4, Rtol: 1e-4}, numcheck.Tol{Atol: 1e-4, Rtol: 2e-3}, numcheck.Tol{Atol: 1e-6, Rtol: 1e-5}},
	// bf16 products: ≈ 2⁻⁸ relative error per product, compounded
	// over layers; AdamW's normalised step (eps 0.1, below) keeps the
	// updated weights within 1e-4 + 1e-3·|w|.
	{BF16, numcheck.Tol{Atol: 5e-2, Rtol: 2e-2}, numcheck.Tol{Atol: 2e-2, Rtol: 2e-2}, numcheck.Tol{Atol: 1e-4, Rtol: 1e-3}},
}

// Adam's first step is lr·g/(|g|+eps): with a tiny eps it is sign(g),
// which flips for near-zero gradients at rounding noise; eps = 0.1 makes
// the update a smooth function of g (AdamW itself is compared exactly by
// the self-test's adamw case).
var stepAdamW = optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 0.1, WeightDecay: 0.01}

// compareSteps runs forward, backward, clipping and one AdamW step of the
// models' trainable parameters (model.Trainable: the weights, or the
// adapters) on both backends and compares log-probabilities, entropies,
// every gradient, the gradient norm (relative error within the gradient
// rtol) and the updated parameters. like returns a set laid out as m's
// trainable parameters, to check the gradients' layout against.
func compareSteps(t *testing.T, c stepCase, o model.RandomOptions, cpu, gpu *model.Model, like func(m *model.Model) *model.Params) {
	t.Helper()
	seqs, dl := randomSeqs(rand.New(rand.NewPCG(1, 2)), o.Vocab, [][2]int{{40, 10}, {23, 5}})
	type result struct {
		logp, ent     []float32
		grads, params map[string][]float32
		norm          float64
	}
	run := func(m *model.Model) result {
		pass, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		var r result
		for i := range pass.LogProbs {
			r.logp = append(r.logp, pass.LogProbs[i]...)
			r.ent = append(r.ent, pass.Entropy[i]...)
		}
		tr := m.Trainable()
		grads := model.NewLike(m.B, m.Cfg, tr)
		if len(grads.Named(m.Cfg)) != len(like(m).Named(m.Cfg)) {
			t.Fatalf("%d gradient tensors, want %d", len(grads.Named(m.Cfg)), len(like(m).Named(m.Cfg)))
		}
		if err := m.Backward(pass, dl, grads); err != nil {
			t.Fatal(err)
		}
		r.grads = snapshot(m, grads)
		if r.norm, err = optim.ClipGradNorm(m.B, m.Cfg, grads, 0.5); err != nil {
			t.Fatal(err)
		}
		opt := optim.NewAdamWFor(m.B, m.Cfg, tr, stepAdamW)
		if err := opt.Update(m.B, m.Cfg, tr, grads, 1e-2); err != nil {
			t.Fatal(err)
		}
		r.params = snapshot(m, tr)
		return r
	}
	want, got := run(cpu), run(gpu)
	compare(t, "log-probs", got.logp, want.logp, c.logp)
	compare(t, "entropy", got.ent, want.ent, c.logp)
	for name := range want.grads {
		compare(t, "grad "+name, got.grads[name], want.grads[name], c.grad)
		compare(t, "updated "+name, got.params[name], want.params[name], c.param)
	}
	if rel := math.Abs(got.norm-want.norm) / want.norm; rel > c.grad.Rtol {
		t.Errorf("grad norm %.6g, cpu %.6g (rel %.1e)", got.norm, want.norm, rel)
	}
	t.Logf("%s: grad norm cuda %.6f cpu %.6f", c.prec, got.norm, want.norm)
}

// Every op against the CPU on awkward sizes, and a greedy KV-cached decode
// against the CPU's, are the GPU self-test's checks (cuda/selftest), which
// its tests run on this device in fp32, bf16 and tf32.

// greedyTieTol is how close two logits (or log-probs) must be on the CPU for
// the device to pick either in a greedy decode. On the emulator (all three
// modes) the largest logit error is ≈ 9e-6 and the CPU's smallest top-2 gap
// 3.2e-3: 1e-4 is ten times the error and still a tie.
const greedyTieTol = 1e-4

// randomSeqs draws sequences of (length, response start) pairs and a
// log-prob gradient for each response token (N(0, 1/400)).
func randomSeqs(rng *rand.Rand, vocab int, shapes [][2]int) ([]model.Sequence, [][]float32) {
	var seqs []model.Sequence
	for _, sh := range shapes {
		seqs = append(seqs, model.Sequence{Tokens: randTokens(rng, sh[0], vocab), Start: sh[1]})
	}
	var dl [][]float32
	for _, s := range seqs {
		row := make([]float32, len(s.Tokens)-s.Start)
		for i := range row {
			row[i] = float32(rng.NormFloat64()) / 20
		}
		dl = append(dl, row)
	}
	return seqs, dl
}

func randTokens(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

func snapshot(m *model.Model, p *model.Params) map[string][]float32 {
	out := map[string][]float32{}
	p.Each(m.Cfg, func(name string, t *model.Tensor) { out[name] = model.Values(m.B, t) })
	return out
}

func compare(t *testing.T, what string, got, want []float32, tol numcheck.Tol) {
	t.Helper()
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	st, err := numcheck.Compare(got, w, tol)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	t.Logf("%s: max abs err %.2g, nmse %.2g, %.0f%% of the tolerance %g + %g·|want|", what, st.MaxAbs, st.NMSE, 100*st.Used, tol.Atol, tol.Rtol)
}

// TestNoGPUMessage: a machine whose driver reports no device gives one clear
// sentence, recognised by IsNoGPU (the CLI's auto mode falls back on it).
func TestNoGPUMessage(t *testing.T) {
	testDevice(t)
	if devKind != "emulator" {
		t.Skip("needs the emulator")
	}
	t.Setenv("GDROTRAIN_EMU_NO_DEVICE", "1")
	_, err := open(0, t.Logf)
	if err == nil || !IsNoGPU(err) {
		t.Fatalf("want a no-device error, got %v", err)
	}
	t.Logf("message: %v", err)
}

// TestFrozenReference holds a model's matrices in bf16 (as the reference
// policy is): downloads give exactly the bf16-rounded weights, the forward
// matches the CPU's within bf16 tolerance, other ops refuse the frozen
// tensors, and the matrices take half the bytes.
func TestFrozenReference(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 300
	o.Tied = true
	cpu, gpu := tinyPair(t, FP32, o)
	want := snapshot(cpu, cpu.P)
	// Freeze releases each fp32 block as its bf16 copy is made (no garbage
	// collection involved): memory in use drops at once by exactly the fp32
	// blocks' bytes less the bf16 ones', buffer for buffer.
	var tensors []*model.Tensor
	for _, np := range gpu.P.Named(gpu.Cfg) {
		tensors = append(tensors, *np.Ptr)
	}
	for _, l := range gpu.P.Layers {
		tensors = append(tensors, l.GateUp, l.QKV)
	}
	fp32 := map[*buffer]bool{}
	for _, w := range tensors {
		fp32[w.Store.(*buffer)] = true
	}
	dev := gpu.B.(*Backend).Device()
	before := dev.MemStats()
	frozen, err := gpu.Freeze()
	if err != nil || !frozen {
		t.Fatalf("freeze: %v, %v", frozen, err)
	}
	after := dev.MemStats()
	var freed, made int64
	halves := map[*buffer]bool{}
	for buf := range fp32 {
		if !buf.released {
			continue
		}
		freed += buf.size
		if h := buf.frozenAs; h == nil || !h.bf16 || halves[h] {
			t.Errorf("a released fp32 block of %d bytes has no bf16 copy of its own", buf.size)
		} else {
			halves[h] = true
			made += h.size
		}
	}
	t.Logf("tensor bytes in use: %d before freezing, %d after (%d fp32 blocks of %d bytes released, %d bytes of bf16 copies)",
		before.InUse, after.InUse, len(halves), freed, made)
	if len(halves) == 0 || made >= freed {
		t.Errorf("freezing released %d fp32 blocks (%d bytes) for %d bytes of bf16: want fewer bytes", len(halves), freed, made)
	}
	// (Leaked is no measure here: the collector may find other tests'
	// garbage meanwhile; what it returns waits for a synchronisation, which
	// Freeze does not make, so InUse and Live are exact.)
	if after.InUse != before.InUse-freed+made || after.Live != before.Live {
		t.Errorf("allocator after freezing: %d bytes in %d live buffers, want %d bytes in %d",
			after.InUse, after.Live, before.InUse-freed+made, before.Live)
	}
	got := snapshot(gpu, gpu.P)
	for name, w := range want {
		exp := make([]float32, len(w))
		for i, v := range w {
			exp[i] = v
			if !strings.HasSuffix(name, "norm.weight") && name != "model.embed_tokens.weight" {
				exp[i] = model.BF16ToF32(model.F32ToBF16(v))
			}
		}
		compare(t, "frozen "+name, got[name], exp, numcheck.Tol{})
	}
	// A frozen table is widened row by row by Embedding.
	ids := []int32{4, 0, 299, 4}
	table := model.NewFrom(gpu.B, want["model.embed_tokens.weight"], o.Vocab, o.Hidden)
	if err := gpu.B.(*Backend).Freeze(table); err != nil {
		t.Fatal(err)
	}
	rows := gpu.B.New(len(ids), o.Hidden)
	gpu.B.Embedding(rows, table, ids)
	var exp []float32
	for _, id := range ids {
		for _, v := range want["model.embed_tokens.weight"][int(id)*o.Hidden : int(id+1)*o.Hidden] {
			exp = append(exp, model.BF16ToF32(model.F32ToBF16(v)))
		}
	}
	compare(t, "frozen embedding rows", model.Values(gpu.B, rows), exp, numcheck.Tol{})
	rng := rand.New(rand.NewPCG(8, 8))
	seqs := []model.Sequence{{Tokens: randTokens(rng, 30, o.Vocab), Start: 4}}
	pc, err := cpu.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := gpu.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "frozen forward log-probs", pg.LogProbs[0], pc.LogProbs[0], numcheck.Tol{Atol: 5e-2, Rtol: 2e-2})
	b := gpu.B
	b.Scale(gpu.P.Layers[0].Q, 2)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "frozen") {
		t.Errorf("scale of a frozen tensor: want a refusal, got %v", err)
	}
	b.ResetErr()
}

// TestDevice opens the GPU or the emulator for the external tests
// (package cuda_test), which cannot see testDevice.
// It also logs the device, so a test log says where the tests ran.
func TestDeviceForExternalTests(t *testing.T) {
	d := testDevice(t)
	t.Logf("device: %s (%s)", d.Info, devKind)
}

// OpenTestDevice is testDevice for package cuda_test.
var OpenTestDevice = testDevice

// TestReportCoverage states where the CUDA tests ran and what was skipped;
// `make test` prints its lines so a run without a GPU says so.
func TestReportCoverage(t *testing.T) {
	if lib, err := findLibrary("nvrtc", os.Getenv(nvrtcDirEnv)); err != nil {
		t.Logf("CUDA coverage: kernels NOT compiled by NVRTC (%v)", err)
	} else if nv, err := loadNVRTC(lib); err == nil {
		a, b, _ := nv.Version()
		t.Logf("CUDA coverage: every kernel compiled for sm_80 and sm_90a by NVRTC %d.%d (%s)", a, b, lib.path)
	}
	devOnce.Do(func() {}) // do not open a device just for this report
	switch {
	case testDev == nil:
		t.Logf("CUDA coverage: backend tests skipped (no GPU, no g++ for the emulator)")
	case devKind == "gpu":
		t.Logf("CUDA coverage: backend tests ran on the GPU: %s", testDev.Info)
	default:
		t.Logf("CUDA coverage: backend tests ran on the CPU emulator (no GPU here): kernels, launches and cuBLAS calls checked; real-GPU speed, timing and memory NOT checked")
	}
}

// TestRowSampler checks TopK (with ties and NaN) against a sort on the host
// and ChunkSums against float64 sums on the host.
func TestRowSampler(t *testing.T) {
	b := NewBackend(testDevice(t), FP32)
	rng := rand.New(rand.NewPCG(3, 3))
	const R, V = 3, 2500
	host := make([]float32, R*V)
	for i := range host {
		host[i] = float32(math.Round(rng.NormFloat64()*40) / 10) // many ties
	}
	host[7] = float32(math.NaN())
	lg := model.NewFrom(b, host, R, V)
	for _, k := range []int{1, 5, 40} {
		ids, vals := b.TopK(lg, k)
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < R; r++ {
			row := host[r*V : (r+1)*V]
			order := make([]int, 0, V)
			for i, v := range row {
				if !math.IsNaN(float64(v)) {
					order = append(order, i)
				}
			}
			sort.SliceStable(order, func(a, c int) bool { return row[order[a]] > row[order[c]] })
			for j := 0; j < k; j++ {
				if int(ids[r][j]) != order[j] || vals[r][j] != row[order[j]] {
					t.Fatalf("k=%d row %d rank %d: got id %d (%v), want %d (%v)", k, r, j, ids[r][j], vals[r][j], order[j], row[order[j]])
				}
			}
		}
	}
	host[7] = 0.5
	lg = model.NewFrom(b, host, R, V)
	mx, sums := b.ChunkSums(lg, 0.7, 1024)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < R; r++ {
		row := host[r*V : (r+1)*V]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v)/0.7)
		}
		if mx[r] != m {
			t.Errorf("row %d max %v, want %v", r, mx[r], m)
		}
		for c := range sums[r] {
			var want float64
			for _, v := range row[c*1024 : min(V, (c+1)*1024)] {
				want += math.Exp(float64(v)/0.7 - m)
			}
			if math.Abs(sums[r][c]-want) > 1e-12*want {
				t.Errorf("row %d chunk %d: sum %v, want %v", r, c, sums[r][c], want)
			}
		}
	}
	// Chunks, the last one short (2500 = 2·1024 + 452), repeated and out of order.
	rows, chunks := []int32{2, 0, 1, 2, 0}, []int32{2, 0, 1, 2, 2}
	got := b.Chunks(lg, rows, chunks, 1024)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	for k := range rows {
		lo := int(rows[k])*V + int(chunks[k])*1024
		want := host[lo : lo+min(1024, V-int(chunks[k])*1024)]
		if !slices.Equal(got[k], want) {
			t.Errorf("chunk request %d (row %d, chunk %d): %d values, want %d, or values differ", k, rows[k], chunks[k], len(got[k]), len(want))
		}
	}
	b.Chunks(lg, []int32{0}, []int32{3}, 1024)
	if err := b.Err(); err == nil || !strings.Contains(err.Error(), "outside logits") {
		t.Errorf("chunk past the vocabulary: want a refusal, got %v", err)
	}
	b.ResetErr()
}

// TestGenerateMatchesCPU samples with the rollout package on both backends:
// greedy, top-k + top-p (validation), unfiltered temperature (training) and
// top-p alone (full rows) must give the same tokens, the first three
// through the device reductions.
//
// Greedy tokens are compared within a tolerance: a divergence where the two
// tokens' log-probs
// (each on its own backend) are within greedyTieTol is a near tie, and the
// rollout is compared no further. Sampled tokens are compared exactly: the
// same sampling key picks another token only when it falls within the
// probability error of a boundary of the cumulative distribution (log-prob
// errors here are ≤ 5e-6 in all three emulator modes, so ≲ 5e-6 per token,
// ≈ 1e-3 for the 180 sampled tokens on a device whose rounding differs
// again), and the log-probs cannot tell such a flip from a bug.
func TestGenerateMatchesCPU(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 3000 // several sampling chunks
	o.EOS = []int{2999}
	cpu, gpu := tinyPair(t, FP32, o)
	reqs := []sampler.Request{{UID: "a", Prompt: []int32{5, 17, 42, 99}, N: 3}, {UID: "b", Prompt: []int32{8, 1}, N: 2}}
	d := gpu.B.(*Backend).Device()
	var maxErr float64
	ntok := 0
	for _, c := range []struct {
		name   string
		p      sampler.Params
		kernel string
	}{
		{"greedy", sampler.Params{Temperature: 0, TopP: 1}, "topk_rows"},
		{"top-k top-p", sampler.Params{Temperature: 0.6, TopK: 20, TopP: 0.8}, "topk_rows"},
		{"unfiltered", sampler.Params{Temperature: 1, TopP: 1}, "chunk_sums"},
		{"top-p only", sampler.Params{Temperature: 1, TopP: 0.9}, ""},
	} {
		c.p.MaxNewTokens, c.p.MaxSlots, c.p.Seed, c.p.Step = 12, 4, 7, 3
		before := d.Launches()[c.kernel]
		want, err := sampler.Generate(context.Background(), cpu, reqs, c.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sampler.Generate(context.Background(), gpu, reqs, c.p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.kernel != "" && d.Launches()[c.kernel] == before {
			t.Errorf("%s: device path (%s) not used", c.name, c.kernel)
		}
		for i := range want {
			for j := range want[i] {
				w, g := want[i][j], got[i][j]
				n := len(w.Tokens)
				if fmt.Sprint(w.Tokens) != fmt.Sprint(g.Tokens) {
					k := 0
					for k < min(len(w.Tokens), len(g.Tokens)) && w.Tokens[k] == g.Tokens[k] {
						k++
					}
					if c.p.Temperature != 0 || k == len(w.Tokens) || k == len(g.Tokens) ||
						math.Abs(float64(w.LogProbs[k]-g.LogProbs[k])) > greedyTieTol {
						t.Fatalf("%s: prompt %d rollout %d: cuda %v, cpu %v", c.name, i, j, g.Tokens, w.Tokens)
					}
					t.Logf("%s: prompt %d rollout %d: near tie at token %d (log-probs %.7g and %.7g): the rollouts diverge here",
						c.name, i, j, k, w.LogProbs[k], g.LogProbs[k])
					n = k
				}
				compare(t, c.name+" log-probs", g.LogProbs[:n], w.LogProbs[:n], numcheck.Tol{Atol: 1e-5, Rtol: 1e-4})
				for k := range n {
					maxErr = math.Max(maxErr, math.Abs(float64(g.LogProbs[k]-w.LogProbs[k])))
				}
				ntok += n
			}
		}
		t.Logf("%s: %v", c.name, got[0][0].Tokens)
	}
	t.Logf("%d tokens, max log-prob error %.2g", ntok, maxErr)
}

// TestHalfKVCache decodes with a bf16 KV cache: logits stay within bf16
// rounding of the CPU's fp32 cache and within fp32 rounding of the CPU's
// bf16 cache, a copied slot continues exactly like a
// slot prefilled from scratch, the cache takes half the bytes, and other
// ops refuse its tensors.
func TestHalfKVCache(t *testing.T) {
	o := model.DefaultTiny()
	o.Vocab = 300
	cpu, gpu := tinyPair(t, FP32, o)
	gpu.KVCacheBF16 = true
	d := gpu.B.(*Backend).Device()
	prompt := []int32{5, 17, 42, 99, 3, 250, 8}
	run := func(m *model.Model) [][]float32 {
		kv := m.NewKVCache(2, 32)
		if _, err := m.Step(kv, []model.StepInput{{Slot: 0, Tokens: prompt}}); err != nil {
			t.Fatal(err)
		}
		if err := m.CopySlot(kv, 1, 0); err != nil {
			t.Fatal(err)
		}
		logits, err := m.Step(kv, []model.StepInput{{Slot: 0, Tokens: []int32{11}}, {Slot: 1, Tokens: []int32{12}}})
		if err != nil {
			t.Fatal(err)
		}
		return logits
	}
	want, got := run(cpu), run(gpu)
	for s := range want {
		compare(t, fmt.Sprintf("bf16 KV slot %d logits", s), got[s], want[s], numcheck.Tol{Atol: 2e-2, Rtol: 2e-2})
	}
	// Slot 1 (a copy) equals a fresh prefill of prompt+[12] on the same cache kind.
	kv := gpu.NewKVCache(1, 32)
	fresh, err := gpu.Step(kv, []model.StepInput{{Slot: 0, Tokens: append(append([]int32{}, prompt...), 12)}})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "copied slot vs fresh prefill", got[1], fresh[0], numcheck.Tol{Atol: 1e-6, Rtol: 1e-5})
	// The CPU holding a bf16 cache too (the format's reference): the
	// logits agree to fp32 rounding (observed: max |err| 3e-6, against
	// 8e-3 from the fp32 cache).
	cpu.KVCacheBF16 = true
	same := run(cpu)
	for s := range same {
		compare(t, fmt.Sprintf("bf16 KV slot %d logits against the CPU's bf16 cache", s), got[s], same[s], numcheck.Tol{Atol: 2e-4, Rtol: 2e-4})
	}
	// The cache's bytes: half of an fp32 cache of the same size.
	size := func(half bool) int64 {
		gpu.KVCacheBF16 = half
		before := d.MemStats().InUse
		c := gpu.NewKVCache(4, 1000)
		n := d.MemStats().InUse - before
		runtime.KeepAlive(c)
		return n
	}
	if f32, bf := size(false), size(true); bf*2 > f32+4096 {
		t.Errorf("bf16 KV cache takes %d bytes, fp32 %d", bf, f32)
	} else {
		t.Logf("KV cache of 4 slots × 1000 tokens: fp32 %d bytes, bf16 %d", f32, bf)
	}
	if n := kv.K[0].Store.(*buffer); !n.bf16 || n.frozen {
		t.Errorf("KV cache buffer: bf16 %v frozen %v, want a writable bf16 buffer", n.bf16, n.frozen)
	}
	gpu.B.Scale(kv.K[0], 2)
	if err := gpu.B.Err(); err == nil || !strings.Contains(err.Error(), "bf16 storage") {
		t.Errorf("scale of a KV cache tensor: want a refusal, got %v", err)
	}
	gpu.B.ResetErr()
}

// TestGoldenPyTorchOnCUDA loads the fixtures of the model package
// (scripts/golden_hf.py: transformers' own Qwen3ForCausalLM in float64)
// onto the CUDA backend and compares the KV-cached logits at every
// position and the training forward's log-probs with PyTorch's numbers, not
// only with the CPU backend's.
func TestGoldenPyTorchOnCUDA(t *testing.T) {
	d := testDevice(t)
	for _, name := range []string{"qwen3_tiny_untied", "qwen3_tiny_tied"} {
		dir := filepath.Join("..", "model", "testdata", name)
		m, err := model.Load(NewBackend(d, FP32), dir)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			IDs       []int32     `json:"ids"`
			Logits    [][]float64 `json:"logits"`
			Sequences []struct {
				Tokens []int32 `json:"tokens"`
				Start  int     `json:"start"`
			} `json:"sequences"`
			LogProbs [][]float64 `json:"logprobs"`
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatal(err)
		}
		tol := numcheck.Tol{Atol: 2e-5, Rtol: 2e-4} // float32 accumulation on the device
		rows, err := m.Logits(g.IDs)
		if err != nil {
			t.Fatal(err)
		}
		var got []float32
		var want []float64
		for i, r := range rows {
			got = append(got, r...)
			want = append(want, g.Logits[i]...)
		}
		st, err := numcheck.Compare(got, want, tol)
		if err != nil {
			t.Fatalf("%s logits: %v", name, err)
		}
		var seqs []model.Sequence
		for _, s := range g.Sequences {
			seqs = append(seqs, model.Sequence{Tokens: s.Tokens, Start: s.Start})
		}
		pass, err := m.Forward(seqs)
		if err != nil {
			t.Fatal(err)
		}
		got, want = nil, nil
		for i := range pass.LogProbs {
			got = append(got, pass.LogProbs[i]...)
			want = append(want, g.LogProbs[i]...)
		}
		st2, err := numcheck.Compare(got, want, tol)
		if err != nil {
			t.Fatalf("%s log-probs: %v", name, err)
		}
		t.Logf("%s vs PyTorch: logits max abs %.2g, log-probs max abs %.2g", name, st.MaxAbs, st2.MaxAbs)
	}
}

// TestOutOfMemory: an allocation beyond the device records an error that
// names the call, the bytes held and what to change, and the backend keeps
// working once the error is cleared.
func TestOutOfMemory(t *testing.T) {
	d := testDevice(t)
	if devKind != "emulator" {
		t.Skip("allocates past the device's memory; run on the emulator only")
	}
	b := NewBackend(d, FP32)
	_, total, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	b.New(int(total/4) + 1<<20)
	err = b.Err()
	if err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") || !strings.Contains(err.Error(), "--dry-run") {
		t.Fatalf("want an out-of-memory error with a hint, got %v", err)
	}
	t.Logf("message: %v", err)
	b.ResetErr()
	x := model.NewFrom(b, []float32{1, 2}, 2)
	if got := model.Values(b, x); got[1] != 2 || b.Err() != nil {
		t.Fatalf("backend unusable after the error: %v, %v", got, b.Err())
	}
}

// TestMMAFragments: one mma.m16n8k16 through the kernels' helper
// (common.cuh) against a plain product of the same bf16 values. On the
// emulator this checks its reading of the PTX ISA's fragment layouts; on a
// GPU (scripts/gpu_check.sh runs the CUDA tests) the hardware's.
func TestMMAFragments(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	rng := rand.New(rand.NewPCG(5, 8))
	a, bm := make([]float32, 16*16), make([]float32, 16*8)
	for i := range a {
		a[i] = bf16Round(float32(rng.NormFloat64()))
	}
	for i := range bm {
		bm[i] = bf16Round(float32(rng.NormFloat64()))
	}
	A, B, C := b.New(16, 16), b.New(16, 8), b.New(16, 8)
	b.Upload(A, a)
	b.Upload(B, bm)
	pc, _ := b.ptrs("mma", C, A, B)
	b.launch("mma_check", [3]int{1}, 32, pc[0], pc[1], pc[2])
	got := make([]float32, 16*8)
	b.Download(C, got)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		for j := 0; j < 8; j++ {
			var want float64
			for k := 0; k < 16; k++ {
				want += float64(a[i*16+k]) * float64(bm[k*8+j])
			}
			// 16 exact products summed in fp32: within 16 roundings.
			if d := math.Abs(float64(got[i*8+j]) - want); d > 16*math.Abs(want)*0x1p-24+1e-6 {
				t.Errorf("C[%d][%d] = %g, want %g", i, j, got[i*8+j], want)
			}
		}
	}
}

// bf16Round rounds to the nearest bf16 (ties to even).
func bf16Round(f float32) float32 {
	u := math.Float32bits(f)
	u += 0x7fff + (u >> 16 & 1)
	return math.Float32frombits(u &^ 0xffff)
}

// TestFlashAttentionCausal holds the fused kernels to causality exactly,
// which a comparison within bf16 tolerances cannot: a key one place past a
// query's window would move its output by about 1/T of a value, inside
// the tolerance at T in the hundreds. Changing one value row must leave
// every output before it (and every other segment) bitwise unchanged and
// change the output at it; changing one row of dout must leave every other
// row of dq, and dv of every later key, bitwise unchanged and change dv at
// the diagonal. Cases: packed sequences crossing tile boundaries, and a
// chunked prefill (queries the last 70 of 150 keys).
func TestFlashAttentionCausal(t *testing.T) {
	b := NewBackend(testDevice(t), BF16)
	b.attnFlash = 1
	rng := rand.New(rand.NewPCG(7, 7))
	randn := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	const H, G, D = 4, 2, 32
	for _, c := range []struct {
		name   string
		nq, nk int
		segs   []model.Segment
		seg    int // the segment perturbed
		j, i   int // its local key (value row) and local query (dout row) perturbed
	}{
		// Each pair of cases puts the rows next to the perturbed one in
		// both row halves of a warp's mma fragments (g and g+8).
		{"packed", 200, 200, []model.Segment{{Q0: 0, QLen: 70, K0: 0, KLen: 70}, {Q0: 70, QLen: 130, K0: 70, KLen: 130}}, 1, 65, 64},
		{"packed", 200, 200, []model.Segment{{Q0: 0, QLen: 70, K0: 0, KLen: 70}, {Q0: 70, QLen: 130, K0: 70, KLen: 130}}, 1, 75, 74},
		{"prefill", 70, 150, []model.Segment{{Q0: 0, QLen: 70, K0: 0, KLen: 150}}, 0, 100, 33},
		{"prefill", 70, 150, []model.Segment{{Q0: 0, QLen: 70, K0: 0, KLen: 150}}, 0, 108, 27},
	} {
		t.Run(fmt.Sprintf("%s key %d query %d", c.name, c.j, c.i), func(t *testing.T) {
			s := c.segs[c.seg]
			off := s.KLen - s.QLen
			q, k, v, dout := randn(c.nq*H*D), randn(c.nk*G*D), randn(c.nk*G*D), randn(c.nq*H*D)
			Q, K := model.NewFrom(b, q, c.nq, H, D), model.NewFrom(b, k, c.nk, G, D)
			forward := func(v []float32) (out, lse *model.Tensor, host []float32) {
				out, lse = b.New(c.nq, H, D), b.New(c.nq, H)
				b.Attention(out, lse, Q, K, model.NewFrom(b, v, c.nk, G, D), c.segs, 0.2)
				return out, lse, model.Values(b, out)
			}
			out, lse, o1 := forward(v)
			v2 := append([]float32(nil), v...)
			for e := 0; e < G*D; e++ {
				v2[(s.K0+c.j)*G*D+e] += 1
			}
			_, _, o2 := forward(v2)
			for row := 0; row < c.nq; row++ {
				inSeg := row >= s.Q0 && row < s.Q0+s.QLen
				sees := inSeg && row-s.Q0+off >= c.j
				same := slices.Equal(o1[row*H*D:(row+1)*H*D], o2[row*H*D:(row+1)*H*D])
				if same == sees {
					t.Errorf("forward: query row %d (sees key %d: %v) changed: %v", row, c.j, sees, !same)
				}
			}
			V := model.NewFrom(b, v, c.nk, G, D)
			backward := func(dout []float32) (dq, dv []float32) {
				dQ, dK, dV := b.New(c.nq, H, D), b.New(c.nk, G, D), b.New(c.nk, G, D)
				b.AttentionBackward(dQ, dK, dV, model.NewFrom(b, dout, c.nq, H, D), Q, K, V, out, lse, c.segs, 0.2)
				return model.Values(b, dQ), model.Values(b, dV)
			}
			dq1, dv1 := backward(dout)
			d2 := append([]float32(nil), dout...)
			for e := 0; e < H*D; e++ {
				d2[(s.Q0+c.i)*H*D+e] += 1
			}
			dq2, dv2 := backward(d2)
			for row := 0; row < c.nq; row++ {
				if row != s.Q0+c.i && !slices.Equal(dq1[row*H*D:(row+1)*H*D], dq2[row*H*D:(row+1)*H*D]) {
					t.Errorf("backward: dq row %d changed with dout row %d", row, s.Q0+c.i)
				}
			}
			// dq of a query that does not see key j ignores k_j.
			k2 := append([]float32(nil), k...)
			for e := 0; e < G*D; e++ {
				k2[(s.K0+c.j)*G*D+e] += 1
			}
			K2 := model.NewFrom(b, k2, c.nk, G, D)
			out2, lse2 := b.New(c.nq, H, D), b.New(c.nq, H)
			b.Attention(out2, lse2, Q, K2, V, c.segs, 0.2)
			dQ, dK, dV := b.New(c.nq, H, D), b.New(c.nk, G, D), b.New(c.nk, G, D)
			b.AttentionBackward(dQ, dK, dV, model.NewFrom(b, dout, c.nq, H, D), Q, K2, V, out2, lse2, c.segs, 0.2)
			dq3 := model.Values(b, dQ)
			for row := s.Q0; row < s.Q0+s.QLen; row++ {
				sees := row-s.Q0+off >= c.j
				if slices.Equal(dq1[row*H*D:(row+1)*H*D], dq3[row*H*D:(row+1)*H*D]) == sees {
					t.Errorf("backward: dq row %d (sees key %d: %v) changed with it: %v", row, c.j, sees, !sees)
				}
			}
			for key := 0; key < c.nk; key++ {
				inSeg := key >= s.K0 && key < s.K0+s.KLen
				seen := inSeg && key-s.K0 <= c.i+off
				same := slices.Equal(dv1[key*G*D:(key+1)*G*D], dv2[key*G*D:(key+1)*G*D])
				if !seen && !same || key == s.K0+c.i+off && same {
					t.Errorf("backward: dv row %d (seen by query %d: %v) changed: %v", key, c.i, seen, !same)
				}
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWeightCopies: a policy whose matrices have bf16 copies for products
// (model.ShadowWeights) computes exactly what the same policy computes
// from its fp32 weights under bf16 products (the emulator's products round
// their inputs to bf16 either way), before and after an AdamW step (which
// writes the copies) and after a weight is overwritten from the host
// (which marks its copy stale) — so a copy is never out of date.
func TestWeightCopies(t *testing.T) {
	if v := os.Getenv("GDROTRAIN_EMU_FAST16BF"); v != "" && v != "bf16" {
		t.Skipf("GDROTRAIN_EMU_FAST16BF=%s: fp32-input products no longer round to bf16", v)
	}
	o := model.DefaultTiny()
	o.Vocab = 300
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(testDevice(t), BF16)
	plain := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 3, 0.2, 0.3)}
	copies := &model.Model{Cfg: cfg, B: b, P: model.RandomParams(b, cfg, 3, 0.2, 0.3)}
	if made, err := copies.ShadowWeights(); err != nil || !made {
		t.Fatalf("ShadowWeights: %v, %v", made, err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	seqs := []model.Sequence{{Tokens: randTokens(rng, 30, o.Vocab), Start: 4}, {Tokens: randTokens(rng, 21, o.Vocab), Start: 9}}
	opts := optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
	optP, optC := optim.NewAdamW(b, cfg, opts), optim.NewAdamW(b, cfg, opts)
	gradsP, gradsC := model.NewParams(b, cfg), model.NewParams(b, cfg)
	compare := func(stage string) {
		t.Helper()
		lp := func(m *model.Model, grads *model.Params, opt *optim.AdamW) []float32 {
			if err := optimizerStep(m, seqs, grads, opt); err != nil {
				t.Fatal(err)
			}
			p, err := m.Forward(seqs)
			if err != nil {
				t.Fatal(err)
			}
			p.Release()
			return slices.Concat(p.LogProbs...)
		}
		want, got := lp(plain, gradsP, optP), lp(copies, gradsC, optC)
		if !slices.Equal(want, got) {
			t.Errorf("%s: log-probs with bf16 weight copies differ from the fp32 weights' bf16 products", stage)
		}
	}
	compare("after a step")
	compare("after two steps")
	w := make([]float32, copies.P.Layers[0].Q.Numel())
	for i := range w {
		w[i] = float32(rng.NormFloat64()) / 10
	}
	b.Upload(plain.P.Layers[0].Q, w)
	b.Upload(copies.P.Layers[0].Q, w)
	compare("after an upload")
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestActivationHalf: the MLP's bf16 activations (ActivationHalf under bf16
// products). A product written in bf16 is the fp32 product rounded; SwiGLU
// on bf16 gate and up gives the CPU's SwiGLU of the same (rounded) values,
// rounded; its backward reads them and matches the CPU's in fp32; mixing
// storages is refused, as is accumulating into bf16. Under fp32 products
// the same call gives fp32 tensors.
func TestActivationHalf(t *testing.T) {
	p := newPair(t, BF16)
	gb := p.gpu.(*Backend)
	const R, C, F = 7, 24, 40
	x, w := p.randn(R*C, 1), p.randn(F*C, 0.3)
	gate, up, dout := p.randn(R*F, 2), p.randn(R*F, 1), p.randn(R*F, 1)
	for _, v := range [][]float32{x, w, gate, up} {
		for i := range v {
			v[i] = bf16Round(v[i])
		}
	}
	bf := numcheck.Tol{Atol: 1e-6, Rtol: 1.0 / 128} // one bf16 rounding of the result (2⁻⁸ relative), plus fp32 noise
	// Products into bf16: inputs already bf16, so only the output rounds.
	p.check("matmul into bf16", bf, func(b model.Backend) []float32 {
		out := b.New(R, F)
		if as, ok := b.(model.HalfPrecision); ok {
			out = as.ActivationHalf(R, F)
		}
		b.MatMul(out, model.NewFrom(b, x, R, C), model.NewFrom(b, w, F, C), false, true, false)
		return model.Values(b, out)
	})
	p.check("swiglu on bf16", bf, func(b model.Backend) []float32 {
		mk := func(v []float32) *model.Tensor {
			if as, ok := b.(model.HalfPrecision); ok {
				t := as.ActivationHalf(R, F)
				tmp := model.NewFrom(b, v, R, F)
				b.MatMul(t, tmp, model.NewFrom(b, identity(F), F, F), false, false, false) // exact: v is bf16
				return t
			}
			return model.NewFrom(b, v, R, F)
		}
		g, u := mk(gate), mk(up)
		h := b.New(R, F)
		if as, ok := b.(model.HalfPrecision); ok {
			h = as.ActivationHalf(R, F)
		}
		b.SwiGLU(h, g, u)
		dg, du := b.New(R, F), b.New(R, F)
		b.SwiGLUBackward(dg, du, model.NewFrom(b, dout, R, F), g, u)
		return append(model.Values(b, h), model.Values(b, dg, du)...)
	})
	testSplitQKVHalf(t, p)
	testNormAndProductsHalf(t, p)
	h, f := gb.ActivationHalf(R, F), gb.New(R, F)
	gb.SwiGLU(h, f, f)
	if err := gb.Err(); err == nil || !strings.Contains(err.Error(), "all be fp32 or all writable bf16") {
		t.Errorf("swiglu on mixed storages: want a refusal, got %v", err)
	}
	gb.ResetErr()
	gb.MatMul(h, model.NewFrom(gb, x, R, C), model.NewFrom(gb, w, F, C), false, true, true)
	if err := gb.Err(); err == nil || !strings.Contains(err.Error(), "not accumulated") {
		t.Errorf("accumulating into bf16: want a refusal, got %v", err)
	}
	gb.ResetErr()
	fp := NewBackend(testDevice(t), FP32).ActivationHalf(3)
	if fp.Store.(*buffer).bf16 {
		t.Error("ActivationHalf under fp32 products gave bf16 storage")
	}
}

// testSplitQKVHalf: the fused q/k/v product held in bf16 (ActivationHalf)
// is split and back-propagated as the CPU splits the same (bf16-valued)
// product in fp32: the kernels widen it exactly, so only the fp32 kernels'
// own noise remains (observed: at most 2 % of the fp32 tolerance below).
// Query rows at distinct positions, GQA and D = 128 as Qwen3's.
func testSplitQKVHalf(t *testing.T, p *pair) {
	d := model.QKVDims{N: 6, H: 4, G: 2, D: 128}
	pos := []int32{0, 1, 2, 57, 58, 900}
	x, qw, kw := p.randn(d.N*d.Width(), 2), p.randn(d.D, 1), p.randn(d.D, 1)
	for i := range x {
		x[i] = bf16Round(x[i])
	}
	dqn, dkn, dv := p.randn(d.N*d.H*d.D, 1), p.randn(d.N*d.G*d.D, 1), p.randn(d.N*d.G*d.D, 1)
	tol := numcheck.Tol{Atol: 2e-5, Rtol: 2e-4} // TestConformance's for fp32 kernels
	p.check("split qkv from bf16", tol, func(b model.Backend) []float32 {
		qkv := model.NewFrom(b, x, d.N, d.Width())
		if as, ok := b.(model.HalfPrecision); ok {
			qkv = as.ActivationHalf(d.N, d.Width())
			b.MatMul(qkv, model.NewFrom(b, x, d.N, d.Width()), model.NewFrom(b, identity(d.Width()), d.Width(), d.Width()), false, false, false) // exact: x is bf16
		}
		qn, kn, v := b.New(d.N, d.H, d.D), b.New(d.N, d.G, d.D), b.New(d.N, d.G, d.D)
		rq, rk := b.New(d.N*d.H), b.New(d.N*d.G)
		wq, wk := model.NewFrom(b, qw, d.D), model.NewFrom(b, kw, d.D)
		b.SplitQKV(qn, kn, v, rq, rk, qkv, wq, wk, pos, 1e6, 1e-6)
		dqkv, dqw, dkw := b.New(d.N, d.Width()), b.New(d.D), b.New(d.D)
		b.SplitQKVBackward(dqkv, dqw, dkw, model.NewFrom(b, dqn, d.N, d.H, d.D), model.NewFrom(b, dkn, d.N, d.G, d.D),
			model.NewFrom(b, dv, d.N, d.G, d.D), qkv, wq, wk, rq, rk, pos, 1e6)
		return model.Values(b, qn, kn, v, rq, rk, dqkv, dqw, dkw)
	})
	// A training pass's split writes bf16 qn, kn, v: the fp32 split rounded
	// once (observed |err| 1.5e-2: within the rounding's 2⁻⁹ of each value).
	p.check("split qkv into bf16", numcheck.Tol{Atol: 1e-6, Rtol: 1.0 / 128}, func(b model.Backend) []float32 {
		qkv := halfTensor(b, x, d.N, d.Width())
		qn, kn, v := halfTensor(b, nil, d.N, d.H, d.D), halfTensor(b, nil, d.N, d.G, d.D), halfTensor(b, nil, d.N, d.G, d.D)
		b.SplitQKV(qn, kn, v, b.New(d.N*d.H), b.New(d.N*d.G), qkv, model.NewFrom(b, qw, d.D), model.NewFrom(b, kw, d.D), pos, 1e6, 1e-6)
		return model.Values(b, qn, kn, v)
	})
}

// testNormAndProductsHalf: RMSNorm into a bf16 activation is the fp32 norm
// rounded (statistics from the fp32 input); a product of a bf16 activation
// with an fp32 operand and an fp32 result (the backward's weight
// gradients) matches the CPU's product of the same values whether the
// backend widens the activation (the other operand over twice its size) or
// rounds the other operand, each route seen launching its conversion.
func testNormAndProductsHalf(t *testing.T, p *pair) {
	gb := p.gpu.(*Backend)
	const R, C = 9, 40
	x, w := p.randn(R*C, 3), p.randn(C, 1)
	// One rounding of the output (observed |err| 1.5e-2: within 2⁻⁹ of each value).
	p.check("rmsnorm into bf16", numcheck.Tol{Atol: 1e-6, Rtol: 1.0 / 128}, func(b model.Backend) []float32 {
		out, rstd := halfTensor(b, nil, R, C), b.New(R)
		b.RMSNorm(out, rstd, model.NewFrom(b, x, R, C), model.NewFrom(b, w, C), 1e-6)
		return model.Values(b, out, rstd)
	})
	xn := p.randn(R*C, 1)
	for i := range xn {
		xn[i] = bf16Round(xn[i])
	}
	// dW (K, C) += dYᵀ·xn with dY (R, K): K = 100 makes dY 2.5× xn (widen),
	// K = 50 1.25× (round dY).
	for _, c := range []struct {
		K    int
		conv string
	}{{100, "bf16_to_f32"}, {50, "f32_to_bf16"}} {
		dy, acc := p.randn(R*c.K, 1), p.randn(c.K*C, 1)
		before := gb.Device().Launches()[c.conv]
		// dY rounded to bf16, R = 9 unit-size terms per output:
		// TestConformanceBF16's bound 2e-2·√R.
		p.check(fmt.Sprintf("bf16 activation product, K=%d", c.K), numcheck.Tol{Atol: 6e-2, Rtol: 2e-2}, func(b model.Backend) []float32 {
			dw := model.NewFrom(b, acc, c.K, C)
			b.MatMul(dw, model.NewFrom(b, dy, R, c.K), halfTensor(b, xn, R, C), true, false, true)
			return model.Values(b, dw)
		})
		if gb.Device().Launches()[c.conv] == before {
			t.Errorf("K=%d: %s never launched", c.K, c.conv)
		}
	}
}

func identity(n int) []float32 {
	out := make([]float32, n*n)
	for i := 0; i < n; i++ {
		out[i*n+i] = 1
	}
	return out
}

// TestGoFaultsAfterEmulator: the emulator's fault handler, which turns a
// kernel's faults into CUDA errors, hands faults of Go code back to the Go
// runtime's handler: after kernels have run (and the handler is in place),
// a nil dereference in Go is still a panic that recover sees.
func TestGoFaultsAfterEmulator(t *testing.T) {
	d := testDevice(t)
	if devKind != "emulator" {
		t.Skip("on a GPU: nothing of the emulator's to check")
	}
	b := NewBackend(d, FP32)
	x := b.New(4)
	defer b.Release(x)
	b.Upload(x, []float32{1, 2, 3, 4})
	b.Scale(x, 2)
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	var p *int
	var got any
	func() {
		defer func() { got = recover() }()
		t.Log(*p)
	}()
	if err, ok := got.(runtime.Error); !ok || !strings.Contains(err.Error(), "nil pointer dereference") {
		t.Fatalf("recovered %v, want the runtime's nil pointer dereference error", got)
	}
}
