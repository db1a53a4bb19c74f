package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
	"github.com/gdrotrain/gdrotrain/model"
)

// The ops on the path from a token to its log-probability other than the
// products and attention, audited for exact mode (docs/algorithm.md
// §5.10): does a row's result depend on the rows that share the launch?
// Each op below runs one block per row with a fixed block size (rmsnorm,
// add_rmsnorm, lsg_fwd, qkv_split: a block per row and head group), or is
// element-wise over a grid-stride loop (rope, swiglu, add_cols, scale), or
// copies rows (copy_rows, copy_rows_bf16, scatter_rows_bf16, and
// scatter_rows_fp8 whose scale is the row's own amax); none picks a
// kernel, a block size or a reduction split by the row count, none
// accumulates with atomics in the forward, and a decode graph replays the
// eager step's kernels. So none needed a change: this test keeps it so.
// (What does differ between decode and training is the storage of some
// activations, a model-level choice: docs/algorithm.md §5.10.)

// exactRowsN is the rows the ops compute, in one launch or in parts.
const exactRowsN = 37

// exactParts are the ways the rows are split into launches: all at once,
// one by one (the decode of a single sequence), and uneven parts at
// uneven offsets (sequences joining and leaving).
var exactParts = [][][2]int{
	{{0, exactRowsN}},
	ones(exactRowsN),
	{{0, 3}, {3, 10}, {10, 11}, {11, 30}, {30, exactRowsN}},
	{{0, exactRowsN - 5}, {exactRowsN - 5, exactRowsN}},
}

func ones(n int) [][2]int {
	out := make([][2]int, n)
	for i := range out {
		out[i] = [2]int{i, i + 1}
	}
	return out
}

// rowsCase is one op: setup makes its inputs for exactRowsN rows on b and
// returns run, which computes every row in the launches parts gives and
// returns all the outputs.
type rowsCase struct {
	name  string
	prec  Precision
	setup func(b *Backend, g *rand.Rand) (run func(parts [][2]int) []float32)
}

// byParts runs f on each part and concatenates each of its output
// tensors' rows over the parts, then the tensors: the layout of one launch.
func byParts(parts [][2]int, f func(lo, hi int) [][]float32) []float32 {
	var outs [][]float32
	for _, p := range parts {
		for i, o := range f(p[0], p[1]) {
			if i == len(outs) {
				outs = append(outs, nil)
			}
			outs[i] = append(outs[i], o...)
		}
	}
	var all []float32
	for _, o := range outs {
		all = append(all, o...)
	}
	return all
}

// values downloads each tensor.
func values(b *Backend, ts ...*model.Tensor) [][]float32 {
	out := make([][]float32, len(ts))
	for i, t := range ts {
		out[i] = model.Values(b, t)
	}
	return out
}

func randHost(g *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(scale * g.NormFloat64())
	}
	return out
}

// halfRows makes a bf16 activation of rows×cols on b (bf16 products) from
// host values, through a row's RMSNorm with unit weights (the values
// need only be bf16 and the same for every run).
func halfRows(b *Backend, host []float32, rows, cols int) *model.Tensor {
	ones := make([]float32, cols)
	for i := range ones {
		ones[i] = 1
	}
	out := b.ActivationHalf(rows, cols)
	b.RMSNorm(out, nil, model.NewFrom(b, host, rows, cols), model.NewFrom(b, ones, cols), 1e-6)
	return out
}

const (
	exC, exH, exG, exD, exV, exF = 96, 4, 2, 32, 301, 80
)

var exactRowsCases = []rowsCase{
	{name: "embedding", prec: FP32, setup: embeddingCase(false)},
	{name: "embedding, bf16 table", prec: BF16, setup: embeddingCase(true)},
	{name: "rmsnorm", prec: FP32, setup: rmsNormCase(false, false)},
	{name: "rmsnorm into bf16", prec: BF16, setup: rmsNormCase(true, false)},
	{name: "add rmsnorm", prec: FP32, setup: rmsNormCase(false, true)},
	{name: "add rmsnorm into bf16", prec: BF16, setup: rmsNormCase(true, true)},
	{name: "split qkv", prec: FP32, setup: splitQKVCase(false, false)},
	{name: "split qkv, bf16 product", prec: BF16, setup: splitQKVCase(true, false)},
	{name: "split qkv, bf16 product and outputs", prec: BF16, setup: splitQKVCase(true, true)},
	{name: "rope", prec: FP32, setup: ropeCase},
	{name: "swiglu", prec: FP32, setup: swigluCase(false)},
	{name: "swiglu bf16", prec: BF16, setup: swigluCase(true)},
	{name: "gather rows", prec: FP32, setup: gatherCase},
	{name: "scatter rows into the cache", prec: FP32, setup: scatterCase("fp32")},
	{name: "scatter rows into a bf16 cache", prec: BF16, setup: scatterCase("bf16")},
	{name: "scatter rows into an fp8 cache", prec: BF16, setup: scatterCase("fp8")},
	{name: "log-softmax gather", prec: FP32, setup: lsgCase},
	{name: "LoRA add cols", prec: FP32, setup: addColsCase(false)},
	{name: "LoRA add cols into bf16", prec: BF16, setup: addColsCase(true)},
	{name: "LoRA scale", prec: FP32, setup: scaleCase},
}

// TestExactOpsRowInvariant: in exact mode, every op on the token→log-prob
// path other than the products and attention gives each row the same bits
// whether the rows run in one launch, one by one, or in uneven parts at
// uneven offsets (the audit above: none needed a change).
func TestExactOpsRowInvariant(t *testing.T) {
	d := testDevice(t)
	for _, c := range exactRowsCases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBackend(d, c.prec)
			b.SetBatchInvariant(true)
			run := c.setup(b, rand.New(rand.NewPCG(5, 5)))
			want := run(exactParts[0])
			if err := b.Err(); err != nil || len(want) == 0 {
				t.Fatalf("one launch: %v (%d values)", err, len(want))
			}
			for _, parts := range exactParts[1:] {
				got := run(parts)
				if err := b.Err(); err != nil {
					t.Fatalf("%d launches: %v", len(parts), err)
				}
				if len(got) != len(want) {
					t.Fatalf("%d launches: %d values, want %d", len(parts), len(got), len(want))
				}
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("%d launches: value %d (of %d per row) is %v, in one launch %v", len(parts), i, len(want)/exactRowsN, got[i], want[i])
				}
			}
		})
	}
}

func embeddingCase(frozen bool) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		table := model.NewFrom(b, randHost(g, 50*exC, 1), 50, exC)
		if frozen {
			b.keep(b.Freeze(table))
		}
		ids := make([]int32, exactRowsN)
		for i := range ids {
			ids[i] = int32(g.IntN(50))
		}
		return func(parts [][2]int) []float32 {
			return byParts(parts, func(lo, hi int) [][]float32 {
				out := b.New(hi-lo, exC)
				b.Embedding(out, table, ids[lo:hi])
				return values(b, out)
			})
		}
	}
}

func rmsNormCase(half, fused bool) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		x := model.NewFrom(b, randHost(g, exactRowsN*exC, 1), exactRowsN, exC)
		y := model.NewFrom(b, randHost(g, exactRowsN*exC, 1), exactRowsN, exC)
		w := model.NewFrom(b, randHost(g, exC, 0.3), exC)
		return func(parts [][2]int) []float32 {
			return byParts(parts, func(lo, hi int) [][]float32 {
				n := hi - lo
				out, rstd := b.New(n, exC), b.New(n)
				if half {
					out = b.ActivationHalf(n, exC)
				}
				if !fused {
					b.RMSNorm(out, rstd, x.Rows(lo, hi), w, 1e-6)
					return values(b, out, rstd)
				}
				sum := b.New(n, exC)
				b.AddRMSNorm(sum, out, rstd, x.Rows(lo, hi), y.Rows(lo, hi), w, 1e-6)
				return values(b, sum, out, rstd)
			})
		}
	}
}

func positions(g *rand.Rand) []int32 {
	pos := make([]int32, exactRowsN)
	for i := range pos {
		pos[i] = int32(g.IntN(3000))
	}
	return pos
}

func splitQKVCase(half, halfOut bool) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		W := (exH + 2*exG) * exD
		host := randHost(g, exactRowsN*W, 1)
		qkv := model.NewFrom(b, host, exactRowsN, W)
		if half {
			qkv = halfRows(b, host, exactRowsN, W)
		}
		qw, kw := model.NewFrom(b, randHost(g, exD, 0.3), exD), model.NewFrom(b, randHost(g, exD, 0.3), exD)
		pos := positions(g)
		return func(parts [][2]int) []float32 {
			return byParts(parts, func(lo, hi int) [][]float32 {
				n := hi - lo
				mk := b.New
				if halfOut {
					mk = b.ActivationHalf
				}
				qn, kn, v := mk(n, exH, exD), mk(n, exG, exD), mk(n, exG, exD)
				rq, rk := b.New(n*exH), b.New(n*exG)
				b.SplitQKV(qn, kn, v, rq, rk, qkv.Rows(lo, hi), qw, kw, pos[lo:hi], 1e6, 1e-6)
				return values(b, qn, kn, v, rq, rk)
			})
		}
	}
}

func ropeCase(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	host := randHost(g, exactRowsN*exH*exD, 1)
	pos := positions(g)
	return func(parts [][2]int) []float32 {
		return byParts(parts, func(lo, hi int) [][]float32 {
			x := model.NewFrom(b, host[lo*exH*exD:hi*exH*exD], hi-lo, exH, exD)
			b.RoPE(x, pos[lo:hi], 1e6, false)
			return values(b, x)
		})
	}
}

func swigluCase(half bool) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		gh, uh := randHost(g, exactRowsN*exF, 2), randHost(g, exactRowsN*exF, 1)
		gate, up := model.NewFrom(b, gh, exactRowsN, exF), model.NewFrom(b, uh, exactRowsN, exF)
		if half {
			gate, up = halfRows(b, gh, exactRowsN, exF), halfRows(b, uh, exactRowsN, exF)
		}
		return func(parts [][2]int) []float32 {
			return byParts(parts, func(lo, hi int) [][]float32 {
				out := b.New(hi-lo, exF)
				if half {
					out = b.ActivationHalf(hi-lo, exF)
				}
				b.SwiGLU(out, gate.Rows(lo, hi), up.Rows(lo, hi))
				return values(b, out)
			})
		}
	}
}

func gatherCase(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	src := model.NewFrom(b, randHost(g, 50*exV, 3), 50, exV)
	idx := make([]int32, exactRowsN)
	for i := range idx {
		idx[i] = int32(g.IntN(50))
	}
	return func(parts [][2]int) []float32 {
		return byParts(parts, func(lo, hi int) [][]float32 {
			dst := b.New(hi-lo, exV)
			b.GatherRows(dst, src, idx[lo:hi])
			return values(b, dst)
		})
	}
}

// scatterCase writes the rows (keys of G heads of D) into cache rows of a
// fresh fp32, bf16 or fp8 cache, part by part, and returns the cache.
func scatterCase(kind string) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		k := model.NewFrom(b, randHost(g, exactRowsN*exG*exD, 2), exactRowsN, exG, exD)
		const S = 64
		rows := make([]int32, exactRowsN)
		for i, r := range g.Perm(S)[:exactRowsN] {
			rows[i] = int32(r)
		}
		return func(parts [][2]int) []float32 {
			var cache *model.Tensor
			switch kind {
			case "bf16":
				cache = b.NewHalf(S, exG, exD)
			case "fp8":
				cache = b.NewFP8(S, exG, exD)
			default:
				cache = b.New(S, exG, exD)
			}
			for _, p := range parts {
				b.ScatterRows(cache, k.Rows(p[0], p[1]), rows[p[0]:p[1]], false)
			}
			return model.Values(b, cache)
		}
	}
}

func lsgCase(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	logits := model.NewFrom(b, randHost(g, exactRowsN*exV, 4), exactRowsN, exV)
	targets := make([]int32, exactRowsN)
	for i := range targets {
		targets[i] = int32(g.IntN(exV))
	}
	return func(parts [][2]int) []float32 {
		return byParts(parts, func(lo, hi int) [][]float32 {
			lp, lse, ent := b.New(hi-lo), b.New(hi-lo), b.New(hi-lo)
			b.LogSoftmaxGather(lp, lse, ent, logits.Rows(lo, hi), targets[lo:hi])
			return values(b, lp, lse, ent)
		})
	}
}

// addColsCase adds a LoRA term (rows of 16) into columns 24…39 of rows of
// 48, fp32 or a bf16 activation (the fused q/k/v product under bf16).
func addColsCase(half bool) func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	return func(b *Backend, g *rand.Rand) func([][2]int) []float32 {
		const W, w = 48, 16
		base, term := randHost(g, exactRowsN*W, 1), model.NewFrom(b, randHost(g, exactRowsN*w, 0.1), exactRowsN, w)
		return func(parts [][2]int) []float32 {
			return byParts(parts, func(lo, hi int) [][]float32 {
				dst := model.NewFrom(b, base[lo*W:hi*W], hi-lo, W)
				if half {
					dst = halfRows(b, base[lo*W:hi*W], hi-lo, W)
				}
				b.AddCols(dst, term.Rows(lo, hi), 24)
				return values(b, dst)
			})
		}
	}
}

func scaleCase(b *Backend, g *rand.Rand) func([][2]int) []float32 {
	host := randHost(g, exactRowsN*exC, 1)
	return func(parts [][2]int) []float32 {
		return byParts(parts, func(lo, hi int) [][]float32 {
			x := model.NewFrom(b, host[lo*exC:hi*exC], hi-lo, exC)
			b.Scale(x, 0.37)
			return values(b, x)
		})
	}
}

// TestExactRowsCheckCanFail: the comparison above catches an op whose
// rows depend on the launch: the emulator's cuBLAS product with
// GDROTRAIN_EMU_FAULT=gemm perturbs the first element of each launch's
// result, so the rows that start a part differ from the one launch's (the
// products outside exact mode, which go to cuBLAS).
func TestExactRowsCheckCanFail(t *testing.T) {
	d := testDevice(t)
	if devKind != "emulator" {
		t.Skip("fault injection needs the emulator (this machine has a GPU)")
	}
	t.Setenv(cudaemu.FaultEnv, "gemm")
	b := NewBackend(d, FP32)
	g := rand.New(rand.NewPCG(5, 5))
	x := model.NewFrom(b, randHost(g, exactRowsN*exC, 1), exactRowsN, exC)
	w := model.NewFrom(b, randHost(g, exF*exC, 0.3), exF, exC)
	run := func(parts [][2]int) []float32 {
		return byParts(parts, func(lo, hi int) [][]float32 {
			out := b.New(hi-lo, exF)
			b.MatMul(out, x.Rows(lo, hi), w, false, true, false)
			return values(b, out)
		})
	}
	want := run(exactParts[0])
	for _, parts := range exactParts[1:] {
		if i := firstDiff(run(parts), want); i < 0 {
			t.Errorf("%d launches: no row differs from the one launch's under a fault that perturbs each launch's first row", len(parts))
		}
	}
}

// firstDiff is the first index whose bits differ (−1: none).
func firstDiff(got, want []float32) int {
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}
