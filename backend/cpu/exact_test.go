package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/backend/cpu/internal/fixeddot"
	"github.com/gdrotrain/gdrotrain/model"
)

// TestExactProductsBatchInvariant: in exact mode a row of a product is the
// same bits whatever rows share it (1 … 64, any offset, either operand
// transposed, overwritten or accumulated into), and each element equals
// the fixed-order dot product computed alone: with K = 67 (not a multiple
// of the lanes, one block) and K = 1500 (blocks of 40 rows by 30 columns,
// so the 64 × 45 product spans four).
func TestExactProductsBatchInvariant(t *testing.T) {
	b := NewBackend()
	b.SetBatchInvariant(true)
	rnd := rand.New(rand.NewPCG(3, 4))
	const N, M = 45, 64
	randT := func(shape ...int) *model.Tensor {
		x := b.New(shape...)
		v := b.Data(x)
		for i := range v {
			v[i] = float32(rnd.NormFloat64())
		}
		return x
	}
	for _, c := range []struct {
		K                   int
		transA, transB, acc bool
	}{
		{67, false, true, false}, {67, false, false, false}, {67, true, true, true}, {67, true, false, true},
		{1500, false, true, false}, {1500, false, false, false}, {1500, true, true, true}, {1500, true, false, true},
	} {
		K := c.K
		t.Run(fmt.Sprintf("K=%d transA=%v transB=%v accumulate=%v", K, c.transA, c.transB, c.acc), func(t *testing.T) {
			a := randT(M, K)
			if c.transA {
				a = randT(K, M)
			}
			w := randT(K, N)
			if c.transB {
				w = randT(N, K)
			}
			init := randT(M, N)
			// rowsOf is rows [lo, hi) of op(a) as a tensor of its own.
			rowsOf := func(lo, hi int) *model.Tensor {
				x := b.New(hi-lo, K)
				if c.transA {
					x = b.New(K, hi-lo)
				}
				xv, av := b.Data(x), b.Data(a)
				for i := lo; i < hi; i++ {
					for p := 0; p < K; p++ {
						if c.transA {
							xv[p*(hi-lo)+i-lo] = av[p*M+i]
						} else {
							xv[(i-lo)*K+p] = av[i*K+p]
						}
					}
				}
				return x
			}
			product := func(lo, hi int) []float32 {
				out := b.New(hi-lo, N)
				copy(b.Data(out), b.Data(init)[lo*N:hi*N])
				b.MatMul(out, rowsOf(lo, hi), w, c.transA, c.transB, c.acc)
				if err := b.Err(); err != nil {
					t.Fatal(err)
				}
				return b.Data(out)
			}
			all := product(0, M)
			for _, r := range [][2]int{{0, 1}, {5, 6}, {3, 20}, {17, 64}, {63, 64}} {
				got := product(r[0], r[1])
				for i := r[0]; i < r[1]; i++ {
					for j := 0; j < N; j++ {
						if math.Float32bits(got[(i-r[0])*N+j]) != math.Float32bits(all[i*N+j]) {
							t.Fatalf("rows %v: c[%d,%d] = %v, in the %d-row product %v", r, i, j, got[(i-r[0])*N+j], M, all[i*N+j])
						}
					}
				}
			}
			// Every element is the fixed-order dot product alone.
			av, wv := b.Data(a), b.Data(w)
			ar, wc := make([]float32, K), make([]float32, K)
			for i := 0; i < M; i++ {
				for j := 0; j < N; j++ {
					for p := 0; p < K; p++ {
						ar[p], wc[p] = av[i*K+p], wv[p*N+j] // row i of a (M, K), column j of w (K, N)
						if c.transA {
							ar[p] = av[p*M+i] // column i of a (K, M)
						}
						if c.transB {
							wc[p] = wv[j*K+p] // row j of w (N, K)
						}
					}
					want := fixeddot.Dot(ar, wc)
					if c.acc {
						want = b.Data(init)[i*N+j] + want
					}
					if got := all[i*N+j]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("c[%d,%d] = %v, the fixed-order dot %v", i, j, got, want)
					}
				}
			}
		})
	}
}

// BenchmarkMatMulExact measures exact mode's products beside the default
// ones at a 0.6B model's projection (1024 → 3072) for a decode step's rows
// and a training micro-batch's.
func BenchmarkMatMulExact(bm *testing.B) {
	const K, N = 1024, 3072
	for _, rows := range []int{1, 64, 1024} {
		for _, exact := range []bool{false, true} {
			bm.Run(fmt.Sprintf("rows=%d/exact=%v", rows, exact), func(bm *testing.B) {
				b := NewBackend()
				b.SetBatchInvariant(exact)
				x, w, out := b.New(rows, K), b.New(N, K), b.New(rows, N)
				for _, tt := range []*model.Tensor{x, w} {
					v := b.Data(tt)
					for i := range v {
						v[i] = float32(i%7) * 0.1
					}
				}
				bm.SetBytes(int64(2 * rows * N * K)) // FLOPs, reported as "MB/s" = MFLOP/s
				for bm.Loop() {
					b.MatMul(out, x, w, false, true, false)
				}
			})
		}
	}
}

// BenchmarkAttentionExact measures exact mode's attention beside the
// default one, 16 heads of 64 sharing 4 KV heads: training's forward over
// one sequence of 1024 tokens (blocks of queries against the keys before
// them), and a decode step of 16 sequences, one query each against 1024
// cached keys.
func BenchmarkAttentionExact(bm *testing.B) {
	const T, H, G, D = 1024, 16, 4, 64
	for _, decode := range []bool{false, true} {
		for _, exact := range []bool{false, true} {
			bm.Run(fmt.Sprintf("decode=%v/exact=%v", decode, exact), func(bm *testing.B) {
				b := NewBackend()
				b.SetBatchInvariant(exact)
				nq, nk := T, T
				segs := []model.Segment{{Q0: 0, QLen: T, K0: 0, KLen: T}}
				if decode {
					nq, nk, segs = 16, 16*T, nil
					for i := 0; i < nq; i++ {
						segs = append(segs, model.Segment{Q0: i, QLen: 1, K0: i * T, KLen: T})
					}
				}
				q, k, v, out := b.New(nq, H, D), b.New(nk, G, D), b.New(nk, G, D), b.New(nq, H, D)
				rnd := rand.New(rand.NewPCG(1, 1))
				for _, tt := range []*model.Tensor{q, k, v} {
					for i, d := 0, b.Data(tt); i < len(d); i++ {
						d[i] = float32(rnd.NormFloat64())
					}
				}
				for bm.Loop() {
					b.Attention(out, nil, q, k, v, segs, 0.125)
				}
				if err := b.Err(); err != nil {
					bm.Fatal(err)
				}
			})
		}
	}
}
