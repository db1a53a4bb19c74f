package profile

// The GPU benchmark: training forward+backward tokens/s, step time and MFU
// at 2k and 8k tokens, the fused attention alone (attention.go), and cached decode tokens/s at batch 1, 64 and 256
// with 1k and 4k of context against the memory-bandwidth bound, beside
// PyTorch + transformers (eager, SDPA, bf16) on the same GPU in the same
// run. Both sides are warmed up (one untimed pass) before they are timed.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/bench"
	"github.com/gdrotrain/gdrotrain/model"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Shape        string  // qwen3-1.7b (random weights) or tiny (a smoke test)
	Python       string  // interpreter with torch + transformers ("" skips the baseline)
	Script       string  // scripts/bench_torch_gpu.py
	PeakTFLOPs   float64 // dense bf16 peak; 0: from the GPU's name
	BandwidthGBs float64 // memory bandwidth; 0: from the GPU's name
	JSON         bool    // print the BenchReport as JSON instead of a table
}

// BenchReport is what Bench measured.
type BenchReport struct {
	GPU          string        `json:"gpu"`
	Matmul       string        `json:"matmul"`
	Shape        string        `json:"shape"`
	PeakTFLOPs   float64       `json:"peak_tflops"`
	BandwidthGBs float64       `json:"bandwidth_gbs"`
	Train        []BenchTrain  `json:"train"`
	Decode       []BenchDecode `json:"decode"`
	// Attention is the fused attention alone at the training shapes, on
	// each route the GPU has (attention.go).
	Attention []BenchAttention `json:"attention"`
	Baseline  string           `json:"baseline"` // PyTorch's versions, or why there is no baseline
}

// BenchTrain is one training shape: a forward and backward of Batch
// sequences of SeqLen tokens, log-probabilities over the last
// ResponseTokens (the optimizer step is not included, on either side).
type BenchTrain struct {
	Name           string  `json:"name"`
	Batch          int     `json:"batch"`
	SeqLen         int     `json:"seq_len"`
	ResponseTokens int     `json:"response_tokens"`
	Params         int64   `json:"params"`
	TokPerS        float64 `json:"tok_s"`
	StepSeconds    float64 `json:"step_s"`
	MFU            float64 `json:"mfu"` // model FLOPs / time / peak, 0–1
	TorchTokPerS   float64 `json:"torch_tok_s,omitempty"`
	TorchStepSecs  float64 `json:"torch_step_s,omitempty"`
	TorchMFU       float64 `json:"torch_mfu,omitempty"`
	Ratio          float64 `json:"ratio,omitempty"` // ours / PyTorch's tokens per second
	TorchNote      string  `json:"torch_note,omitempty"`
	Error          string  `json:"error,omitempty"` // why ours has no number (out of memory)
}

// BenchDecode is one decode shape: Batch sequences with Context tokens of
// KV cache, one token each per step.
type BenchDecode struct {
	Name          string  `json:"name"`
	Batch         int     `json:"batch"`
	Context       int     `json:"context"`
	Steps         int     `json:"steps"`
	TokPerS       float64 `json:"tok_s"`
	BoundFraction float64 `json:"bound_fraction"` // of the memory-bandwidth bound, 0–1
	TorchTokPerS  float64 `json:"torch_tok_s,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	TorchNote     string  `json:"torch_note,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// Bench measures training and decode throughput on b and prints a table
// beside the PyTorch baseline.
func Bench(w io.Writer, b *cuda.Backend, o BenchOptions) error {
	g := &gpuBench{b: b, BenchOptions: o}
	return g.run(w)
}

type gpuBench struct {
	b *cuda.Backend
	BenchOptions
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
	decode [][2]int // batch, context
	steps  int
}

func (g *gpuBench) plan() (gpuPlan, error) {
	switch g.Shape {
	case "qwen3-1.7b":
		return gpuPlan{opts: bench.Qwen3_1_7B(), train: bench.GPUShapes(bench.Qwen3_1_7B(), g.Shape),
			decode: [][2]int{{1, 1024}, {64, 1024}, {256, 1024}, {1, 4096}, {64, 4096}, {256, 4096}}, steps: 32}, nil
	case "tiny":
		o := model.DefaultTiny()
		return gpuPlan{opts: o, train: []bench.Shape{{Name: "tiny-256", Opts: o, Batch: 2, SeqLen: 256, Iters: 1, ResponseTokens: 200}},
			decode: [][2]int{{1, 64}, {4, 64}}, steps: 4}, nil
	}
	return gpuPlan{}, fmt.Errorf("--gpu-shape %q: want qwen3-1.7b or tiny", g.Shape)
}

func (g *gpuBench) run(w io.Writer) error {
	g.specs()
	p, err := g.plan()
	if err != nil {
		return err
	}
	theirs, note := g.torch(p)
	r := BenchReport{GPU: g.b.Device().Info.String(), Matmul: g.b.Name(), Shape: g.Shape, PeakTFLOPs: g.PeakTFLOPs,
		BandwidthGBs: g.BandwidthGBs, Baseline: note}
	if !g.JSON {
		fmt.Fprintf(w, "%s, matmul %s; peak %.0f TFLOP/s, %.0f GB/s\n", r.GPU, r.Matmul, r.PeakTFLOPs, r.BandwidthGBs)
		fmt.Fprintf(w, "%-18s %12s %9s %8s %12s %8s\n", "training", "tok/s", "step s", "MFU", "torch tok/s", "×")
	}
	for _, s := range p.train {
		t := BenchTrain{Name: s.Name, Batch: s.Batch, SeqLen: s.SeqLen, ResponseTokens: s.ResponseTokens}
		tokens := float64(s.Batch * s.SeqLen)
		mfu := func(tokS float64) float64 { return bench.TrainFLOPs(s) * tokS / tokens / (g.PeakTFLOPs * 1e12) }
		res, err := g.measureTrain(s)
		if err != nil {
			t.Error = g.failed(err)
		} else {
			t.Params, t.TokPerS, t.StepSeconds, t.MFU = res.Params, res.TrainTokPerS, tokens/res.TrainTokPerS, mfu(res.TrainTokPerS)
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
		if !g.JSON {
			if t.Error != "" {
				fmt.Fprintf(w, "%-18s %12s   (%s)\n", t.Name, "-", t.Error)
			} else {
				fmt.Fprintf(w, "%-18s %12.0f %9.3f %7.1f%% %12s %8s\n", t.Name, t.TokPerS, t.StepSeconds, 100*t.MFU, num(t.TorchTokPerS, "%.0f"), num(t.Ratio, "%.2f"))
			}
		}
	}
	r.Attention = benchAttention(g.b.Device(), g.Shape)
	if !g.JSON {
		writeAttention(w, r.Attention)
		fmt.Fprintf(w, "%-18s %12s %10s %12s %8s\n", "decode", "tok/s", "% bound", "torch tok/s", "×")
	}
	for _, d := range p.decode {
		x := BenchDecode{Name: fmt.Sprintf("decode-b%d-c%d", d[0], d[1]), Batch: d[0], Context: d[1], Steps: p.steps}
		res, err := bench.MeasureDecode(g.b, p.opts, d[0], d[1], p.steps)
		if err != nil {
			x.Error = g.failed(err)
		} else {
			bound := float64(d[0]) * g.BandwidthGBs * 1e9 / res.StepBytes
			x.TokPerS, x.BoundFraction = res.TokPerS, res.TokPerS/bound
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
		if !g.JSON {
			if x.Error != "" {
				fmt.Fprintf(w, "%-18s %12s   (%s)\n", x.Name, "-", x.Error)
			} else {
				fmt.Fprintf(w, "%-18s %12.0f %9.1f%% %12s %8s\n", x.Name, x.TokPerS, 100*x.BoundFraction, num(x.TorchTokPerS, "%.0f"), num(x.Ratio, "%.2f"))
			}
		}
	}
	if g.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintln(w, "step s = one forward+backward of the shape (no optimizer step); MFU = model FLOPs (6·params·tokens + attention) / time / peak; "+
		"% bound = tok/s over the bandwidth bound of reading our weights and KV cache once per step")
	if note != "" {
		fmt.Fprintln(w, note)
	}
	return nil
}

// measureTrain times a training shape after one untimed forward+backward
// (allocator growth, cuBLAS heuristics, first-touch), as the PyTorch
// baseline warms up too.
func (g *gpuBench) measureTrain(s bench.Shape) (bench.Result, error) {
	x, err := bench.NewBencher(g.b, s)
	if err != nil {
		return bench.Result{}, err
	}
	if err := x.Warm(); err != nil {
		return bench.Result{}, err
	}
	return x.Run()
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

// torch runs the PyTorch + transformers baseline on the same shapes.
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
	c := exec.Command(g.Python, g.Script)
	c.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	raw, err := c.Output()
	if err != nil {
		return out, fmt.Sprintf("PyTorch baseline failed: %v: %s", err, lastLines(stderr.String(), 5))
	}
	note := ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r gpuTorchResult
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out[r.Name] = r
			if r.Torch != "" {
				note = "baseline: " + r.Torch
			}
		}
	}
	return out, note
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
