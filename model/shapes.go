package model

// Shape and index checks shared by every backend, so the CPU reference and
// the CUDA backend accept and refuse exactly the same calls with the same
// messages. Each returns the dimensions the op needs or an error naming the
// op and the offending shape or index.

import "fmt"

// Matrix views t as (rows, last dim), the convention of MatMul and the
// row-wise ops.
func Matrix(t *Tensor) (rows, cols int) {
	if len(t.Shape) == 0 {
		return 1, 1
	}
	cols = t.Shape[len(t.Shape)-1]
	if cols == 0 {
		return 0, 0
	}
	return t.Numel() / cols, cols
}

// SizeCheck fails unless every tensor has as many elements as the first.
func SizeCheck(op string, ts ...*Tensor) error {
	for _, t := range ts[1:] {
		if t.Numel() != ts[0].Numel() {
			return fmt.Errorf("%s: shapes %v and %v differ in size", op, ts[0].Shape, t.Shape)
		}
	}
	return nil
}

// MatMulDims returns M, N, K of c (M, N) = op(a) (M, K) · op(b) (K, N).
func MatMulDims(c, a, bm *Tensor, transA, transB bool) (M, N, K int, err error) {
	ar, ac := Matrix(a)
	br, bc := Matrix(bm)
	cr, cc := Matrix(c)
	M, K = ar, ac
	if transA {
		M, K = ac, ar
	}
	N, K2 := bc, br
	if transB {
		N, K2 = br, bc
	}
	if K != K2 || cr != M || cc != N {
		return 0, 0, 0, fmt.Errorf("matmul: op(a) %v (trans %v) · op(b) %v (trans %v) does not give c %v", a.Shape, transA, bm.Shape, transB, c.Shape)
	}
	return M, N, K, nil
}

// EmbeddingDims validates a lookup of ids in table (V, C) against rows
// (N, C) and returns C.
func EmbeddingDims(op string, rows, table *Tensor, ids []int32) (int, error) {
	V, Cw := Matrix(table)
	N, C := Matrix(rows)
	if N != len(ids) || C != Cw {
		return 0, fmt.Errorf("%s: rows %v for %d ids with table %v", op, rows.Shape, len(ids), table.Shape)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= V {
			return 0, fmt.Errorf("%s: token id %d at position %d outside the vocabulary [0, %d)", op, id, i, V)
		}
	}
	return C, nil
}

// RMSNormDims validates RMSNorm's operands and returns rows and width.
func RMSNormDims(out, rstd, x, w *Tensor) (R, n int, err error) {
	if err := SizeCheck("rmsnorm", out, x); err != nil {
		return 0, 0, err
	}
	R, n = Matrix(x)
	if w.Numel() != n || (rstd != nil && rstd.Numel() != R) {
		return 0, 0, fmt.Errorf("rmsnorm: x %v needs weight (%d) and rstd (%d)", x.Shape, n, R)
	}
	return R, n, nil
}

// RMSNormBackwardDims validates RMSNormBackward's operands.
func RMSNormBackwardDims(dx, dw, dout, x, w, rstd *Tensor) (R, n int, err error) {
	if err := SizeCheck("rmsnorm backward", dx, dout, x); err != nil {
		return 0, 0, err
	}
	R, n = Matrix(x)
	if w.Numel() != n || dw.Numel() != n || rstd.Numel() != R {
		return 0, 0, fmt.Errorf("rmsnorm backward: x %v with w %v, dw %v, rstd %v", x.Shape, w.Shape, dw.Shape, rstd.Shape)
	}
	return R, n, nil
}

// RoPEDims validates x (N, heads, D) against len(pos) positions.
func RoPEDims(x *Tensor, pos []int32) (N, H, D int, err error) {
	if len(x.Shape) != 3 || x.Shape[0] != len(pos) || x.Shape[2]%2 != 0 {
		return 0, 0, 0, fmt.Errorf("rope: x %v must be (N=%d, heads, even D)", x.Shape, len(pos))
	}
	return x.Shape[0], x.Shape[1], x.Shape[2], nil
}

// QKVDims describes the fused projection's layout for SplitQKV and its
// backward: per token, H query heads, then G key heads, then G value heads,
// each of D elements.
type QKVDims struct{ N, H, G, D int }

// Width is the fused row's length, (H+2G)·D.
func (d QKVDims) Width() int { return (d.H + 2*d.G) * d.D }

// SplitQKVDims validates SplitQKV's operands (for the backward: dqn, dkn,
// dv in place of qn, kn, v and dqkv in place of qkv): qn (N, H, D),
// kn and v (N, G, D), rstdQ (N·H), rstdK (N·G), qkv (N, (H+2G)·D), qw and
// kw (D), len(pos) = N, D even.
func SplitQKVDims(op string, qn, kn, v, rstdQ, rstdK, qkv, qw, kw *Tensor, pos []int32) (QKVDims, error) {
	if len(qn.Shape) != 3 || len(kn.Shape) != 3 || len(v.Shape) != 3 {
		return QKVDims{}, fmt.Errorf("%s: q %v, k %v, v %v must be 3-D (rows, heads, D)", op, qn.Shape, kn.Shape, v.Shape)
	}
	d := QKVDims{N: qn.Shape[0], H: qn.Shape[1], G: kn.Shape[1], D: qn.Shape[2]}
	rows, width := Matrix(qkv)
	ok := d.N == len(pos) && d.D%2 == 0 && kn.Shape[0] == d.N && kn.Shape[2] == d.D &&
		v.Numel() == kn.Numel() && v.Shape[1] == d.G && rstdQ.Numel() == d.N*d.H && rstdK.Numel() == d.N*d.G &&
		qw.Numel() == d.D && kw.Numel() == d.D && qkv.Numel() == d.N*d.Width() && (d.N == 0 || (rows == d.N && width == d.Width()))
	if !ok {
		return QKVDims{}, fmt.Errorf("%s: fused qkv %v for q %v, k %v, v %v, rstd %v/%v, norms %v/%v and %d positions (want qkv (N, (H+2G)·D), even D)",
			op, qkv.Shape, qn.Shape, kn.Shape, v.Shape, rstdQ.Shape, rstdK.Shape, qw.Shape, kw.Shape, len(pos))
	}
	return d, nil
}

// AttentionDims validates attention operands and segments and returns the
// query heads H, key/value heads G and head dim D.
func AttentionDims(op string, out, q, k, v *Tensor, segs []Segment) (H, G, D int, err error) {
	if len(q.Shape) != 3 || len(k.Shape) != 3 || len(v.Shape) != 3 {
		return 0, 0, 0, fmt.Errorf("%s: q %v, k %v, v %v must be 3-D (rows, heads, D)", op, q.Shape, k.Shape, v.Shape)
	}
	H, G, D = q.Shape[1], k.Shape[1], q.Shape[2]
	if G == 0 || H%G != 0 || k.Shape[2] != D || v.Shape[1] != G || v.Shape[2] != D || v.Shape[0] != k.Shape[0] || out.Numel() != q.Numel() {
		return 0, 0, 0, fmt.Errorf("%s: incompatible q %v, k %v, v %v, out %v", op, q.Shape, k.Shape, v.Shape, out.Shape)
	}
	for i, s := range segs {
		if s.QLen < 0 || s.QLen > s.KLen || s.Q0 < 0 || s.Q0+s.QLen > q.Shape[0] || s.K0 < 0 || s.K0+s.KLen > k.Shape[0] {
			return 0, 0, 0, fmt.Errorf("%s: segment %d %+v out of range for q rows %d, k rows %d", op, i, s, q.Shape[0], k.Shape[0])
		}
	}
	return H, G, D, nil
}

// LSGDims validates log-softmax-gather operands: logits (M, V), one target
// per row in the vocabulary, and per-row tensors of M elements (nil skipped).
func LSGDims(op string, logits *Tensor, targets []int32, perRow ...*Tensor) (M, V int, err error) {
	M, V = Matrix(logits)
	if M != len(targets) {
		return 0, 0, fmt.Errorf("%s: logits %v for %d targets", op, logits.Shape, len(targets))
	}
	for _, t := range perRow {
		if t != nil && t.Numel() != M {
			return 0, 0, fmt.Errorf("%s: per-row tensor %v must have %d elements", op, t.Shape, M)
		}
	}
	for i, t := range targets {
		if t < 0 || int(t) >= V {
			return 0, 0, fmt.Errorf("%s: target %d at row %d outside the vocabulary [0, %d)", op, t, i, V)
		}
	}
	return M, V, nil
}

// RowsDims validates row-index ops (rows along the first dimension):
// indexed is the tensor idx points into, counted the one with len(idx) rows.
// It returns the row width.
func RowsDims(op string, indexed, counted *Tensor, idx []int32) (int, error) {
	if len(indexed.Shape) == 0 || len(counted.Shape) == 0 {
		return 0, fmt.Errorf("%s: tensors must have a row dimension", op)
	}
	n := indexed.Shape[0]
	w := 0
	if n > 0 {
		w = indexed.Numel() / n
	}
	if counted.Shape[0] != len(idx) || (len(idx) > 0 && counted.Numel()/len(idx) != w) {
		return 0, fmt.Errorf("%s: %d indices with row widths %v and %v", op, len(idx), indexed.Shape, counted.Shape)
	}
	for i, r := range idx {
		if r < 0 || int(r) >= n {
			return 0, fmt.Errorf("%s: index %d at %d outside [0, %d)", op, r, i, n)
		}
	}
	return w, nil
}

// AdamWCheck validates an AdamW call.
func AdamWCheck(p, g, m, v *Tensor, h AdamWParams) error {
	if err := SizeCheck("adamw", p, g, m, v); err != nil {
		return err
	}
	if h.Step < 1 {
		return fmt.Errorf("adamw: step must start at 1, got %d", h.Step)
	}
	return nil
}

// ColsDims checks a column-block op between wide (R, W) and narrow (R, w),
// both viewed as matrices (Matrix): the narrow block is columns
// [col0, col0+w) of the wide one. It returns R, W and w.
func ColsDims(op string, wide, narrow *Tensor, col0 int) (R, W, w int, err error) {
	R, W = Matrix(wide)
	r, w := Matrix(narrow)
	if r != R || col0 < 0 || col0+w > W {
		return 0, 0, 0, fmt.Errorf("%s: columns [%d, %d) of %v do not match %v", op, col0, col0+w, wide.Shape, narrow.Shape)
	}
	return R, W, w, nil
}
