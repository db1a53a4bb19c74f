package profile

// The fused attention alone, timed on the GPU at the training shapes, on
// each route the GPU has (the warpgroup-MMA kernels on sm_90, the mma.sync
// kernels everywhere): the measurement that replaces the step estimate's
// assumed attention rates (cuda.H100) once a GPU has run it.

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
)

// attnShape is a training shape's attention: Batch sequences of SeqLen.
type attnBenchShape struct {
	name                   string
	batch, seqLen, H, G, D int
	iters                  int
}

// attnBenchShapes are Qwen3-1.7B's attention at the step profile's shapes
// (16 query heads over 8 key/value heads of 128), or a small one for the
// emulator's smoke test.
func attnBenchShapes(shape string) []attnBenchShape {
	if shape == "tiny" {
		return []attnBenchShape{{"attn-1x256", 1, 256, 4, 2, 128, 1}}
	}
	return []attnBenchShape{{"attn-8x2k", 8, 2048, 16, 8, 128, 10}, {"attn-2x8k", 2, 8192, 16, 8, 128, 10}}
}

// attnFLOPs is FlashAttention's forward count for a causal shape.
func attnFLOPs(s attnBenchShape) float64 {
	return 2 * float64(s.batch) * float64(s.H) * float64(s.seqLen) * float64(s.seqLen) * float64(s.D)
}

// attentionRow is one attention row to measure: a shape on a route.
type attentionRow struct {
	BenchAttention
	shape attnBenchShape
}

// attentionRows are every shape on every route of device d, with the
// assumed rates, not yet measured.
func attentionRows(d *cuda.Device, shape string) []attentionRow {
	routes := []string{"mma.sync"}
	if d.Info.HasWGMMA() {
		routes = []string{"wgmma", "mma.sync"}
	}
	var out []attentionRow
	for _, s := range attnBenchShapes(shape) {
		for _, route := range routes {
			r := BenchAttention{Name: s.name, Route: route, Batch: s.batch, SeqLen: s.seqLen, Heads: s.H, KVHeads: s.G, HeadDim: s.D}
			fe, be := cuda.H100.FlashEfficiency, cuda.H100.FlashBwdEfficiency
			if route == "wgmma" {
				fe, be = cuda.H100.WGFlashEfficiency, cuda.H100.WGFlashBwdEfficiency
			}
			r.AssumedFwdTFLOPs, r.AssumedBwdTFLOPs = fe*cuda.H100.BF16TFLOPs, be*cuda.H100.BF16TFLOPs/1.4
			out = append(out, attentionRow{r, s})
		}
	}
	return out
}

// measure times the row on device d, or says why it could not.
func (r *attentionRow) measure(d *cuda.Device) {
	fwd, bwd, err := measureAttention(d, r.shape, r.Route == "wgmma")
	if err != nil {
		r.Error = err.Error()
		return
	}
	f := attnFLOPs(r.shape)
	r.FwdSeconds, r.BwdSeconds = fwd, bwd
	r.FwdTFLOPs, r.BwdTFLOPs = f/fwd/1e12, 2.5*f/bwd/1e12
}

// measureAttention times one forward and one backward (mean of s.iters,
// after one untimed pass) on a bf16-product backend, the training route.
func measureAttention(d *cuda.Device, s attnBenchShape, wgmma bool) (fwd, bwd float64, err error) {
	b := cuda.NewBackend(d, cuda.BF16)
	b.ForceAttention(0, 1)
	if wgmma {
		b.ForceWGMMA(0)
	} else {
		b.ForceWGMMA(-1)
	}
	rows := s.batch * s.seqLen
	segs := make([]model.Segment, s.batch)
	for i := range segs {
		segs[i] = model.Segment{Q0: i * s.seqLen, QLen: s.seqLen, K0: i * s.seqLen, KLen: s.seqLen}
	}
	rng := rand.New(rand.NewPCG(7, uint64(rows)))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	var temps []*model.Tensor
	defer func() { b.Release(temps...) }()
	keep := func(t *model.Tensor) *model.Tensor { temps = append(temps, t); return t }
	id := make([]float32, s.D*s.D)
	for i := 0; i < s.D; i++ {
		id[i*s.D+i] = 1
	}
	eye := keep(b.New(s.D, s.D))
	b.Upload(eye, id)
	// act is a bf16 activation of random values, written through a
	// product with the identity (the backend's way to round into one).
	act := func(heads int) *model.Tensor {
		src := keep(b.New(rows*heads, s.D))
		b.Upload(src, random(rows*heads*s.D))
		t := keep(b.ActivationHalf(rows, heads, s.D))
		b.MatMul(t.View(rows*heads, s.D), src, eye, false, false, false)
		return t
	}
	q, k, v := act(s.H), act(s.G), act(s.G)
	out, lse := keep(b.ActivationHalf(rows, s.H, s.D)), keep(b.New(rows, s.H))
	dout := keep(b.New(rows, s.H, s.D))
	b.Upload(dout, random(rows*s.H*s.D))
	dq, dk, dv := keep(b.New(rows, s.H, s.D)), keep(b.New(rows, s.G, s.D)), keep(b.New(rows, s.G, s.D))
	scale := float32(1 / math.Sqrt(float64(s.D)))
	pass := func(backward bool) {
		if backward {
			b.AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse, segs, scale)
		} else {
			b.Attention(out, lse, q, k, v, segs, scale)
		}
	}
	timed := func(backward bool) (float64, error) {
		if err := d.Synchronize(); err != nil {
			return 0, err
		}
		start := time.Now()
		for range s.iters {
			pass(backward)
		}
		if err := d.Synchronize(); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds() / float64(s.iters), b.Err()
	}
	pass(false)
	pass(true)
	if fwd, err = timed(false); err != nil {
		return 0, 0, fmt.Errorf("%s forward: %w", s.name, err)
	}
	if bwd, err = timed(true); err != nil {
		return 0, 0, fmt.Errorf("%s backward: %w", s.name, err)
	}
	return fwd, bwd, nil
}

// writeAttention prints the attention rows of a benchmark table.
func writeAttention(w io.Writer, rows []BenchAttention) {
	fmt.Fprintf(w, "%-12s %-9s %9s %9s %9s %9s %15s\n", "attention", "route", "fwd ms", "fwd TF/s", "bwd ms", "bwd TF/s", "assumed fwd/bwd")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(w, "%-12s %-9s %9s   (%s)\n", r.Name, r.Route, "-", r.Error)
			continue
		}
		fmt.Fprintf(w, "%-12s %-9s %9.3f %9.1f %9.3f %9.1f %7.0f / %-7.0f\n", r.Name, r.Route, 1e3*r.FwdSeconds, r.FwdTFLOPs,
			1e3*r.BwdSeconds, r.BwdTFLOPs, r.AssumedFwdTFLOPs, r.AssumedBwdTFLOPs)
	}
	fmt.Fprintln(w, "attention TF/s: FlashAttention's count (causal forward 2·B·H·S²·D, backward 2.5×); at 2×8k on an H100 "+
		"FA2 reaches 306 / 166, FA3 660 / 474 (deterministic backward); assumed = the step estimate's rates (cuda.H100)")
}
