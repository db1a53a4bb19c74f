package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/model"
)

func init() { register(newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var torchPython, script string
	var only, gpuShape string
	var dev deviceFlags
	var profile, asJSON bool
	var peakTFLOPs, bandwidthGBs float64
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure model forward and forward+backward throughput (beside PyTorch when available)",
		Long: `bench times the training forward and forward+backward of a tiny and a
≈50M-parameter Qwen3 on the CPU backend and, when a Python with torch is
found (--torch-python, default Debian's /usr/bin/python3), the same shapes in
plain PyTorch in the same run, and prints the ratio.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dev.device != "cpu" {
				b, err := openBackend(cmd, dev)
				if err != nil {
					return err
				}
				if cb, ok := b.(*cuda.Backend); ok && profile {
					return cuda.WriteProfiles(cmd.OutOrStdout(), cb, asJSON)
				}
				if cb, ok := b.(*cuda.Backend); ok {
					return cuda.Bench(cmd.OutOrStdout(), cb, cuda.BenchOptions{Shape: gpuShape, Python: torchPython,
						Script: filepath.Join(filepath.Dir(script), "bench_torch_gpu.py"), PeakTFLOPs: peakTFLOPs, BandwidthGBs: bandwidthGBs})
				}
			}
			var shapes []model.BenchShape
			for _, s := range model.BenchShapes() {
				if only == "" || only == s.Name {
					shapes = append(shapes, s)
				}
			}
			if len(shapes) == 0 {
				return fmt.Errorf("--only %q matches no shape", only)
			}
			return runBench(cmd.OutOrStdout(), shapes, torchPython, script)
		},
	}
	cmd.Flags().StringVar(&torchPython, "torch-python", "/usr/bin/python3", "Python interpreter with torch for the baseline (empty: skip)")
	cmd.Flags().StringVar(&script, "torch-script", filepath.Join("scripts", "bench_torch.py"), "PyTorch baseline script")
	cmd.Flags().StringVar(&only, "only", "", "measure only the named shape (tiny, small-50M)")
	addDeviceFlags(cmd, &dev, "bf16")
	cmd.Flags().BoolVar(&profile, "profile", false, "with --device cuda: count one Qwen3-1.7B training step (launches, syncs, allocations, copies, FLOPs by engine) and estimate its H100 time and MFU from the counts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --profile: one JSON object per shape")
	cmd.Flags().StringVar(&gpuShape, "gpu-shape", "qwen3-1.7b", "GPU benchmark model: qwen3-1.7b (random weights) or tiny (a smoke test)")
	cmd.Flags().Float64Var(&peakTFLOPs, "peak-tflops", 0, "dense bf16 peak of the GPU for MFU (default: from the GPU's name)")
	cmd.Flags().Float64Var(&bandwidthGBs, "bandwidth-gbs", 0, "memory bandwidth of the GPU in GB/s for the decode bound (default: from the GPU's name)")
	return cmd
}

type torchResult struct {
	Name       string  `json:"name"`
	FwdTokS    float64 `json:"fwd_tok_s"`
	TrainTokS  float64 `json:"train_tok_s"`
	Torch      string  `json:"torch"`
	NumThreads int     `json:"threads"`
}

func runBench(w io.Writer, shapes []model.BenchShape, py, script string) error {
	fmt.Fprintf(w, "CPU backend, %d cores, float32\n", runtime.GOMAXPROCS(0))
	ours := map[string]model.BenchResult{}
	for _, s := range shapes {
		r, err := model.Measure(model.NewCPU(), s)
		if err != nil {
			return err
		}
		ours[s.Name] = r
	}
	theirs, note := torchBaseline(shapes, py, script)
	fmt.Fprintf(w, "%-10s %8s %7s %12s %12s %12s %12s %8s %8s\n", "shape", "params", "tokens", "fwd tok/s", "torch fwd", "train tok/s", "torch train", "fwd ×", "train ×")
	for _, s := range shapes {
		r := ours[s.Name]
		t, ok := theirs[s.Name]
		tf, tt, rf, rt := "-", "-", "-", "-"
		if ok {
			tf, tt = fmt.Sprintf("%.1f", t.FwdTokS), fmt.Sprintf("%.1f", t.TrainTokS)
			rf, rt = fmt.Sprintf("%.2f", r.FwdTokPerS/t.FwdTokS), fmt.Sprintf("%.2f", r.TrainTokPerS/t.TrainTokS)
		}
		fmt.Fprintf(w, "%-10s %7.1fM %7d %12.1f %12s %12.1f %12s %8s %8s\n", s.Name, float64(r.Params)/1e6, s.Batch*s.SeqLen,
			r.FwdTokPerS, tf, r.TrainTokPerS, tt, rf, rt)
	}
	fmt.Fprintln(w, "ratio × = gdrotrain / PyTorch (higher is better); train = forward + backward")
	if note != "" {
		fmt.Fprintln(w, note)
	}
	return nil
}

// torchBaseline runs the PyTorch script on the same shapes; a missing torch
// is a note, not an error, so `make bench` works everywhere.
func torchBaseline(shapes []model.BenchShape, py, script string) (map[string]torchResult, string) {
	out := map[string]torchResult{}
	if py == "" {
		return out, "PyTorch baseline skipped (--torch-python empty)"
	}
	if _, err := os.Stat(script); err != nil {
		return out, fmt.Sprintf("PyTorch baseline skipped: %v", err)
	}
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		return out, fmt.Sprintf("PyTorch baseline skipped: %s cannot import torch (apt-get install python3-torch)", py)
	}
	in, err := json.Marshal(shapes)
	if err != nil {
		return out, err.Error()
	}
	c := exec.Command(py, script)
	c.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	raw, err := c.Output()
	if err != nil {
		return out, fmt.Sprintf("PyTorch baseline failed: %v: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var version string
	for sc.Scan() {
		var r torchResult
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out[r.Name] = r
			version = fmt.Sprintf("PyTorch %s, %d threads", r.Torch, r.NumThreads)
		}
	}
	return out, version
}
