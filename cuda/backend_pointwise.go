package cuda

// Row-wise and element-wise ops: RMSNorm, RoPE, SwiGLU, log-softmax-gather
// and AdamW.

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gdrotrain/gdrotrain/model"
)

// rowBlock is the thread count of one-block-per-row kernels.
const rowBlock = 256

// RMSNorm normalizes rows of x over the last dimension, into fp32 or a
// bf16 activation (ActivationHalf); x, w and rstd are fp32.
func (b *Backend) RMSNorm(out, rstd, x, w *model.Tensor, eps float32) {
	po, half, ok := b.activation("rmsnorm", 0, out)
	if !ok {
		return
	}
	p, ok := b.reads("rmsnorm", x, w)
	if !ok {
		return
	}
	rs, ok := b.opt("rmsnorm", rstd)
	if !ok {
		return
	}
	R, n, err := model.RMSNormDims(out, rstd, x, w)
	if !b.keep(err) || R == 0 {
		return
	}
	b.kernelCost(4*R*n, 4*(R*n+n+R)+widthOf(half)*R*n)
	name := "rmsnorm_fwd"
	if half {
		name += "_h"
	}
	b.launch(name, [3]int{R}, rowBlock, po, rs, p[0], p[1], int32(n), eps)
}

// RMSNormBackward overwrites dx and accumulates dw. dw's column sums are
// taken over fixed chunks of rows and the chunks added in order
// (deterministic, no atomics).
func (b *Backend) RMSNormBackward(dx, dw, dout, x, w, rstd *model.Tensor) {
	p, ok := b.ptrs("rmsnorm backward", dx, dw, dout, x, w, rstd)
	if !ok {
		return
	}
	markStale(dw)
	R, n, err := model.RMSNormBackwardDims(dx, dw, dout, x, w, rstd)
	if !b.keep(err) || R == 0 || n == 0 {
		return
	}
	if b.normDWInPass(n) {
		b.kernelCost(8*R*n, 4*(3*R*n+2*n+R))
		b.rmsNormBackwardDxDW(R, n, p[1], func(part uint64, perChunk int) {
			b.launch("rmsnorm_bwd_dxdw", [3]int{(R + perChunk - 1) / perChunk}, rowBlock, p[0], part, p[2], p[3], p[4], p[5],
				int32(R), int32(n), int32(perChunk))
		})
		return
	}
	b.kernelCost(8*R*n, 4*(4*R*n+2*n+R))
	b.launch("rmsnorm_bwd_dx", [3]int{R}, rowBlock, p[0], p[2], p[3], p[4], p[5], int32(n))
	b.rmsNormBackwardDW(p[1], p[2], p[3], p[5], R, n)
}

// rmsNormDWMaxN is the widest row whose weight-gradient partials the dx
// pass sums (kernels/norm.cu, RMSNORM_DW_MAXN: shared memory).
const rmsNormDWMaxN = 8192

// normDWInPass says whether the norm backward sums dw's column partials in
// its dx pass (rmsnorm_bwd_dxdw) rather than in a second pass that reads
// dout and x again (rmsnorm_bwd_dw_partial): rows of at most rmsNormDWMaxN
// and not normTwoPass (a test's switch). Both give the same bits.
func (b *Backend) normDWInPass(n int) bool { return n <= rmsNormDWMaxN && !b.normTwoPass }

// rmsNormChunks is dw's chunking of R rows: perChunk rows a chunk (≥ 64,
// so that the chunks fit a grid), chunks of them.
func rmsNormChunks(R int) (perChunk, chunks int) {
	perChunk = max(64, (R+65534)/65535)
	return perChunk, (R + perChunk - 1) / perChunk
}

// rmsNormBackwardDxDW runs dx (launched by dxdw, one block a chunk, writing
// the chunks' column partials into part) and adds the partials into dw in
// order (sum_chunks: deterministic, no atomics).
func (b *Backend) rmsNormBackwardDxDW(R, n int, dw uint64, dxdw func(part uint64, perChunk int)) {
	perChunk, chunks := rmsNormChunks(R)
	part, err := b.alloc(chunks * n)
	if !b.keep(err) {
		return
	}
	defer b.free(part)
	dxdw(part.ptr, perChunk)
	b.launch("sum_chunks", [3]int{(n + 255) / 256}, 256, dw, part.ptr, int32(chunks), int32(n))
}

// rmsNormBackwardDW accumulates dw += Σ_rows dout·x·rstd: column sums over
// fixed chunks of rows, the chunks added in order (deterministic, no
// atomics). Its traffic is counted with the dx kernel's.
func (b *Backend) rmsNormBackwardDW(dw, dout, x, rstd uint64, R, n int) {
	perChunk, chunks := rmsNormChunks(R)
	part, err := b.alloc(chunks * n)
	if !b.keep(err) {
		return
	}
	defer b.free(part)
	cols := (n + 255) / 256
	b.launch("rmsnorm_bwd_dw_partial", [3]int{cols, chunks}, 256, part.ptr, dout, x, rstd, int32(R), int32(n), int32(perChunk))
	b.launch("sum_chunks", [3]int{cols}, 256, dw, part.ptr, int32(chunks), int32(n))
}

// ropeTable holds cos/sin of pos·theta^(−2i/D) for positions [0, maxPos),
// computed in float64 on the host like the CPU reference.
type ropeTable struct {
	theta    float64
	D        int
	maxPos   int
	cos, sin *buffer
}

// ropeTables returns tables covering position maxPos−1, growing them to the
// next power of two so a generation does not rebuild them every token.
func (b *Backend) ropeTables(theta float64, D, maxPos int) (*ropeTable, bool) {
	b.cacheMu.Lock()
	defer b.cacheMu.Unlock()
	t := &b.rope
	if t.cos != nil && t.theta == theta && t.D == D && t.maxPos >= maxPos {
		return t, true
	}
	size := 1024
	for size < maxPos {
		size *= 2
	}
	half := D / 2
	cosH, sinH := make([]float32, size*half), make([]float32, size*half)
	for i := 0; i < half; i++ {
		inv := math.Pow(theta, -2*float64(i)/float64(D))
		for p := 0; p < size; p++ {
			ang := float64(p) * inv
			cosH[p*half+i], sinH[p*half+i] = float32(math.Cos(ang)), float32(math.Sin(ang))
		}
	}
	c, err := b.allocFrom(b.d.alloc, len(cosH), 4) // the main pool, even in a graph's eager run
	if !b.keep(err) {
		return nil, false
	}
	s, err := b.allocFrom(b.d.alloc, len(sinH), 4)
	if !b.keep(err) {
		return nil, false
	}
	if !b.keep(b.d.copyIn(c.ptr, unsafe.Pointer(&cosH[0]), int64(len(cosH))*4)) ||
		!b.keep(b.d.copyIn(s.ptr, unsafe.Pointer(&sinH[0]), int64(len(sinH))*4)) {
		return nil, false
	}
	b.free(t.cos, t.sin) // tables of a shorter range; every op reading them is issued
	*t = ropeTable{theta: theta, D: D, maxPos: size, cos: c, sin: s}
	return t, true
}

// RoPE rotates pairs (i, i+D/2) of every head by pos·theta^(−2i/D).
func (b *Backend) RoPE(x *model.Tensor, pos []int32, theta float64, inverse bool) {
	p, ok := b.ptrs("rope", x)
	if !ok {
		return
	}
	N, H, D, err := model.RoPEDims(x, pos)
	if !b.keep(err) || N == 0 || H == 0 || D == 0 {
		return
	}
	tab, posAddr, ok := b.ropeInputs("rope", pos, theta, D)
	if !ok {
		return
	}
	sign := float32(1)
	if inverse {
		sign = -1
	}
	b.kernelCost(6*N*H*D/2, 4*(2*N*H*D+N*D))
	b.elementwise("rope", N*H*D/2, p[0], posAddr, tab.cos.ptr, tab.sin.ptr, int32(N), int32(H), int32(D), sign)
}

// ropeInputs checks the positions and returns the angle tables covering
// them and the positions' device address.
func (b *Backend) ropeInputs(op string, pos []int32, theta float64, D int) (*ropeTable, uint64, bool) {
	maxPos := int32(0)
	for i, v := range pos {
		if v < 0 {
			b.keep(fmt.Errorf("%s: negative position %d at row %d", op, v, i))
			return nil, 0, false
		}
		maxPos = max(maxPos, v)
	}
	tab, ok := b.ropeTables(theta, D, int(maxPos)+1)
	if !ok {
		return nil, 0, false
	}
	addr, ok := b.upload(op, pos)
	if !ok {
		return nil, 0, false
	}
	return tab, addr[0], true
}

// SwiGLU computes silu(gate) ⊙ up.
// SwiGLU is on fp32 tensors, or on bf16 ones (ActivationHalf) throughout.
func (b *Backend) SwiGLU(out, gate, up *model.Tensor) {
	if !b.keep(model.SizeCheck("swiglu", out, gate, up)) {
		return
	}
	p, half, ok := b.uniform("swiglu", out, gate, up)
	if !ok {
		return
	}
	markStale(out)
	n := out.Numel()
	if half {
		b.kernelCost(6*n, 2*3*n)
		b.elementwise("swiglu_fwd_h", n, p[0], p[1], p[2], int64(n))
		return
	}
	b.kernelCost(6*n, 4*3*n)
	b.elementwise("swiglu_fwd", n, p[0], p[1], p[2], int64(n))
}

// SwiGLUBackward overwrites dgate and dup, reading gate and up in fp32 or
// bf16. dgate and dup may be bf16 activations (ActivationHalf, both or
// neither, with bf16 gate and up): the fp32 gradients rounded once, for an
// input gradient that only products read.
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up *model.Tensor) {
	const op = "swiglu backward"
	if !b.keep(model.SizeCheck(op, dgate, dup, dout, gate, up)) {
		return
	}
	out, halfOut, ok := b.uniform(op, dgate, dup)
	if !ok {
		return
	}
	markStale(dgate)
	markStale(dup)
	pd, ok := b.reads(op, dout)
	if !ok {
		return
	}
	in, half, ok := b.uniform(op, gate, up)
	if !ok {
		return
	}
	if halfOut && !half {
		b.keep(fmt.Errorf("%s: bf16 gradients need bf16 gate and up", op))
		return
	}
	n := gate.Numel()
	name := "swiglu_bwd"
	if half {
		name += "_h"
	}
	if halfOut {
		name += "h"
	}
	b.kernelCost(12*n, (4+2*widthOf(half)+2*widthOf(halfOut))*n)
	b.elementwise(name, n, out[0], out[1], pd[0], in[0], in[1], int64(n))
}

// uniform returns the addresses of tensors that are all fp32 or all
// writable bf16 (half), refusing a mix and frozen weights.
func (b *Backend) uniform(op string, ts ...*model.Tensor) ([]uint64, bool, bool) {
	if !b.ok() {
		return nil, false, false
	}
	out := make([]uint64, len(ts))
	half := false
	for i, t := range ts {
		p, h, ok := b.operand(op, i, t)
		if !ok {
			return nil, false, false
		}
		if buf := t.Store.(*buffer); buf.frozen || (i > 0 && h != half) {
			b.keep(fmt.Errorf("%s: tensor arguments must all be fp32 or all writable bf16 (argument %d %v is not)", op, i, t.Shape))
			return nil, false, false
		}
		half, out[i] = h, p
	}
	return out, half, true
}

// LogSoftmaxGather computes target log-probabilities, log-sum-exp and entropy.
func (b *Backend) LogSoftmaxGather(logp, lse, entropy, logits *model.Tensor, targets []int32) {
	p, ok := b.ptrs("logsoftmax gather", logp, lse, logits)
	if !ok {
		return
	}
	markStale(lse)
	ep, ok := b.opt("logsoftmax gather", entropy)
	if !ok {
		return
	}
	M, V, err := model.LSGDims("logsoftmax gather", logits, targets, logp, lse, entropy)
	if !b.keep(err) || M == 0 {
		return
	}
	addr, ok := b.upload("targets", targets)
	if ok {
		b.kernelCost(6*M*V, 4*M*V)
		b.launch("lsg_fwd", [3]int{M}, rowBlock, p[0], p[1], ep, p[2], addr[0], int32(V), int32(1))
	}
}

// LogSoftmaxGatherDrawn is LogSoftmaxGather with row r's target the token
// SampleTokens wrote into drawn (R, 2) (model.DeviceSampler): the same
// kernel, reading the targets from the draw's output at a stride of two
// words, so the same bits as LogSoftmaxGather on those tokens.
func (b *Backend) LogSoftmaxGatherDrawn(logp, lse, entropy, logits, drawn *model.Tensor) {
	const op = "logsoftmax gather (drawn targets)"
	p, ok := b.ptrs(op, logp, lse, logits)
	if !ok {
		return
	}
	markStale(lse)
	ep, ok := b.opt(op, entropy)
	if !ok {
		return
	}
	pd, ok := b.reads(op, drawn)
	if !ok {
		return
	}
	M, V := model.Matrix(logits)
	if drawn.Numel() != 2*M {
		b.keep(fmt.Errorf("%s: drawn %v must hold (%d, 2), a token and a log-prob per row of logits %v", op, drawn.Shape, M, logits.Shape))
		return
	}
	if _, _, err := model.LSGDims(op, logits, make([]int32, M), logp, lse, entropy); !b.keep(err) || M == 0 {
		return
	}
	b.kernelCost(6*M*V, 4*M*V)
	b.launch("lsg_fwd", [3]int{M}, rowBlock, p[0], p[1], ep, p[2], pd[0], int32(V), int32(2))
}

// LogSoftmaxGatherBackward overwrites dlogits = dlogp·(onehot − softmax),
// in fp32 or as a bf16 activation (ActivationHalf).
func (b *Backend) LogSoftmaxGatherBackward(dlogits, dlogp, logits, lse *model.Tensor, targets []int32) {
	pd, half, ok := b.activation("logsoftmax gather backward", 0, dlogits)
	if !ok {
		return
	}
	r, ok := b.reads("logsoftmax gather backward", dlogp, logits, lse)
	if !ok || !b.keep(model.SizeCheck("logsoftmax gather backward", dlogits, logits)) {
		return
	}
	p := append([]uint64{pd}, r...)
	M, V, err := model.LSGDims("logsoftmax gather backward", logits, targets, dlogp, lse)
	if !b.keep(err) || M == 0 || V == 0 {
		return
	}
	addr, ok := b.upload("targets", targets)
	if ok {
		b.kernelCost(4*M*V, (4+widthOf(half))*M*V)
		name := "lsg_bwd"
		if half {
			name += "_h"
		}
		b.launch(name, [3]int{M, (V + 255) / 256}, 256, p[0], p[1], p[2], p[3], addr[0], int32(V))
	}
}

// AdamW applies one decoupled-weight-decay Adam step in float64 arithmetic.
func (b *Backend) AdamW(p, g, m, v *model.Tensor, h model.AdamWParams) {
	ps, ok := b.ptrs("adamw", p, g, m, v)
	if !ok || !b.keep(model.AdamWCheck(p, g, m, v, h)) {
		return
	}
	bc1 := 1 - math.Pow(h.Beta1, float64(h.Step))
	bc2 := 1 - math.Pow(h.Beta2, float64(h.Step))
	// A weight with a bf16 copy (Shadow) gets it written in the same pass,
	// a row view (q, k, v of the fused Layer.QKV; gate, up) its part of the
	// copy: the kernel writes element i of p to p16[i].
	buf := p.Store.(*buffer)
	var p16 uint64
	if buf.shadow != nil {
		p16 = buf.shadow.ptr + 2*uint64(p.Off)
		b.kernelCost(0, 2*p.Numel())
	}
	b.kernelCost(12*p.Numel(), 4*7*p.Numel()) // read p, g, m, v; write p, m, v
	b.elementwise("adamw", p.Numel(), ps[0], p16, ps[1], ps[2], ps[3], int64(p.Numel()), h.Scale(),
		h.Beta1, h.Beta2, h.LR, h.WeightDecay, h.Eps, bc1, bc2)
	if p16 != 0 {
		b.markFresh(buf, p.Off, p.Off+p.Numel())
	}
}

var _ model.Backend = (*Backend)(nil)
