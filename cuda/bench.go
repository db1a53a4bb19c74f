package cuda

// The GPU benchmark: training forward+backward tokens/s and MFU at 2k and
// 8k tokens, and cached decode tokens/s at batch 1, 64 and 256 with 1k and
// 4k of context against the memory-bandwidth bound, beside PyTorch +
// transformers (eager, SDPA, bf16) on the same GPU in the same run.

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

	"github.com/gdrotrain/gdrotrain/model"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Shape        string  // qwen3-1.7b (random weights) or tiny (a smoke test)
	Python       string  // interpreter with torch + transformers ("" skips the baseline)
	Script       string  // scripts/bench_torch_gpu.py
	PeakTFLOPs   float64 // dense bf16 peak; 0: from the GPU's name
	BandwidthGBs float64 // memory bandwidth; 0: from the GPU's name
}

// Bench measures training and decode throughput on b and prints a table
// beside the PyTorch baseline.
func Bench(w io.Writer, b *Backend, o BenchOptions) error {
	g := &gpuBench{b: b, BenchOptions: o}
	return g.run(w)
}

type gpuBench struct {
	b *Backend
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
	opts   model.TinyOptions
	train  []model.BenchShape
	decode [][2]int // batch, context
	steps  int
}

func (g *gpuBench) plan() (gpuPlan, error) {
	switch g.Shape {
	case "qwen3-1.7b":
		return gpuPlan{opts: model.Qwen3_1_7B(), train: model.GPUBenchShapes(model.Qwen3_1_7B(), g.Shape),
			decode: [][2]int{{1, 1024}, {64, 1024}, {256, 1024}, {1, 4096}, {64, 4096}, {256, 4096}}, steps: 32}, nil
	case "tiny":
		o := model.DefaultTiny()
		return gpuPlan{opts: o, train: []model.BenchShape{{Name: "tiny-256", Opts: o, Batch: 2, SeqLen: 256, Iters: 1, ResponseTokens: 200}},
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
	fmt.Fprintf(w, "%s, matmul %s; peak %.0f TFLOP/s, %.0f GB/s\n", g.b.Device().Info, g.b.Name(), g.PeakTFLOPs, g.BandwidthGBs)
	fmt.Fprintf(w, "%-18s %12s %8s %12s %8s\n", "training", "tok/s", "MFU", "torch tok/s", "×")
	for _, s := range p.train {
		r, err := model.Measure(g.b, s)
		if err != nil {
			g.skip(w, s.Name, err)
			continue
		}
		mfu := model.TrainFLOPs(s) * r.TrainTokPerS / float64(s.Batch*s.SeqLen) / (g.PeakTFLOPs * 1e12)
		tt, ratio := "-", "-"
		if t, ok := theirs[s.Name]; ok && t.TrainTokS > 0 {
			tt, ratio = fmt.Sprintf("%.0f", t.TrainTokS), fmt.Sprintf("%.2f", r.TrainTokPerS/t.TrainTokS)
		}
		fmt.Fprintf(w, "%-18s %12.0f %7.1f%% %12s %8s\n", s.Name, r.TrainTokPerS, 100*mfu, tt, ratio)
	}
	fmt.Fprintf(w, "%-18s %12s %10s %12s %8s\n", "decode", "tok/s", "% bound", "torch tok/s", "×")
	for _, d := range p.decode {
		name := fmt.Sprintf("decode-b%d-c%d", d[0], d[1])
		r, err := model.MeasureDecode(g.b, p.opts, d[0], d[1], p.steps)
		if err != nil {
			g.skip(w, name, err)
			continue
		}
		bound := float64(d[0]) * g.BandwidthGBs * 1e9 / r.StepBytes
		tt, ratio := "-", "-"
		if t, ok := theirs[name]; ok && t.TokS > 0 {
			tt, ratio = fmt.Sprintf("%.0f", t.TokS), fmt.Sprintf("%.2f", r.TokPerS/t.TokS)
		}
		fmt.Fprintf(w, "%-18s %12.0f %9.1f%% %12s %8s\n", name, r.TokPerS, 100*r.TokPerS/bound, tt, ratio)
	}
	fmt.Fprintln(w, "MFU = model FLOPs (6·params·tokens + attention) / time / peak; % bound = tok/s over the bandwidth bound of reading our fp32 weights and KV cache once per step")
	if note != "" {
		fmt.Fprintln(w, note)
	}
	return nil
}

// skip reports a measurement that failed (typically out of memory: 256
// sequences × 4k tokens of fp32 KV cache for Qwen3-1.7B is 240 GB) and
// frees what it left behind so the next one starts clean.
func (g *gpuBench) skip(w io.Writer, name string, err error) {
	g.b.ResetErr()
	runtime.GC()
	g.b.Device().alloc.release()
	msg := err.Error()
	if isOOMText(msg) {
		msg = "out of memory"
	}
	fmt.Fprintf(w, "%-18s %12s   (%s)\n", name, "-", lastLines(msg, 1))
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
