package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/tools/bench"
	cudaprofile "github.com/gdrotrain/gdrotrain/tools/profile"
)

func newBenchCmd() *cobra.Command {
	var torchPython, script string
	var only, gpuShape string
	var dev deviceFlags
	var profile, asJSON, noTorch, torchOnly bool
	var peakTFLOPs, bandwidthGBs float64
	var cpuBench bench.CPUOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure model forward and forward+backward throughput (beside PyTorch when available)",
		Long: `bench times the training forward and forward+backward of a tiny and a
≈50M-parameter Qwen3 on the CPU backend and, when a Python with torch is
found (--torch-python, default Debian's /usr/bin/python3; scripts/sid_python.sh
runs the PyTorch 2.14 of the Debian sid chroot that scripts/sid_chroot.sh makes),
the same shapes in plain PyTorch in the same run, and prints the ratio. Both sides run the same
number of threads (--threads), and their measurements alternate shape by
shape for --rounds rounds, so the machine's load weighs on both alike; each
side's best round is compared, and every round's ratios are printed. It prints which BLAS PyTorch calls and its thread
count, and warns when that is not an optimized BLAS.

With --device cuda it measures, at Qwen3-1.7B's shapes with random weights
(drawn once for every row, on every core): training forward+backward
tokens/s, step time and MFU at 4×2k and 1×8k tokens; whole optimizer steps
(the trainer's fused head, backward, clipping, AdamW) at the step profile's
8×2k and 2×8k; the fused attention's TFLOP/s on each route the GPU has
(wgmma and mma.sync on an H100/H200); and decode tokens/s at batch 1, 64,
256 × context 1k, 4k, with a bf16 and an fp8 KV cache. The PyTorch +
transformers baseline runs first, on the same shapes, unless --no-torch;
--torch-only runs it alone (the GPU kit runs it last, if time remains).
--json prints every row (and "rows", their names in order, and "weights",
how many weight sets were drawn).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if noTorch && torchOnly {
				return fmt.Errorf("--no-torch and --torch-only exclude each other")
			}
			if torchOnly && (dev.device == "cpu" || profile) {
				return fmt.Errorf("--torch-only: the PyTorch baseline alone is for the GPU benchmark (--device cuda, without --profile); the CPU benchmark interleaves both sides")
			}
			cpuBench.Python, cpuBench.Script, cpuBench.NoTorch = torchPython, script, noTorch
			if dev.device != "cpu" {
				b, err := openBackend(cmd, dev)
				if err != nil {
					return err
				}
				if cb, ok := b.(*cuda.Backend); ok && profile {
					train, err := cudaprofile.WriteTrain(cmd.OutOrStdout(), cb, asJSON)
					if err != nil {
						return err
					}
					decode, err := cudaprofile.WriteDecode(cmd.OutOrStdout(), cb, asJSON)
					if err != nil {
						return err
					}
					// The step time of generation and training, synchronous
					// and overlapped on 8 GPUs, estimated from those counts.
					wls, err := cudaprofile.PaperWorkloads(paperRunSettings)
					if err != nil {
						return err
					}
					return cudaprofile.WritePipeline(cmd.OutOrStdout(), train, decode, wls, asJSON)
				}
				if cb, ok := b.(*cuda.Backend); ok {
					return cudaprofile.Bench(cmd.OutOrStdout(), cb, cudaprofile.BenchOptions{Shape: gpuShape, Python: torchPython,
						Script: filepath.Join(filepath.Dir(script), "bench_torch_gpu.py"), PeakTFLOPs: peakTFLOPs, BandwidthGBs: bandwidthGBs,
						JSON: asJSON, NoTorch: noTorch, TorchOnly: torchOnly})
				}
			}
			var shapes []bench.Shape
			for _, s := range bench.Shapes() {
				if only == "" || only == s.Name {
					shapes = append(shapes, s)
				}
			}
			if len(shapes) == 0 {
				return fmt.Errorf("--only %q matches no shape", only)
			}
			return bench.CompareCPU(cmd.OutOrStdout(), shapes, cpuBench)
		},
	}
	cmd.Flags().StringVar(&torchPython, "torch-python", "/usr/bin/python3", "Python interpreter with torch for the baseline (empty: skip; scripts/sid_python.sh: the sid chroot's PyTorch 2.14)")
	cmd.Flags().StringVar(&script, "torch-script", filepath.Join("scripts", "bench_torch.py"), "PyTorch baseline script")
	cmd.Flags().StringVar(&only, "only", "", "measure only the named shape (tiny, small-50M)")
	cmd.Flags().IntVar(&cpuBench.Rounds, "rounds", 5, "CPU: rounds of measurements, each shape alternating with PyTorch; each side's best round is reported")
	cmd.Flags().IntVar(&cpuBench.Threads, "threads", 0, "CPU: threads for gdrotrain and for PyTorch and its BLAS (0: every core)")
	addDeviceFlags(cmd, &dev, "bf16")
	cmd.Flags().BoolVar(&profile, "profile", false, "with --device cuda: count one Qwen3-1.7B training step (launches, syncs, allocations, copies, FLOPs by engine) and one decode step at batch 1, 64, 256 × 1k, 4k context, and estimate their H100 time, MFU and tokens/s from the counts, then the step time of the paper's 1.7B and 8B GRPO configs on 8 GPUs, synchronous and with generation overlapped")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --device cuda: the measurements as one JSON object (with --profile: one per shape)")
	cmd.Flags().BoolVar(&noTorch, "no-torch", false, "measure gdrotrain's rows only, without the PyTorch baseline")
	cmd.Flags().BoolVar(&torchOnly, "torch-only", false, "with --device cuda: run the PyTorch baseline alone (its rows, our columns empty), e.g. after a --no-torch run")
	cmd.Flags().StringVar(&gpuShape, "gpu-shape", "qwen3-1.7b", "GPU benchmark model: qwen3-1.7b (random weights) or tiny (a smoke test)")
	cmd.Flags().Float64Var(&peakTFLOPs, "peak-tflops", 0, "dense bf16 peak of the GPU for MFU (default: from the GPU's name)")
	cmd.Flags().Float64Var(&bandwidthGBs, "bandwidth-gbs", 0, "memory bandwidth of the GPU in GB/s for the decode bound (default: from the GPU's name)")
	return cmd
}
