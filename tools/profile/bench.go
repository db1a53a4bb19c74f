package profile

// The GPU benchmark: training forward+backward tokens/s, step time and MFU
// at 2k and 8k tokens, the fused attention alone (attention.go), and cached decode tokens/s at batch 1, 64 and 256
// with 1k and 4k of context against the memory-bandwidth bound, beside
// PyTorch + transformers (eager, SDPA, bf16) on the same GPU in the same
// run. Both sides are warmed up (one untimed pass) before they are timed.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/optim"
	"github.com/gdrotrain/gdrotrain/tools/bench"
	"github.com/gdrotrain/gdrotrain/tools/benchreport"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Shape        string  // qwen3-1.7b (random weights) or tiny (a smoke test)
	Python       string  // interpreter with torch + transformers ("" skips the baseline)
	Script       string  // scripts/bench_torch_gpu.py
	PeakTFLOPs   float64 // dense bf16 peak; 0: from the GPU's name
	BandwidthGBs float64 // memory bandwidth; 0: from the GPU's name
	JSON         bool    // print the BenchReport as JSON instead of a table
	// NoTorch measures our rows only; TorchOnly runs the PyTorch baseline
	// only (the GPU kit runs it last, if time remains).
	NoTorch, TorchOnly bool
}

// The report's types are tools/benchreport's, which the GPU kit's report
// (no cgo) reads too.
type (
	BenchReport    = benchreport.Report
	BenchWeights   = benchreport.Weights
	BenchTrain     = benchreport.Train
	BenchDecode    = benchreport.Decode
	BenchAttention = benchreport.Attention
)

// Bench measures training and decode throughput on b and prints a table
// (or, with o.JSON, the BenchReport) beside the PyTorch baseline.
//
// Cancelling ctx (`gdrotrain bench`'s SIGINT or SIGTERM: the GPU kit's
// phase limit, its deadline, a pre-empted allocation) stops it between
// rows: it prints the rows measured so far, the report's Interrupted note
// naming the rest, and returns an error wrapping ctx.Err(). The PyTorch
// baseline is killed; a --torch-only report keeps the rows it printed. A
// row in flight gets benchGrace to finish; one still running after that is
// dropped and left running, so the caller must exit rather than use b
// again (the command does).
func Bench(ctx context.Context, w io.Writer, b *cuda.Backend, o BenchOptions) error {
	g := &gpuBench{b: b, BenchOptions: o, ctx: ctx, grace: benchGrace}
	return g.run(w)
}

// benchGrace is how long a row in flight may still finish once the bench is
// cancelled: well under the 5 s between timeout(1)'s TERM and its KILL in
// the GPU kit, which would lose every row (the report is written after).
const benchGrace = 2 * time.Second

type gpuBench struct {
	b *cuda.Backend
	BenchOptions
	weights *bench.Weights
	ctx     context.Context
	grace   time.Duration
	// stopped: a row was not measured, or the baseline was cut, for the
	// cancel; torchCut: the cancel came during the baseline.
	stopped, torchCut bool
	// drawn is weights' counts after the last row that finished (a row
	// dropped in flight may still be drawing).
	drawn BenchWeights
	// recorded, when set (tests), is called with each row's name once it
	// is in the report, and with each line's name the baseline prints.
	recorded func(name string)
}

// gpuSpecs are dense bf16 peaks (TFLOP/s) and memory bandwidths (GB/s) by
// name fragment, from the vendors' data sheets.
var gpuSpecs = []struct {
	match    string
	tflops   float64
	gbs      float64
	verified bool
}{
	{"H200", 989, 4800, true}, {"H100 PCIe", 756, 2000, true}, {"H100", 989, 3350, true},
	{"A100-SXM4-80GB", 312, 2039, true}, {"A100", 312, 1555, true}, {"emulator", 1, 1, false},
}

func (g *gpuBench) specs() {
	for _, s := range gpuSpecs {
		if strings.Contains(g.b.Device().Info.Name, s.match) {
			if g.PeakTFLOPs == 0 {
				g.PeakTFLOPs = s.tflops
			}
			if g.BandwidthGBs == 0 {
				g.BandwidthGBs = s.gbs
			}
			return
		}
	}
}

type gpuTorchResult struct {
	Name      string  `json:"name"`
	TrainTokS float64 `json:"train_tok_s"`
	TokS      float64 `json:"tok_s"`
	Torch     string  `json:"torch"`
	Note      string  `json:"note"`
}

type gpuPlan struct {
	opts   model.RandomOptions
	train  []bench.Shape
	step   []bench.Shape // whole optimizer steps
	decode [][2]int      // batch, context; each with a bf16 and an fp8 KV cache
	steps  int
}

func (g *gpuBench) plan() (gpuPlan, error) {
	switch g.Shape {
	case "qwen3-1.7b":
		step := TrainShapes() // the step profile's: 8 × 2k and 2 × 8k, the paper's row lengths
		for i := range step {
			step[i].Name, step[i].Iters = strings.Replace(step[i].Name, "qwen3-1.7b-", "qwen3-1.7b-step-", 1), 2
		}
		return gpuPlan{opts: bench.Qwen3_1_7B(), train: bench.GPUShapes(bench.Qwen3_1_7B(), g.Shape), step: step,
			decode: [][2]int{{1, 1024}, {64, 1024}, {256, 1024}, {1, 4096}, {64, 4096}, {256, 4096}}, steps: 32}, nil
	case "tiny":
		o := model.DefaultTiny()
		return gpuPlan{opts: o, train: []bench.Shape{{Name: "tiny-256", Opts: o, Batch: 2, SeqLen: 256, Iters: 1, ResponseTokens: 200}},
			step:   []bench.Shape{{Name: "tiny-step-2x256", Opts: o, Batch: 2, SeqLen: 256, Iters: 1, ResponseTokens: 200}},
			decode: [][2]int{{1, 64}, {4, 64}}, steps: 4}, nil
	}
	return gpuPlan{}, fmt.Errorf("--gpu-shape %q: want qwen3-1.7b or tiny", g.Shape)
}

// decodeName is a decode row's name; the bf16 rows keep the names the
// PyTorch baseline answers to.
func decodeName(batch, context int, fp8 bool) string {
	name := fmt.Sprintf("decode-b%d-c%d", batch, context)
	if fp8 {
		name += "-fp8"
	}
	return name
}

// decodeRow is one decode row: its report row and how it is measured.
type decodeRow struct {
	BenchDecode
	fp8, exact, graphs bool
}

// decodeRows are the plan's decode rows in order: eager steps (the bf16 and
// fp8 caches, exact mode), then the sampler's graphed steps, today's and
// exact mode's; the exact and graph rows at the largest batch only.
func (p gpuPlan) decodeRows() []decodeRow {
	var out []decodeRow
	for _, kind := range []string{"bf16", "fp8", "exact", "graph", "graph-exact"} {
		fp8 := kind == "fp8"
		exact, graphs := strings.HasSuffix(kind, "exact"), strings.HasPrefix(kind, "graph")
		for _, d := range p.decode {
			if (exact || graphs) && d[0] != p.decode[len(p.decode)-1][0] {
				continue
			}
			x := BenchDecode{Name: decodeName(d[0], d[1], fp8), Batch: d[0], Context: d[1], KVCache: "bf16", Steps: p.steps}
			if fp8 {
				x.KVCache = "fp8"
			}
			if exact || graphs {
				x.Name += "-" + kind
			}
			out = append(out, decodeRow{x, fp8, exact, graphs})
		}
	}
	return out
}

// plannedRows are the names of the rows a complete run reports as
// measured, in order: ours (training, optimizer steps, attention, decode),
// or with --torch-only those the baseline is asked for.
func (g *gpuBench) plannedRows(p gpuPlan, ours bool) []string {
	var names []string
	if !ours {
		for _, s := range p.train {
			names = append(names, s.Name)
		}
		for _, d := range p.decode {
			names = append(names, decodeName(d[0], d[1], false))
		}
		return names
	}
	for _, s := range append(append([]bench.Shape{}, p.train...), p.step...) {
		names = append(names, s.Name)
	}
	for _, a := range attentionRows(g.b.Device(), g.Shape) {
		names = append(names, a.Name+"/"+a.Route)
	}
	for _, d := range p.decodeRows() {
		names = append(names, d.Name)
	}
	return names
}

// row runs one row's measurement f, unless the bench is cancelled: then it
// runs nothing and returns false. Cancelled while f runs, it waits up to
// g.grace for it; a row still running then is dropped (false) and left
// to finish in its goroutine.
func (g *gpuBench) row(f func()) bool {
	if g.stopped || g.ctx.Err() != nil {
		g.stopped = true
		return false
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-g.ctx.Done():
		select {
		case <-done:
		case <-time.After(g.grace):
			g.stopped = true
			return false
		}
	}
	g.drawn = BenchWeights{Made: g.weights.Made, Rows: g.weights.Served, Seconds: g.weights.Seconds}
	return true
}

// record lists a row in r once it is there.
func (g *gpuBench) record(r *BenchReport, name string) {
	r.Rows = append(r.Rows, name)
	if g.recorded != nil {
		g.recorded(name)
	}
}

// interrupted is the report's note on a cancelled run: why, how many of
// the planned rows were measured, and the names of the others.
func (g *gpuBench) interrupted(planned, measured []string) string {
	why := "cancelled"
	if c := context.Cause(g.ctx); c != nil && c != context.Canceled {
		why = c.Error()
	}
	if g.torchCut {
		why += " during the PyTorch baseline"
	}
	var missing []string
	for _, n := range planned {
		if !slices.Contains(measured, n) {
			missing = append(missing, n)
		}
	}
	note := fmt.Sprintf("%s after %d of %d rows", why, len(planned)-len(missing), len(planned))
	if len(missing) > 0 {
		note += "; not measured: " + strings.Join(missing, ", ")
	}
	return note
}

func (g *gpuBench) run(w io.Writer) error {
	if g.NoTorch && g.TorchOnly {
		return fmt.Errorf("--no-torch and --torch-only exclude each other")
	}
	g.specs()
	p, err := g.plan()
	if err != nil {
		return err
	}
	g.weights = bench.NewWeights(g.b)
	ours := !g.TorchOnly // our rows are measured
	planned := g.plannedRows(p, ours)
	theirs, note := map[string]gpuTorchResult{}, "PyTorch baseline not run (--no-torch)"
	if !g.NoTorch {
		theirs, note = g.torch(p)
	}
	// keep: whether a row of a --torch-only run is in the report; once the
	// baseline is cut, only the rows it printed (the rest are not measured).
	keep := func(name string) bool {
		_, ok := theirs[name]
		return !g.torchCut || ok
	}
	r := BenchReport{GPU: g.b.Device().Info.String(), Matmul: g.b.Name(), Shape: g.Shape, PeakTFLOPs: g.PeakTFLOPs,
		BandwidthGBs: g.BandwidthGBs, Baseline: note}
	if !g.JSON {
		fmt.Fprintf(w, "%s, matmul %s; peak %.0f TFLOP/s, %.0f GB/s\n", r.GPU, r.Matmul, r.PeakTFLOPs, r.BandwidthGBs)
		if !ours {
			fmt.Fprintln(w, "the PyTorch baseline alone (--torch-only): our columns are empty")
		}
		fmt.Fprintf(w, "%-22s %12s %9s %8s %12s %8s\n", "training", "tok/s", "step s", "MFU", "torch tok/s", "×")
	}
	trainRows := append(append([]bench.Shape{}, p.train...), p.step...)
	for i, s := range trainRows {
		step := i >= len(p.train)
		t := BenchTrain{Name: s.Name, Step: step, Batch: s.Batch, SeqLen: s.SeqLen, ResponseTokens: s.ResponseTokens}
		tokens := float64(s.Batch * s.SeqLen)
		mfu := func(tokS float64) float64 { return bench.TrainFLOPs(s) * tokS / tokens / (g.PeakTFLOPs * 1e12) }
		if ours {
			measure := g.measureTrain
			if step {
				measure = g.measureStep
			}
			var res bench.Result
			var err error
			if !g.row(func() { res, err = measure(s) }) {
				break
			}
			if err != nil {
				t.Error = g.failed(err)
			} else {
				t.Params, t.TokPerS, t.StepSeconds, t.MFU = res.Params, res.TrainTokPerS, tokens/res.TrainTokPerS, mfu(res.TrainTokPerS)
			}
		} else if !keep(s.Name) {
			continue
		}
		if th, ok := theirs[s.Name]; ok {
			t.TorchNote = th.Note
			if th.TrainTokS > 0 {
				t.TorchTokPerS, t.TorchStepSecs, t.TorchMFU = th.TrainTokS, tokens/th.TrainTokS, mfu(th.TrainTokS)
				if t.TokPerS > 0 {
					t.Ratio = t.TokPerS / th.TrainTokS
				}
			}
		}
		r.Train = append(r.Train, t)
		g.record(&r, t.Name)
		if !g.JSON {
			if t.Error != "" {
				fmt.Fprintf(w, "%-22s %12s   (%s)\n", t.Name, "-", t.Error)
			} else {
				fmt.Fprintf(w, "%-22s %12s %9s %8s %12s %8s\n", t.Name, num(t.TokPerS, "%.0f"), num(t.StepSeconds, "%.3f"),
					num(100*t.MFU, "%.1f%%"), num(t.TorchTokPerS, "%.0f"), num(t.Ratio, "%.2f"))
			}
		}
	}
	if ours {
		for _, a := range attentionRows(g.b.Device(), g.Shape) {
			if !g.row(func() { a.measure(g.b.Device()) }) {
				break
			}
			r.Attention = append(r.Attention, a.BenchAttention)
			g.record(&r, a.Name+"/"+a.Route)
		}
	}
	if !g.JSON && (!g.stopped || len(r.Attention) > 0) {
		writeAttention(w, r.Attention)
	}
	if !g.JSON && (!g.stopped || !ours) {
		fmt.Fprintf(w, "%-22s %12s %10s %12s %8s\n", "decode", "tok/s", "% bound", "torch tok/s", "×")
	}
	for _, d := range p.decodeRows() {
		x := d.BenchDecode
		if ours {
			var res bench.DecodeResult
			var err error
			if !g.row(func() {
				res, err = bench.MeasureDecode(g.b, p.opts, bench.DecodeOptions{Batch: x.Batch, Context: x.Context, Steps: p.steps,
					FP8: d.fp8, Exact: d.exact, Graphs: d.graphs, Weights: g.weights})
			}) {
				break
			}
			if err != nil {
				x.Error = g.failed(err)
			} else {
				bound := float64(x.Batch) * g.BandwidthGBs * 1e9 / res.StepBytes
				x.TokPerS, x.BoundFraction = res.TokPerS, res.TokPerS/bound
			}
		} else if !keep(x.Name) {
			continue
		}
		if th, ok := theirs[x.Name]; ok {
			x.TorchNote = th.Note
			if th.TokS > 0 {
				x.TorchTokPerS = th.TokS
				if x.TokPerS > 0 {
					x.Ratio = x.TokPerS / th.TokS
				}
			}
		}
		r.Decode = append(r.Decode, x)
		g.record(&r, x.Name)
		if !g.JSON {
			if x.Error != "" {
				fmt.Fprintf(w, "%-22s %12s   (%s)\n", x.Name, "-", x.Error)
			} else {
				fmt.Fprintf(w, "%-22s %12s %10s %12s %8s\n", x.Name, num(x.TokPerS, "%.0f"), num(100*x.BoundFraction, "%.1f%%"),
					num(x.TorchTokPerS, "%.0f"), num(x.Ratio, "%.2f"))
			}
		}
	}
	r.Weights = g.drawn
	var stopped error
	if g.stopped {
		r.Interrupted = g.interrupted(planned, r.Rows)
		stopped = fmt.Errorf("bench stopped (%w): %s", g.ctx.Err(), r.Interrupted)
	}
	if g.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
		return stopped
	}
	fmt.Fprintln(w, "step s = one forward+backward of the shape (no optimizer step; the -step- rows: a whole optimizer step, fused-head "+
		"forward, backward, clipping and AdamW); MFU = model FLOPs (6·params·tokens + attention) / time / peak; "+
		"% bound = tok/s over the bandwidth bound of reading our weights and KV cache once per step")
	fmt.Fprintf(w, "random weights: %d set(s) drawn in %.1f s for %d rows (once per model shape)\n", r.Weights.Made, r.Weights.Seconds, r.Weights.Rows)
	if note != "" {
		fmt.Fprintln(w, note)
	}
	if r.Interrupted != "" {
		fmt.Fprintln(w, "interrupted:", r.Interrupted)
	}
	return stopped
}

// measureTrain times a training shape after one untimed forward+backward
// (allocator growth, cuBLAS heuristics, first-touch), as the PyTorch
// baseline warms up too.
func (g *gpuBench) measureTrain(s bench.Shape) (bench.Result, error) {
	x, err := bench.NewBencherWith(g.b, s, g.weights)
	if err != nil {
		return bench.Result{}, err
	}
	if err := x.Warm(); err != nil {
		return bench.Result{}, err
	}
	return x.Run()
}

// measureStep times s.Iters whole optimizer steps of a shape as the
// trainer runs them (optimizerStep: bf16 weight copies, the fused head,
// clipping, AdamW) after one untimed step. The AdamW state is released
// after, for the rows that follow.
func (g *gpuBench) measureStep(s bench.Shape) (bench.Result, error) {
	cfg, err := s.Opts.Config()
	if err != nil {
		return bench.Result{}, err
	}
	p, err := g.weights.Params(cfg)
	if err != nil {
		return bench.Result{}, err
	}
	m := &model.Model{Cfg: cfg, B: g.b, P: p}
	if _, err := m.ShadowWeights(); err != nil {
		return bench.Result{}, err
	}
	grads := model.NewParams(g.b, cfg)
	opt := optim.NewAdamW(g.b, cfg, optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01})
	defer func() {
		grads, opt = nil, nil
		runtime.GC() // the finalizers give the gradients and moments back
		g.b.Device().ReleaseCache()
	}()
	rng := rand.New(rand.NewPCG(3, 3))
	seqs := make([]model.Sequence, s.Batch)
	for i := range seqs {
		toks := make([]int32, s.SeqLen)
		for j := range toks {
			toks[j] = int32(rng.IntN(cfg.VocabSize))
		}
		seqs[i] = model.Sequence{Tokens: toks, Start: s.SeqLen - s.ResponseTokens}
	}
	if s.Exact { // precision.exact_logprobs: batch-invariant forwards
		defer g.b.SetBatchInvariant(g.b.IsBatchInvariant())
		g.b.SetBatchInvariant(true)
	}
	if err := optimizerStep(m, seqs, grads, opt); err != nil {
		return bench.Result{}, fmt.Errorf("bench %s: %w", s.Name, err)
	}
	iters := max(s.Iters, 1)
	start := time.Now()
	for range iters {
		if err := optimizerStep(m, seqs, grads, opt); err != nil {
			return bench.Result{}, fmt.Errorf("bench %s: %w", s.Name, err)
		}
	}
	if err := g.b.Device().Synchronize(); err != nil {
		return bench.Result{}, err
	}
	secs := time.Since(start).Seconds()
	return bench.Result{Params: cfg.NumParams(), TrainTokPerS: float64(s.Batch*s.SeqLen*iters) / secs}, nil
}

// num formats v, or "-" when there is none.
func num(v float64, format string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// failed frees what a measurement that failed (typically out of memory: 256
// sequences × 4k tokens of KV cache for Qwen3-1.7B is 120 GB in bf16) left
// behind so the next one starts clean, and says why in one line.
func (g *gpuBench) failed(err error) string {
	g.b.ResetErr()
	runtime.GC()
	g.b.Device().ReleaseCache()
	msg := err.Error()
	if isOOMText(msg) {
		msg = "out of memory"
	}
	return lastLines(msg, 1)
}

func isOOMText(s string) bool { return strings.Contains(s, "OUT_OF_MEMORY") }

// torch runs the PyTorch + transformers baseline on the same shapes. Its
// lines are read as they come: cancelled, it is killed and the rows it
// printed are kept (g.torchCut, g.stopped).
func (g *gpuBench) torch(p gpuPlan) (map[string]gpuTorchResult, string) {
	out := map[string]gpuTorchResult{}
	if g.Python == "" {
		return out, "PyTorch baseline skipped (--torch-python empty)"
	}
	if _, err := os.Stat(g.Script); err != nil {
		return out, fmt.Sprintf("PyTorch baseline skipped: %v", err)
	}
	req := map[string]any{"opts": p.opts, "train": p.train, "decode": p.decode, "steps": p.steps}
	in, err := json.Marshal(req)
	if err != nil {
		return out, err.Error()
	}
	if g.ctx.Err() != nil {
		g.torchCut, g.stopped = true, true
		return out, "PyTorch baseline not started (cancelled)"
	}
	note := ""
	c := exec.CommandContext(g.ctx, g.Python, g.Script)
	c.WaitDelay = time.Second // a killed baseline's children may hold its output open
	c.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.Stdout = &lineWriter{line: func(line []byte) {
		var r gpuTorchResult
		if json.Unmarshal(line, &r) != nil {
			return
		}
		out[r.Name] = r
		if r.Torch != "" {
			note = "baseline: " + r.Torch
		}
		if g.recorded != nil {
			g.recorded(r.Name)
		}
	}}
	err = c.Run() // returns once the output is read: out and note are ours again
	if g.ctx.Err() != nil {
		g.torchCut, g.stopped = true, true
		if note == "" {
			note = "PyTorch baseline stopped (cancelled) before its first row"
		}
		return out, note
	}
	if err != nil {
		return out, fmt.Sprintf("PyTorch baseline failed: %v: %s", err, lastLines(stderr.String(), 5))
	}
	return out, note
}

// lineWriter calls line with each whole line written to it; a last line
// without its newline (a process killed mid-write) is never passed on.
type lineWriter struct {
	buf  []byte
	line func([]byte)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.line(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
