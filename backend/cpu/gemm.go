package cpu

// Matrix products of the fast CPU backend: OpenBLAS's cblas_sgemm loaded at
// run time (internal/cblas), or, where it is missing, gonum's pure-Go
// Sgemm (float32, blocked and parallel, about a tenth of OpenBLAS's speed).
//
// Threads: OpenBLAS is set to one thread and the Go side owns every core.
// A large product is split into blocks of rows (or columns) of C, each a
// single-threaded sgemm, run by the workers in turn; attention calls
// many small single-threaded sgemms from its own parallel loop. This never
// runs OpenBLAS's thread pool beside Go's workers (its threads busy-wait
// after each call, which on a 2-core machine takes the core a Go worker
// needs), and never nests one pool inside the other.

import (
	"errors"
	"log"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gdrotrain/gdrotrain/backend/cpu/internal/cblas"
	"github.com/gdrotrain/gdrotrain/model"
)

var (
	blasOnce sync.Once
	blasLib  *cblas.Lib
	blasErr  error
)

// loadBLAS opens OpenBLAS once per process and logs one line when the Go
// kernels are used instead, or when its core was not the library's own
// choice (set by cblas.Open or by the user's OPENBLAS_CORETYPE).
func loadBLAS() (*cblas.Lib, error) {
	blasOnce.Do(func() {
		blasLib, blasErr = cblas.Open()
		if blasErr != nil {
			if !errors.Is(blasErr, cblas.ErrOff) {
				log.Printf("cpu backend: %v; matrix products use the Go kernels (several times slower)", blasErr)
			}
			return
		}
		if blasLib.Note != "" {
			log.Printf("cpu backend: matrix products: %s", blasLib.Describe())
		}
		if !blasLib.SetThreads(1) {
			log.Printf("cpu backend: %s has no openblas_set_num_threads; set its own thread count to 1 "+
				"(e.g. MKL_NUM_THREADS=1), since the Go side runs one product per core", blasLib.Path)
		}
	})
	return blasLib, blasErr
}

// A large product is split into blocks of c, run by the workers in turn.
// The blocks are fixed by the shape, never by the number of workers:
// OpenBLAS chooses its kernels (and so its rounding) by block size, and a
// run must give the same bits on any machine (a resumed run on another
// node repeats the uninterrupted one). A block does at least
// gemmBlockFLOPs (≈ 25 µs of one core's sgemm, well above the cost of a
// goroutine) and spans at least gemmMinSide rows or columns (each block
// packs the shared operand again, and sgemm is slower on narrow blocks);
// there are at most maxGemmBlocks, a number with many divisors so most
// worker counts share the blocks evenly.
const (
	gemmBlockFLOPs = 2 << 20
	gemmMinSide    = 256
	maxGemmBlocks  = 24
)

// gemm computes c = alpha·op(a)·op(b) + beta·c on row-major matrices (see
// cblas.Lib.Sgemm for the layout); beta = 0 overwrites c without reading it.
// With split, a large product is divided over the workers; without, it runs
// on the calling goroutine (callers already inside a parallel loop).
func (b *Backend) gemm(split, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	bm []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(row)
				continue
			}
			for j := range row {
				row[j] *= beta
			}
		}
		return
	}
	if b.exact {
		b.gemmExact(split, tA, tB, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
		return
	}
	if m*n*k <= smallGemm {
		gemmGo(tA, tB, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
		return
	}
	if b.blas == nil {
		// gonum splits large products over GOMAXPROCS goroutines itself.
		gonum.Implementation{}.Sgemm(trans(tA), trans(tB), m, n, k, alpha, a, max(lda, 1), bm, max(ldb, 1), beta, c, max(ldc, 1))
		return
	}
	// Split the longer side of c into blocks of whole 16-row (or 16-column)
	// panels, so every block keeps sgemm's full-width kernel.
	alongM := m >= n
	long := n
	if alongM {
		long = m
	}
	panels := (long + 15) / 16
	nb := min(maxGemmBlocks, long/gemmMinSide, 2*m*n*k/gemmBlockFLOPs)
	if !split || nb < 2 {
		b.blas.Sgemm(tA, tB, m, n, k, alpha, a, max(lda, 1), bm, max(ldb, 1), beta, c, max(ldc, 1))
		return
	}
	b.ParallelFor(nb, 1<<15, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r0, r1 := min(panels*i/nb*16, long), min(panels*(i+1)/nb*16, long)
			if alongM {
				ao := r0 * lda // rows of op(a)
				if tA {
					ao = r0
				}
				b.blas.Sgemm(tA, tB, r1-r0, n, k, alpha, a[ao:], lda, bm, ldb, beta, c[r0*ldc:], ldc)
				continue
			}
			bo := r0 // columns of op(b)
			if tB {
				bo = r0 * ldb
			}
			b.blas.Sgemm(tA, tB, m, r1-r0, k, alpha, a, lda, bm[bo:], ldb, beta, c[r0:], ldc)
		}
	})
}

// smallGemm is the size (m·n·k) up to which a product runs in gemmGo: a
// cgo call and OpenBLAS's setup cost about a microsecond, as much as a
// few thousand multiply-adds in Go (cached decoding calls attention's
// products one query row at a time).
const smallGemm = 4096

// gemmGo is gemm in plain Go loops with float32 accumulators, for small
// products.
func gemmGo(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, bm []float32, ldb int, beta float32, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(ci)
		} else if beta != 1 {
			for j := range ci {
				ci[j] *= beta
			}
		}
		for p := 0; p < k; p++ {
			ai := i*lda + p
			if tA {
				ai = p*lda + i
			}
			av := alpha * a[ai]
			if tB {
				for j := range ci {
					ci[j] += av * bm[j*ldb+p]
				}
				continue
			}
			for j, bv := range bm[p*ldb : p*ldb+n] {
				ci[j] += av * bv
			}
		}
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// MatMul computes c = op(a)·op(b) or c += op(a)·op(b).
func (b *Backend) MatMul(c, a, bm *model.Tensor, transA, transB, accumulate bool) {
	if !b.Check("matmul", c, a, bm) {
		return
	}
	M, N, K, err := model.MatMulDims(c, a, bm, transA, transB)
	if !b.Keep(err) {
		return
	}
	_, ac := model.Matrix(a)
	_, bc := model.Matrix(bm)
	var beta float32
	if accumulate {
		beta = 1
	}
	b.gemm(true, transA, transB, M, N, K, 1, b.Data(a), ac, b.Data(bm), bc, beta, b.Data(c), N)
}
