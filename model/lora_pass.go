package model

// The adapters' forward and backward (lora.go): the layer's forward and
// backward call these beside each adapted product. The low-rank inputs
// u = s·A·xᵀ are kept transposed, rank rows by token columns, like the
// MLP's activations, so every product below is a plain (transposed)
// matrix product and each adapter's rows are a row view of its group.
//
// For y += uᵀ·Bᵀ with u = s·A·xᵀ and dy = ∂J/∂y:
//
//	dB += dyᵀ·uᵀ      du = Bᵀ·dyᵀ (then ·s)      dA += du·x      dx += duᵀ·A

// loraActs are one layer's low-rank inputs (nil tensors where no adapter
// of the group is on) and the scratch their terms pass through.
type loraActs struct {
	qkv, o, gu, down *Tensor // (n·r, N)
	// tmp (N·W floats, W the widest of the q/k/v targets' widths, at
	// least one MLP row's worth) holds one term before it is added into a
	// bf16-capable product: a q/k/v block (N, w), or a chunk of gate or up
	// rows (rows, N). It is shared by a training pass's layers and owned
	// by whoever allocated it (ownTmp).
	tmp    *Tensor
	ownTmp bool
}

func (u *loraActs) tensors() []*Tensor {
	ts := []*Tensor{u.qkv, u.o, u.gu, u.down}
	if u.ownTmp {
		ts = append(ts, u.tmp)
	}
	var out []*Tensor
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// loraGroupRows is the stacked rank rows of the targeted ones of targets.
func (m *Model) loraGroupRows(targets ...string) int {
	n := 0
	for _, t := range targets {
		if m.A.LoRA.Has(t) {
			n += m.A.LoRA.Rank
		}
	}
	return n
}

// newLoRAActs allocates the low-rank inputs of n tokens; the caller sets
// tmp (newLoRATmp) unless own is set.
func (m *Model) newLoRAActs(n int, own bool) *loraActs {
	if m.A == nil {
		return nil
	}
	s := func(rows int) *Tensor {
		if rows == 0 {
			return nil
		}
		return Scratch(m.B, rows, n)
	}
	u := &loraActs{qkv: s(m.loraGroupRows("q", "k", "v")), o: s(m.loraGroupRows("o")),
		gu: s(m.loraGroupRows("gate", "up")), down: s(m.loraGroupRows("down"))}
	if own {
		u.tmp, u.ownTmp = m.newLoRATmp(n), true
	}
	return u
}

// newLoRATmp allocates the term scratch for n tokens (loraActs.tmp), or
// nil where no q/k/v, gate or up adapter needs one.
func (m *Model) newLoRATmp(n int) *Tensor {
	if m.A == nil {
		return nil
	}
	w := 0
	for _, t := range []string{"q", "k", "v"} {
		if m.A.LoRA.Has(t) {
			_, out := loraDims(m.Cfg, t)
			w = max(w, out)
		}
	}
	if F := m.Cfg.IntermediateSize; m.A.LoRA.Has("gate") || m.A.LoRA.Has("up") {
		// Gate and up rows go through in chunks (loraGateUp): all F rows
		// at once for a decode step's few tokens (two launches per
		// adapter), chunks as tall as the hidden size for a training
		// pass's many (the scratch then stays N × C).
		if int64(n)*int64(F) <= loraWholeTermElems {
			w = max(w, F)
		} else {
			w = max(w, min(F, m.Cfg.HiddenSize))
		}
	}
	if w == 0 {
		return nil
	}
	return Scratch(m.B, n*w)
}

// loraWholeTermElems bounds the scratch that takes gate's or up's whole
// term at once: 4M floats (16 MiB), e.g. 256 decode rows × F = 12,288.
const loraWholeTermElems = 4 << 20

// termView is the first rows·cols elements of tmp as a (rows, cols) matrix.
func termView(tmp *Tensor, rows, cols int) *Tensor {
	return tmp.Rows(0, rows*cols).View(rows, cols)
}

// qkvCols are the first columns of the q, k and v blocks in the fused
// product's rows.
func (m *Model) qkvCols() [3]int {
	HD, GD := m.Cfg.NumAttentionHeads*m.Cfg.HeadDim, m.Cfg.NumKeyValueHeads*m.Cfg.HeadDim
	return [3]int{0, HD, HD + GD}
}

// loraQKV adds the q/k/v adapters' terms into a.qkv.
func (m *Model) loraQKV(l int, a *layerActs) {
	la, u := &m.A.Adapters[l], a.lora
	if la.QKVA == nil {
		return
	}
	b, r, n := m.B, m.A.LoRA.Rank, a.qkv.Shape[0]
	b.MatMul(u.qkv, la.QKVA, a.xn1, false, true, false) // (k·r, N) = A·xn1ᵀ
	b.Scale(u.qkv, m.A.LoRA.Scale())
	cols, k := m.qkvCols(), 0
	for j := range la.QKV {
		ad := &la.QKV[j]
		if !ad.On() {
			continue
		}
		t := termView(u.tmp, n, ad.B.Shape[0])
		b.MatMul(t, u.qkv.Rows(k*r, (k+1)*r), ad.B, true, true, false) // (N, w) = uᵀ·Bᵀ
		b.AddCols(a.qkv, t, cols[j])
		k++
	}
}

// loraO adds the o adapter's term into dst: the attention branch, fp32
// (model.residualBranch: xMid itself, or the scratch AddRMSNorm adds to x).
func (m *Model) loraO(l int, a *layerActs, att, dst *Tensor) {
	ad, u := &m.A.Adapters[l].O, a.lora
	if !ad.On() {
		return
	}
	b := m.B
	b.MatMul(u.o, ad.A, att, false, true, false) // (r, N) = A·attᵀ
	b.Scale(u.o, m.A.LoRA.Scale())
	b.MatMul(dst, u.o, ad.B, true, true, true) // branch += uᵀ·Bᵀ
}

// loraGateUp adds the gate and up adapters' terms into a.gu (gateᵀ over
// upᵀ), a chunk of rows at a time through tmp.
func (m *Model) loraGateUp(l int, a *layerActs) {
	la, u := &m.A.Adapters[l], a.lora
	if la.GateUpA == nil {
		return
	}
	b, r := m.B, m.A.LoRA.Rank
	F, n := a.h.Shape[0], a.h.Shape[1]
	b.MatMul(u.gu, la.GateUpA, a.xn2, false, true, false) // (k·r, N) = A·xn2ᵀ
	b.Scale(u.gu, m.A.LoRA.Scale())
	chunk := max(1, u.tmp.Numel()/n)
	k := 0
	for j, ad := range []*Adapter{&la.Gate, &la.Up} {
		if !ad.On() {
			continue
		}
		uj := u.gu.Rows(k*r, (k+1)*r)
		for lo := 0; lo < F; lo += chunk {
			hi := min(lo+chunk, F)
			t := termView(u.tmp, hi-lo, n)
			b.MatMul(t, ad.B.Rows(lo, hi), uj, false, false, false) // (rows, N) = B·u
			b.AddCols(a.gu.Rows(j*F+lo, j*F+hi), t, 0)
		}
		k++
	}
}

// loraDown adds the down adapter's term into out (the residual stream).
func (m *Model) loraDown(l int, a *layerActs, out *Tensor) {
	ad, u := &m.A.Adapters[l].Down, a.lora
	if !ad.On() {
		return
	}
	b := m.B
	b.MatMul(u.down, ad.A, a.h, false, false, false) // (r, N) = A·h, h = (silu(gate)⊙up)ᵀ
	b.Scale(u.down, m.A.LoRA.Scale())
	b.MatMul(out, u.down, ad.B, true, true, true) // out += uᵀ·Bᵀ
}

// loraGrads are the backward's scratch gradients of the low-rank inputs.
type loraGrads struct{ qkv, o, gu, down *Tensor }

func (g *loraGrads) tensors() []*Tensor {
	var out []*Tensor
	for _, t := range []*Tensor{g.qkv, g.o, g.gu, g.down} {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

func (m *Model) newLoRAGrads(n int) *loraGrads {
	u := m.newLoRAActs(n, false)
	if u == nil {
		return nil
	}
	return &loraGrads{qkv: u.qkv, o: u.o, gu: u.gu, down: u.down}
}

// loraDownBackward: out += uᵀ·Bᵀ, u = s·A·h. dx is ∂J/∂out; dh (F, N)
// already holds the base product's part, and the adapter's adds in.
func (m *Model) loraDownBackward(l int, a *layerActs, s *layerGrads, dx *Tensor, g *LayerLoRA) {
	ad, u := &m.A.Adapters[l].Down, a.lora
	if !ad.On() {
		return
	}
	b, du := m.B, s.lora.down
	b.MatMul(g.Down.B, dx, u.down, true, true, true) // dB += dxᵀ·uᵀ
	b.MatMul(du, ad.B, dx, true, true, false)        // du = Bᵀ·dxᵀ
	b.Scale(du, m.A.LoRA.Scale())
	b.MatMul(g.Down.A, du, a.h, false, true, true) // dA += du·hᵀ
	b.MatMul(s.dh, ad.A, du, true, false, true)    // dh += Aᵀ·du
}

// loraGateUpBackward: gu += [B_g·u_g ; B_u·u_u], u = s·A·xn2ᵀ. s.dgu holds
// ∂J/∂gu; s.dxn (N, C) already holds the base product's part.
func (m *Model) loraGateUpBackward(l int, a *layerActs, s *layerGrads, g *LayerLoRA) {
	la, u := &m.A.Adapters[l], a.lora
	if la.GateUpA == nil {
		return
	}
	b, r, du := m.B, m.A.LoRA.Rank, s.lora.gu
	F := a.h.Shape[0]
	k := 0
	for j, ad := range []*Adapter{&la.Gate, &la.Up} {
		if !ad.On() {
			continue
		}
		gd := [2]*Adapter{&g.Gate, &g.Up}[j]
		dg := s.dgu.Rows(j*F, (j+1)*F)
		b.MatMul(gd.B, dg, u.gu.Rows(k*r, (k+1)*r), false, true, true) // dB += dg·uᵀ
		b.MatMul(du.Rows(k*r, (k+1)*r), ad.B, dg, true, false, false)  // du = Bᵀ·dg
		k++
	}
	b.Scale(du, m.A.LoRA.Scale())
	b.MatMul(g.GateUpA, du, a.xn2, false, false, true) // dA += du·xn2
	b.MatMul(s.dxn, du, la.GateUpA, true, false, true) // dxn += duᵀ·A
}

// loraOBackward: xMid += uᵀ·Bᵀ, u = s·A·attᵀ. s.dxMid is ∂J/∂xMid; datt
// (N, H·D) already holds the base product's part.
func (m *Model) loraOBackward(l int, a *layerActs, s *layerGrads, att, datt *Tensor, g *LayerLoRA) {
	ad, u := &m.A.Adapters[l].O, a.lora
	if !ad.On() {
		return
	}
	b, du := m.B, s.lora.o
	b.MatMul(g.O.B, s.dxMid, u.o, true, true, true) // dB += dxMidᵀ·uᵀ
	b.MatMul(du, ad.B, s.dxMid, true, true, false)  // du = Bᵀ·dxMidᵀ
	b.Scale(du, m.A.LoRA.Scale())
	b.MatMul(g.O.A, du, att, false, false, true) // dA += du·att
	b.MatMul(datt, du, ad.A, true, false, true)  // datt += duᵀ·A
}

// loraQKVBackward: the q/k/v blocks of qkv get uⱼᵀ·Bⱼᵀ, u = s·A·xn1ᵀ.
// s.dqkv is ∂J/∂qkv; s.dxn (N, C) already holds the base product's part.
func (m *Model) loraQKVBackward(l int, a *layerActs, s *layerGrads, g *LayerLoRA) {
	la, u := &m.A.Adapters[l], a.lora
	if la.QKVA == nil {
		return
	}
	b, r, du := m.B, m.A.LoRA.Rank, s.lora.qkv
	n := s.dqkv.Shape[0]
	cols, k := m.qkvCols(), 0
	for j := range la.QKV {
		ad := &la.QKV[j]
		if !ad.On() {
			continue
		}
		dc := termView(u.tmp, n, ad.B.Shape[0])
		b.CopyCols(dc, s.dqkv, cols[j])
		b.MatMul(g.QKV[j].B, dc, u.qkv.Rows(k*r, (k+1)*r), true, true, true) // dB += dcᵀ·uᵀ
		b.MatMul(du.Rows(k*r, (k+1)*r), ad.B, dc, true, true, false)         // du = Bᵀ·dcᵀ
		k++
	}
	b.Scale(du, m.A.LoRA.Scale())
	b.MatMul(g.QKVA, du, a.xn1, false, false, true) // dA += du·xn1
	b.MatMul(s.dxn, du, la.QKVA, true, false, true) // dxn += duᵀ·A
}
