package model

// Oracle tests: our hand-written forward and backward (qwen3.go, backward.go
// on the float32 CPU backend) against gorgonia's symbolic differentiation of
// the same computation, built independently here in float64.
//
// What is checked (the per-layer and whole-model levels of the gradient
// checks in docs/architecture.md):
//   - TestOracleLayer: each decoder layer of a tiny GQA model (4 query heads
//     over 2 KV heads, D = 8, jittered norm weights) on a packed batch of
//     three sequences. With J = Σ out ⊙ dout for a random dout, ∂J/∂out = dout
//     is exactly what layerBackward is given, so we compare the layer output
//     (layerForward), ∂J/∂x and ∂J/∂θ for all eleven layer weights.
//   - TestOracleModel: J = Σ_t w_t · log π(token_t) over the targets of two
//     packed sequences (Start 3 and 1, one token repeated), with tied and
//     untied embeddings: the log-probs, the entropies and the gradient of
//     every parameter (embedding, every layer, final norm, LM head).
//   - Both also probe the oracle itself: for every differentiated tensor, a
//     float64 central difference of the gorgonia forward at its largest-
//     gradient entry and at a random entry must match gorgonia's symbolic
//     gradient. gorgonia v0.9.18 has wrong derivatives (InverseSqrt's is
//     −g/(2y³) instead of −g·y³/2, so we build 1/√ as Inverse(Sqrt(·))); the
//     probe makes sure no other one slips into the reference.
//
// The gorgonia graph is written from the equations, not from our code: RMSNorm
// from row means, broadcasting by outer products with ones; per-head q/k norms
// on column slices; RoPE as x ⊙ cos + rotate_half(x) ⊙ sin with a constant
// (D, D) rotate-half matrix; attention over the whole packed batch with a
// constant 0/1 mask that is causal and block-diagonal (each sequence sees only
// itself, positions restarting at 0) and softmax written out as exp / row sum
// (no max subtraction: scores are O(1) after the q/k norms); the embedding
// lookup and the row and target gathers as one-hot constant matrices.
//
// Run: go test -run Oracle ./model/   (about a second on two cores)
//
// Tolerance policy (internal/testinfra/numcheck, whose own tests cover the comparator
// on zero, NaN, Inf and sign): an element passes when
// |got − want| ≤ atol + rtol·|want|, want being gorgonia's float64 value.
// rtol is 1e-4 for forward values and 1e-3 for gradients: our pipeline stores
// float32 (2^-24 ≈ 6e-8 unit roundoff) and these leave two to three orders of
// magnitude for error growth through two layers, while a real bug (a dropped
// term, a wrong sign, a missed scale) moves entries by a sizable fraction. atol
// is atolFrac · max|want| over the compared tensor, atolFrac = 1e-6 forward
// and 1e-5 for gradients: float32 error is relative to the terms summed, not to
// a result that cancels to nearly zero, so near-zero entries carry an absolute
// error of a few ulps of the tensor's scale; a fixed atol would be meaningless
// across gradients whose scales differ by orders of magnitude. Observed: worst
// |got − want| ≈ 1.2e-6 · max|want| (gradients), 10× inside atolFrac.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	// gorgonia's dependencies refuse to start on a Go release they do not
	// know (Go 1.26 here); this import asserts the GC does not move heap
	// objects, which holds for every Go release so far.
	_ "go4.org/unsafe/assume-no-moving-gc"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// oracleTol is atol = atolFrac · max|want| plus rtol (see the file comment).
type oracleTol struct{ atolFrac, rtol float64 }

var (
	oracleForwardTol = oracleTol{atolFrac: 1e-6, rtol: 1e-4}
	oracleGradTol    = oracleTol{atolFrac: 1e-5, rtol: 1e-3}
	// The oracle's own finite differences are float64 with step 1e-5:
	// truncation ~h²·f''' and roundoff ~1e-16·|J|/h are both below 1e-8.
	oracleFDTol = oracleTol{atolFrac: 1e-6, rtol: 1e-5}
)

// oracleWorst tracks the largest errors over the tensors compared, for the log.
type oracleWorst struct {
	normName, nmseName string
	norm, nmse         float64 // max |err| / max|want|, NMSE
}

func (w *oracleWorst) String() string {
	return fmt.Sprintf("max |got−want|/max|want| %.3g (%s), max NMSE %.3g (%s)", w.norm, w.normName, w.nmse, w.nmseName)
}

// oracleCheck compares ours (float32) with the oracle (float64) under tl,
// reports a failure on t and records the errors in worst.
func oracleCheck(t *testing.T, name string, got []float32, want []float64, tl oracleTol, worst *oracleWorst) {
	t.Helper()
	scale := oracleMaxAbs(want)
	st, err := numcheck.Compare(got, want, numcheck.Tol{Atol: tl.atolFrac * scale, Rtol: tl.rtol})
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if scale > 0 && st.MaxAbs/scale > worst.norm {
		worst.norm, worst.normName = st.MaxAbs/scale, name
	}
	if st.NMSE > worst.nmse {
		worst.nmse, worst.nmseName = st.NMSE, name
	}
}

func oracleMaxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// oracleConfig is a tiny Qwen3 with GQA (4 query heads over 2 KV heads) and a
// small RoPE theta so that rotations at positions < 8 are far from identity.
func oracleConfig(t *testing.T, tied bool) *Config {
	t.Helper()
	o := DefaultTiny()
	o.Layers, o.Hidden, o.Intermediate, o.Heads, o.KVHeads, o.HeadDim, o.Vocab = 2, 32, 48, 4, 2, 8, 64
	o.RopeTheta, o.Tied = 100, tied
	cfg, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func oracleModel(t *testing.T, tied bool, seed uint64) *Model {
	cfg := oracleConfig(t, tied)
	b := NewTestBackend()
	// std 0.2 keeps every branch O(1) against the residual stream; jitter
	// 0.3 makes every norm weight matter.
	return &Model{Cfg: cfg, B: b, P: RandomParams(b, cfg, seed, 0.2, 0.3)}
}

func oracleDownload(b Backend, t *Tensor) []float32 {
	host := make([]float32, t.Numel())
	b.Download(t, host)
	return host
}

func oracleF64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func oracleNormal(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// ---------------------------------------------------------------------------
// The gorgonia side.

// oracleGraph builds a float64 gorgonia expression graph for a packed batch
// of sequences. Every node is a matrix; vectors are (1, n) rows. Construction
// errors fail the test.
type oracleGraph struct {
	t       *testing.T
	g       *G.ExprGraph
	cfg     *Config
	n       int     // packed rows N
	wrt     G.Nodes // differentiated leaves, in order
	names   []string
	counter int

	mask     *G.Node // (N, N) 1 where key j is in query i's sequence and j ≤ i
	cos, sin *G.Node // (N, D) RoPE tables at each row's position
	rotHalf  *G.Node // (D, D) x·rotHalf = rotate_half(x) = [−x₂, x₁]
}

func newOracleGraph(t *testing.T, cfg *Config, lens []int) *oracleGraph {
	o := &oracleGraph{t: t, g: G.NewGraph(), cfg: cfg}
	for _, l := range lens {
		o.n += l
	}
	N, D := o.n, cfg.HeadDim
	mask := make([]float64, N*N)
	cos, sin := make([]float64, N*D), make([]float64, N*D)
	off := 0
	for _, l := range lens {
		for i := range l {
			for j := 0; j <= i; j++ {
				mask[(off+i)*N+off+j] = 1
			}
			for c := range D {
				// element c pairs with c ± D/2; both turn at frequency index c mod D/2
				ang := float64(i) * math.Pow(cfg.RopeTheta, -2*float64(c%(D/2))/float64(D))
				cos[(off+i)*D+c], sin[(off+i)*D+c] = math.Cos(ang), math.Sin(ang)
			}
		}
		off += l
	}
	rot := make([]float64, D*D)
	for j := range D / 2 {
		rot[(j+D/2)*D+j] = -1 // out[j] = −x[j+D/2]
		rot[j*D+j+D/2] = 1    // out[j+D/2] = x[j]
	}
	o.mask = o.input(N, N, mask)
	o.cos, o.sin = o.input(N, D, cos), o.input(N, D, sin)
	o.rotHalf = o.input(D, D, rot)
	return o
}

// must unwraps a gorgonia result.
func (o *oracleGraph) must(n *G.Node, err error) *G.Node {
	o.t.Helper()
	if err != nil {
		o.t.Fatal(err)
	}
	return n
}

func (o *oracleGraph) matrix(name string, rows, cols int, data []float64) *G.Node {
	return G.NewMatrix(o.g, tensor.Float64, G.WithShape(rows, cols), G.WithName(name),
		G.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data))))
}

// input adds a (rows, cols) node holding data that is not differentiated.
func (o *oracleGraph) input(rows, cols int, data []float64) *G.Node {
	o.counter++
	return o.matrix(fmt.Sprintf("in%d", o.counter), rows, cols, data)
}

// fill adds a constant (rows, cols) node with every entry v.
func (o *oracleGraph) fill(rows, cols int, v float64) *G.Node {
	data := make([]float64, rows*cols)
	for i := range data {
		data[i] = v
	}
	return o.input(rows, cols, data)
}

// leaf adds a differentiated (rows, cols) node holding data.
func (o *oracleGraph) leaf(name string, rows, cols int, data []float64) *G.Node {
	n := o.matrix(name, rows, cols, data)
	o.wrt = append(o.wrt, n)
	o.names = append(o.names, name)
	return n
}

// param adds a differentiated node initialised from our tensor t.
func (o *oracleGraph) param(name string, rows, cols int, b Backend, t *Tensor) *G.Node {
	return o.leaf(name, rows, cols, oracleF64(oracleDownload(b, t)))
}

// oracleLayerW holds one layer's parameter nodes, HF layout (out, in).
type oracleLayerW struct {
	inputNorm, q, k, v, o, qNorm, kNorm, postNorm, gate, up, down *G.Node
	// lora: each adapted projection's A (r, in) and B (out, r), added
	// as s·(x·Aᵀ)·Bᵀ (lora_oracle_test.go); nil without adapters.
	lora      map[string][2]*G.Node
	loraScale float64
}

// proj is x·Wᵀ for the layer's projection target (weight w), plus its
// adapter's term where it has one.
func (o *oracleGraph) proj(x, w *G.Node, lw *oracleLayerW, target string) *G.Node {
	y := o.linear(x, w)
	ab, ok := lw.lora[target]
	if !ok {
		return y
	}
	low := o.linear(o.linear(x, ab[0]), ab[1]) // (x·Aᵀ)·Bᵀ
	rows, cols := low.Shape()[0], low.Shape()[1]
	return o.must(G.Add(y, o.must(G.HadamardProd(low, o.fill(rows, cols, lw.loraScale)))))
}

// layerParams adds layer l's parameters of m, named as in Params.Named.
func (o *oracleGraph) layerParams(m *Model, l int) *oracleLayerW {
	c, w, b := m.Cfg, &m.P.Layers[l], m.B
	C, F, HD, GD, D := c.HiddenSize, c.IntermediateSize, c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim, c.HeadDim
	pre := fmt.Sprintf("model.layers.%d.", l)
	lw := &oracleLayerW{
		inputNorm: o.param(pre+"input_layernorm.weight", 1, C, b, w.InputNorm),
		q:         o.param(pre+"self_attn.q_proj.weight", HD, C, b, w.Q),
		k:         o.param(pre+"self_attn.k_proj.weight", GD, C, b, w.K),
		v:         o.param(pre+"self_attn.v_proj.weight", GD, C, b, w.V),
		o:         o.param(pre+"self_attn.o_proj.weight", C, HD, b, w.O),
		qNorm:     o.param(pre+"self_attn.q_norm.weight", 1, D, b, w.QNorm),
		kNorm:     o.param(pre+"self_attn.k_norm.weight", 1, D, b, w.KNorm),
		postNorm:  o.param(pre+"post_attention_layernorm.weight", 1, C, b, w.PostNorm),
		gate:      o.param(pre+"mlp.gate_proj.weight", F, C, b, w.Gate),
		up:        o.param(pre+"mlp.up_proj.weight", F, C, b, w.Up),
		down:      o.param(pre+"mlp.down_proj.weight", C, F, b, w.Down),
	}
	o.layerAdapters(m, l, lw)
	return lw
}

// rmsNorm: x (R, n) / sqrt(mean(x²) + eps) ⊙ w (1, n), row by row.
func (o *oracleGraph) rmsNorm(x, w *G.Node) *G.Node {
	R, n := x.Shape()[0], x.Shape()[1]
	ms := o.must(G.Mul(o.must(G.Square(x)), o.fill(n, 1, 1/float64(n)))) // (R, 1)
	// Not G.InverseSqrt: its derivative is wrong in gorgonia v0.9.18.
	rstd := o.must(G.Inverse(o.must(G.Sqrt(o.must(G.Add(ms, o.fill(R, 1, o.cfg.RMSNormEps)))))))
	xhat := o.must(G.HadamardProd(x, o.must(G.Mul(rstd, o.fill(1, n, 1)))))
	return o.must(G.HadamardProd(xhat, o.must(G.Mul(o.fill(R, 1, 1), w))))
}

// linear: x (R, in) · Wᵀ with W (out, in).
func (o *oracleGraph) linear(x, w *G.Node) *G.Node {
	return o.must(G.Mul(x, o.must(G.Transpose(w))))
}

// cols returns columns [a, b) of x.
func (o *oracleGraph) cols(x *G.Node, a, b int) *G.Node {
	return o.must(G.Slice(x, nil, G.S(a, b)))
}

// rope rotates every row of x (N, D) by its position.
func (o *oracleGraph) rope(x *G.Node) *G.Node {
	rot := o.must(G.Mul(x, o.rotHalf))
	return o.must(G.Add(o.must(G.HadamardProd(x, o.cos)), o.must(G.HadamardProd(rot, o.sin))))
}

// attention for one head: q, k, v (N, D); causal within each sequence.
func (o *oracleGraph) attention(q, k, v *G.Node) *G.Node {
	N, D := o.n, o.cfg.HeadDim
	s := o.must(G.Mul(q, o.must(G.Transpose(k)))) // (N, N)
	s = o.must(G.HadamardProd(s, o.fill(N, N, 1/math.Sqrt(float64(D)))))
	e := o.must(G.HadamardProd(o.must(G.Exp(s)), o.mask))
	z := o.must(G.Mul(e, o.fill(N, 1, 1))) // (N, 1) row sums
	p := o.must(G.HadamardProd(e, o.must(G.Mul(o.must(G.Inverse(z)), o.fill(1, N, 1)))))
	return o.must(G.Mul(p, v))
}

// layer is one Qwen3 decoder layer on x (N, C).
func (o *oracleGraph) layer(x *G.Node, w *oracleLayerW) *G.Node {
	c := o.cfg
	H, Gkv, D := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	xn := o.rmsNorm(x, w.inputNorm)
	q, k, v := o.proj(xn, w.q, w, "q"), o.proj(xn, w.k, w, "k"), o.proj(xn, w.v, w, "v") // (N, H·D), (N, G·D), (N, G·D)
	ks, vs := make([]*G.Node, Gkv), make([]*G.Node, Gkv)
	for g := range Gkv {
		ks[g] = o.rope(o.rmsNorm(o.cols(k, g*D, (g+1)*D), w.kNorm))
		vs[g] = o.cols(v, g*D, (g+1)*D)
	}
	heads := make([]*G.Node, H)
	for h := range H {
		qh := o.rope(o.rmsNorm(o.cols(q, h*D, (h+1)*D), w.qNorm))
		g := h / (H / Gkv) // GQA: query head h reads key/value head g
		heads[h] = o.attention(qh, ks[g], vs[g])
	}
	att := o.must(G.Concat(1, heads...)) // (N, H·D)
	xMid := o.must(G.Add(x, o.proj(att, w.o, w, "o")))
	xn2 := o.rmsNorm(xMid, w.postNorm)
	gate, up := o.proj(xn2, w.gate, w, "gate"), o.proj(xn2, w.up, w, "up")
	silu := o.must(G.HadamardProd(gate, o.must(G.Sigmoid(gate))))
	return o.must(G.Add(xMid, o.proj(o.must(G.HadamardProd(silu, up)), w.down, w, "down")))
}

// run differentiates the scalar cost with respect to every leaf, runs the
// graph and returns the values of the nodes in values and the gradients by
// leaf name, as flat float64 slices.
func (o *oracleGraph) run(cost *G.Node, values ...*G.Node) (vals [][]float64, grads map[string][]float64) {
	o.t.Helper()
	gn, err := G.Grad(cost, o.wrt...)
	if err != nil {
		o.t.Fatalf("gorgonia grad: %v", err)
	}
	o.forward(nil)
	flat := func(n *G.Node) []float64 {
		tv, ok := n.Value().(tensor.Tensor)
		if !ok {
			o.t.Fatalf("gorgonia node %v has no tensor value", n)
		}
		return append([]float64(nil), tensor.Materialize(tv).Data().([]float64)...)
	}
	for _, n := range values {
		vals = append(vals, flat(n))
	}
	grads = map[string][]float64{}
	for i, n := range gn {
		grads[o.names[i]] = flat(n)
	}
	return vals, grads
}

// forward runs the whole graph once, on vm if it is not nil (compiling a
// tape machine dominates the cost of these tiny graphs).
func (o *oracleGraph) forward(vm G.VM) {
	o.t.Helper()
	if vm == nil {
		vm = G.NewTapeMachine(o.g)
		defer vm.Close()
	}
	vm.Reset()
	if err := vm.RunAll(); err != nil {
		o.t.Fatalf("gorgonia run: %v", err)
	}
}

// selfCheck compares gorgonia's symbolic gradients (from run) with float64
// central differences of cost, at each leaf's largest-gradient entry and at
// one random entry.
func (o *oracleGraph) selfCheck(cost *G.Node, grads map[string][]float64, rng *rand.Rand) {
	o.t.Helper()
	const h = 1e-5
	vm := G.NewTapeMachine(o.g)
	defer vm.Close()
	for i, leaf := range o.wrt {
		name := o.names[i]
		g := grads[name]
		data := leaf.Value().(tensor.Tensor).Data().([]float64)
		best := 0
		for k := range g {
			if math.Abs(g[k]) > math.Abs(g[best]) {
				best = k
			}
		}
		scale := oracleMaxAbs(g)
		for _, k := range []int{best, rng.IntN(len(g))} {
			orig := data[k]
			data[k] = orig + h
			o.forward(vm)
			jp := cost.Value().Data().(float64)
			data[k] = orig - h
			o.forward(vm)
			jm := cost.Value().Data().(float64)
			data[k] = orig
			fd := (jp - jm) / (2 * h)
			if d := math.Abs(fd - g[k]); d > oracleFDTol.atolFrac*scale+oracleFDTol.rtol*math.Abs(g[k]) {
				o.t.Errorf("oracle self-check %s[%d]: gorgonia gradient %.9g, float64 central difference %.9g (|diff| %.3g, max |grad| %.3g)",
					name, k, g[k], fd, d, scale)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// The tests.

// oraclePack returns the segments and positions of sequences of lens packed
// end to end, as Model.pack lays them out.
func oraclePack(lens []int) ([]Segment, []int32) {
	var segs []Segment
	var pos []int32
	off := 0
	for _, l := range lens {
		segs = append(segs, Segment{Q0: off, QLen: l, K0: off, KLen: l})
		for i := range l {
			pos = append(pos, int32(i))
		}
		off += l
	}
	return segs, pos
}

func TestOracleLayer(t *testing.T) { oracleLayers(t, oracleModel(t, false, 21), []int{6, 4, 3}, 77) }

// oracleLayers checks every decoder layer of m (with its adapters, if it
// has them) on a packed batch of sequences of lens against the oracle:
// the layer's output, ∂J/∂x and ∂J/∂θ for every trainable parameter of
// the layer (its weights, or its adapters), with J = Σ out ⊙ dout for a
// random dout (seeded by the layer and salt).
func oracleLayers(t *testing.T, m *Model, lens []int, salt uint64) {
	b, c := m.B, m.Cfg
	segs, pos := oraclePack(lens)
	n, C := len(pos), c.HiddenSize
	var fwd, grad oracleWorst
	for l := range m.P.Layers {
		rng := rand.New(rand.NewPCG(uint64(l), salt))
		xHost, doutHost := oracleNormal(rng, n*C), oracleNormal(rng, n*C)

		// Ours: forward, then backward from dout (dx is overwritten with ∂J/∂x).
		x, out, dx := b.New(n, C), b.New(n, C), b.New(n, C)
		b.Upload(x, xHost)
		b.Upload(dx, doutHost)
		a := m.newLayerActs(n, true)
		if a.lora != nil {
			a.lora.tmp = m.newLoRATmp(n)
		}
		m.layerForward(l, a, x, out, pos, kvPlan{segs: segs})
		grads := NewLike(b, c, m.Trainable())
		if m.A != nil {
			fg := frozenGrads{C: b.New(C), D: b.New(c.HeadDim)}
			m.layerBackward(l, a, m.newLayerGrads(n), dx, &Pass{pos: pos, segs: segs}, fg.layer(), &grads.Adapters[l])
		} else {
			m.layerBackward(l, a, m.newLayerGrads(n), dx, &Pass{pos: pos, segs: segs}, &grads.Layers[l], nil)
		}
		if err := b.Err(); err != nil {
			t.Fatal(err)
		}
		ours := map[string][]float32{"x": oracleDownload(b, dx)}
		for _, np := range grads.Named(c) {
			ours[np.Name] = oracleDownload(b, *np.Ptr)
		}

		// Oracle: J = Σ out ⊙ dout.
		o := newOracleGraph(t, c, lens)
		w := o.layerParams(m, l)
		xNode := o.leaf("x", n, C, oracleF64(xHost))
		outNode := o.layer(xNode, w)
		cost := o.must(G.Sum(o.must(G.HadamardProd(outNode, o.input(n, C, oracleF64(doutHost))))))
		vals, want := o.run(cost, outNode)

		name := fmt.Sprintf("layer %d", l)
		oracleCheck(t, name+" output", oracleDownload(b, out), vals[0], oracleForwardTol, &fwd)
		checked := 0
		for _, pn := range o.names {
			got, ok := ours[pn]
			if !ok && m.A != nil {
				continue // a frozen weight: no gradient kept
			}
			oracleCheck(t, name+" ∂J/∂"+pn, got, want[pn], oracleGradTol, &grad)
			checked++
		}
		if m.A != nil && checked != 1+2*len(m.A.LoRA.Targets) {
			t.Fatalf("%s: %d gradients checked, want ∂J/∂x and %d adapters'", name, checked, 2*len(m.A.LoRA.Targets))
		}
		o.selfCheck(cost, want, rng)
	}
	t.Logf("forward: %v", &fwd)
	t.Logf("gradients: %v", &grad)
}

func TestOracleModel(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) { oracleModelCase(t, tied) })
	}
}

func oracleModelCase(t *testing.T, tied bool) { oracleModelCheck(t, oracleModel(t, tied, 5)) }

// oracleModelCheck runs m's forward and backward on two packed sequences
// and checks the log-probs, the entropies and the gradient of every
// trainable parameter (the adapters, for a model with them) against the
// oracle.
func oracleModelCheck(t *testing.T, m *Model) {
	b, c := m.B, m.Cfg
	tied := m.P.Tied
	V, C := c.VocabSize, c.HiddenSize
	rng := rand.New(rand.NewPCG(9, 10))
	seqs := []Sequence{
		{Tokens: randomTokens(rng, 7, V), Start: 3},
		{Tokens: randomTokens(rng, 5, V), Start: 1},
	}
	seqs[1].Tokens[3] = seqs[0].Tokens[1] // a repeated token: its embedding row accumulates twice
	var w [][]float32
	for _, s := range seqs {
		w = append(w, oracleNormal(rng, len(s.Tokens)-s.Start))
	}

	// Ours.
	p, err := m.Forward(seqs)
	if err != nil {
		t.Fatal(err)
	}
	grads := NewLike(b, c, m.Trainable())
	if err := m.Backward(p, w, grads); err != nil {
		t.Fatal(err)
	}

	// Oracle. One-hot constants: ids (N, V) for the embedding lookup, sel
	// (M, N) picking the row that predicts each target, tgt (M, V) marking
	// the target and wt (M, V) the target scaled by its weight w_t, so that
	// J = Σ logsoftmax(logits) ⊙ wt.
	var lens []int
	var M, N int
	for _, s := range seqs {
		lens = append(lens, len(s.Tokens))
		N += len(s.Tokens)
		M += len(s.Tokens) - s.Start
	}
	ids := make([]float64, N*V)
	sel, tgt, wt := make([]float64, M*N), make([]float64, M*V), make([]float64, M*V)
	r, off := 0, 0
	for si, s := range seqs {
		for i, id := range s.Tokens {
			ids[(off+i)*V+int(id)] = 1
			if i >= s.Start {
				sel[r*N+off+i-1] = 1
				tgt[r*V+int(id)] = 1
				wt[r*V+int(id)] = float64(w[si][i-s.Start])
				r++
			}
		}
		off += len(s.Tokens)
	}

	o := newOracleGraph(t, c, lens)
	embed := o.param("model.embed_tokens.weight", V, C, b, m.P.Embed)
	x := o.must(G.Mul(o.input(N, V, ids), embed)) // (N, C)
	for l := range m.P.Layers {
		x = o.layer(x, o.layerParams(m, l))
	}
	finalNorm := o.param("model.norm.weight", 1, C, b, m.P.FinalNorm)
	lmHead := embed // tied: the same node, so gorgonia sums both uses' gradients
	if !tied {
		lmHead = o.param("lm_head.weight", V, C, b, m.P.LMHead)
	}
	h := o.must(G.Mul(o.input(M, N, sel), o.rmsNorm(x, finalNorm))) // (M, C)
	logits := o.linear(h, lmHead)                                   // (M, V)
	lse := o.must(G.Log(o.must(G.Mul(o.must(G.Exp(logits)), o.fill(V, 1, 1)))))
	logSoftmax := o.must(G.Sub(logits, o.must(G.Mul(lse, o.fill(1, V, 1))))) // (M, V)
	rowSum := func(x *G.Node) *G.Node { return o.must(G.Mul(x, o.fill(V, 1, 1))) }
	logp := rowSum(o.must(G.HadamardProd(logSoftmax, o.input(M, V, tgt))))                          // (M, 1)
	entropy := o.must(G.Neg(rowSum(o.must(G.HadamardProd(o.must(G.Exp(logSoftmax)), logSoftmax))))) // (M, 1)
	cost := o.must(G.Sum(o.must(G.HadamardProd(logSoftmax, o.input(M, V, wt)))))
	vals, want := o.run(cost, logp, entropy)

	var fwd, grad oracleWorst
	var gotLP, gotEnt []float32
	for i := range p.LogProbs {
		gotLP = append(gotLP, p.LogProbs[i]...)
		gotEnt = append(gotEnt, p.Entropy[i]...)
	}
	oracleCheck(t, "log-probs", gotLP, vals[0], oracleForwardTol, &fwd)
	oracleCheck(t, "entropies", gotEnt, vals[1], oracleForwardTol, &fwd)
	named := grads.Named(c)
	if m.A == nil && len(named) != len(o.names) {
		t.Fatalf("we have %d parameters, the oracle %d", len(named), len(o.names))
	}
	for _, np := range named {
		wg, ok := want[np.Name]
		if !ok {
			t.Fatalf("the oracle has no parameter %s", np.Name)
		}
		oracleCheck(t, "∂J/∂"+np.Name, oracleDownload(b, *np.Ptr), wg, oracleGradTol, &grad)
	}
	o.selfCheck(cost, want, rng)
	t.Logf("forward: %v", &fwd)
	t.Logf("gradients: %v", &grad)
}
