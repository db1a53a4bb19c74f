package cuda

// Exact mode's matrix products (precision.exact_logprobs, exact.go): every
// MatMul goes to the batch-invariant kernels of kernels/gemm_exact.cu
// instead of cuBLAS, whose algorithm (tiles, split-K, the order of K's
// partial sums) depends on M, N and K, so that a row's result there
// depends on how many rows share the product. Here an element of c is one
// running sum over K in a fixed order, computed from its two K-vectors
// alone, so a decode step's row equals the same row of a training batch
// bit for bit.
//
// The operands' rounding depends on their kinds, never on their sizes:
// under bf16 products, or when either operand is bf16 storage (a frozen
// weight, a bf16 activation) or c is a bf16 activation, both operands are
// rounded to bf16 (nearest even) and multiplied on the tensor cores
// (mma.m16n8k16, fp32 accumulation; on a device with the sm_90a kernels,
// warpgroup MMA, wgmma m64nNk16, for every such product of the run);
// otherwise both are multiplied in fp32
// on the CUDA cores (fused multiply-adds in order), tf32-rounded first
// under tf32 products. An fp32 operand with a bf16 copy (Shadow) is read
// through the copy: it holds the same bits the kernel's rounding would
// give, at half the bytes, so whether a copy exists changes no result.
// (Outside exact mode MatMul decides by the operands' sizes, `3*x > w`,
// whether to round an activation against a weight's copy, since cuBLAS
// rounds fp32 inputs itself.) Below sm_80 there is no mma.sync: the bf16
// products run the FFMA kernel on the rounded operands, batch-invariant
// too, though not bitwise equal to an sm_80 GPU's.

import (
	"fmt"

	"github.com/gdrotrain/gdrotrain/model"
)

// The exact kernels' tiles (gemm_exact.cu: BM × GX_BN for mma, GX_FM ×
// GX_FN for FFMA), for the grid only. The mma kernels come in two block
// heights (exactMMATileRows); the FFMA kernels in one.
const (
	exactMMARows, exactMMARowsSmall = 128, 64
	exactMMACols                    = 128
	exactFFMARows, exactFFMACols    = 64, 64
	exactThreads                    = 256
)

// Rounding of the FFMA kernel's operands (gx_round).
const (
	exactRoundNone = 0
	exactRoundBF16 = 1
	exactRoundTF32 = 2
)

// exactOperand is one operand of an exact product: its address and
// whether it is bf16 storage.
type exactOperand struct {
	p    uint64
	half bool
}

// storageLetter names a storage in a kernel's suffix.
func storageLetter(half bool) string {
	if half {
		return "h"
	}
	return "f"
}

// matMulExact issues c = op(a)·op(b) (+ c with accumulate) in exact mode;
// MatMul has validated the operands and the dimensions (K > 0).
func (b *Backend) matMulExact(pc uint64, halfC bool, a, bm *model.Tensor, x, y exactOperand, M, N, K int,
	transA, transB, accumulate bool) {
	if M > 65535*exactFFMARows || N > 1<<30 || K > 1<<30 {
		b.keep(fmt.Errorf("matmul (exact): %d × %d × %d exceeds the exact kernels' grid", M, N, K))
		return
	}
	half := b.prec == BF16 || x.half || y.half || halfC
	if half {
		// A weight's bf16 copy: the bits the kernel's rounding would give.
		if !x.half && b.hasHalf(a) {
			x = exactOperand{b.halfOf(a), true}
		}
		if !y.half && b.hasHalf(bm) {
			y = exactOperand{b.halfOf(bm), true}
		}
	}
	// op(a)[i,k] = a[i·sai + k·sak]; op(b)[k,j] = b[j·sbj + k·sbk].
	sai, sak := int64(K), int64(1) // a stored (M, K)
	if transA {
		sai, sak = 1, int64(M) // a stored (K, M)
	}
	sbj, sbk := int64(1), int64(N) // b stored (K, N)
	if transB {
		sbj, sbk = int64(K), 1 // b stored (N, K)
	}
	suffix := storageLetter(x.half) + storageLetter(y.half) + storageLetter(halfC)
	acc := int32(0)
	if accumulate {
		acc = 1
	}
	b.gemmExactCost(half, M, N, K, x.half, y.half, halfC, accumulate)
	args := []any{pc, x.p, y.p, int32(M), int32(N), int32(K), sai, sak, sbj, sbk, acc}
	if half && b.exactMMA() {
		b.launchExactMMA(b.exactWGMMA(), exactMMATileRows(M, N, b.d.Info.SMs), suffix, M, N, args)
		return
	}
	rnd := int32(exactRoundNone)
	switch {
	case half:
		rnd = exactRoundBF16
	case b.prec == TF32:
		rnd = exactRoundTF32
	}
	grid := [3]int{(N + exactFFMACols - 1) / exactFFMACols, (M + exactFFMARows - 1) / exactFFMARows}
	b.launch("gemm_exact_ffma_"+suffix, grid, exactThreads, append(args, rnd)...)
}

// exactMMATileRows picks the mma kernels' block height: 128-row tiles
// (gemm_exact_mma_: a quarter fewer shared-memory
// bytes per mma, a third fewer L2 bytes) where their grid gives every SM a
// block, else 64-row tiles (gemm_exact_mma64_), twice the blocks, for the
// small products of decode steps, which would otherwise leave SMs idle.
// The tile only groups independent sums: either kernel gives every element
// of c the same bits (TestExactMMAMatchesReference holds both to
// gemm_exact_mma_ref), so choosing it by shape keeps the products
// batch-invariant.
func exactMMATileRows(M, N, sms int) int {
	blocks := ((M + exactMMARows - 1) / exactMMARows) * ((N + exactMMACols - 1) / exactMMACols)
	if blocks < sms {
		return exactMMARowsSmall
	}
	return exactMMARows
}

// launchExactMMA launches the tensor-core kernel of block height rows
// (exactMMARows or exactMMARowsSmall) for storages suffix: warpgroup MMA
// (gemm_exact_wg_, gemm_exact_wg64_) when wg, else mma.sync
// (gemm_exact_mma_, gemm_exact_mma64_). Both have the same tiles, grid,
// block and arguments.
func (b *Backend) launchExactMMA(wg bool, rows int, suffix string, M, N int, args []any) {
	name := "gemm_exact_mma"
	if wg {
		name = "gemm_exact_wg"
	}
	if rows == exactMMARowsSmall {
		name += "64"
	}
	name += "_"
	grid := [3]int{(N + exactMMACols - 1) / exactMMACols, (M + rows - 1) / rows}
	b.launch(name+suffix, grid, exactThreads, args...)
}

// exactMMA reports whether bf16 products may take the mma.sync kernels:
// sm_80 and later, unless a test forces the FFMA route (exactNoMMA) to
// cover what older GPUs run.
func (b *Backend) exactMMA() bool { return b.d.Info.Major >= 8 && !b.exactNoMMA }

// ExactWGMMAEnv set to 0 keeps exact mode's bf16 products on the mma.sync
// kernels on a device with the sm_90a kernels (the warpgroup-MMA ones are
// its default there). Read when a backend is made, so one process's
// backends (the sampler's and the trainer's) agree.
const ExactWGMMAEnv = "GDROTRAIN_EXACT_WGMMA"

// exactWGMMA reports whether the exact bf16 products take the
// warpgroup-MMA kernels (gemm_exact_wg*): on a device with the sm_90a
// kernels (Info.HasWGMMA), every one of them, decode's small products
// too, unless turned off (exactWG < 0). By device, never by shape: nothing
// promises that HGMMA adds a k-step's products as HMMA does, so a run that
// took one route for decode and the other for the training forward could
// round the same row differently.
func (b *Backend) exactWGMMA() bool { return b.exactMMA() && b.exactWG >= 0 && b.d.Info.HasWGMMA() }

// ExactOnWGMMA reports whether b's exact bf16 products run on the
// warpgroup-MMA kernels (the self-test names the route it checked).
func (b *Backend) ExactOnWGMMA() bool { return b.exactWGMMA() }

// KeepExactOnMMASync keeps b's exact bf16 products on the mma.sync
// kernels: the self-test's second exact check, after the warpgroup-MMA
// products failed the first. A run leaves them by setting ExactWGMMAEnv
// instead, before any backend is made, so that every backend of the
// process (the sampler's and the trainer's) and of the rank processes it
// starts take the same route.
func (b *Backend) KeepExactOnMMASync() { b.exactWG = -1 }

// gemmExactCost records an exact product: 2MNK on the tensor cores (bf16) or
// the CUDA cores, and the operands' and the result's bytes once each, as
// gemmCost counts cuBLAS's.
func (b *Backend) gemmExactCost(tensor bool, M, N, K int, halfA, halfB, halfC, accumulate bool) {
	e := EngineExactFFMA
	switch {
	case tensor && b.exactWGMMA():
		e = EngineExactWG
	case tensor && b.exactMMA():
		e = EngineExactMMA
	}
	out := float64(widthOf(halfC) * M * N)
	if accumulate {
		out *= 2 // read and write c
	}
	in := float64(widthOf(halfA)*M*K + widthOf(halfB)*K*N)
	b.d.cost(e, 2*float64(M)*float64(N)*float64(K), in+out)
}
