package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/benchrun"
)

func newBenchCmd() *cobra.Command {
	var o benchrun.Options
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
how many weight sets were drawn). SIGINT or SIGTERM stops it between rows:
it prints the rows measured so far and a note naming the others ("interrupted"
in --json), and exits non-zero.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return benchrun.Run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.CPU.Python, "torch-python", "/usr/bin/python3", "Python interpreter with torch for the baseline (empty: skip; scripts/sid_python.sh: the sid chroot's PyTorch 2.14)")
	cmd.Flags().StringVar(&o.CPU.Script, "torch-script", filepath.Join("scripts", "bench_torch.py"), "PyTorch baseline script")
	cmd.Flags().StringVar(&o.Only, "only", "", "measure only the named shape (tiny, small-50M)")
	cmd.Flags().IntVar(&o.CPU.Rounds, "rounds", 5, "CPU: rounds of measurements, each shape alternating with PyTorch; each side's best round is reported")
	cmd.Flags().IntVar(&o.CPU.Threads, "threads", 0, "CPU: threads for gdrotrain and for PyTorch and its BLAS (0: every core)")
	addDeviceFlags(cmd, &o.Device, "bf16")
	cmd.Flags().BoolVar(&o.Profile, "profile", false, "with --device cuda: count one Qwen3-1.7B training step (launches, syncs, allocations, copies, FLOPs by engine) and one decode step at batch 1, 64, 256 × 1k, 4k context, and estimate their H100 time, MFU and tokens/s from the counts, then the step time of the paper's 1.7B and 8B GRPO configs on 8 GPUs, synchronous and with generation overlapped")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "with --device cuda: the measurements as one JSON object (with --profile: one per shape)")
	cmd.Flags().BoolVar(&o.CPU.NoTorch, "no-torch", false, "measure gdrotrain's rows only, without the PyTorch baseline")
	cmd.Flags().BoolVar(&o.TorchOnly, "torch-only", false, "with --device cuda: run the PyTorch baseline alone (its rows, our columns empty), e.g. after a --no-torch run")
	cmd.Flags().StringVar(&o.GPUShape, "gpu-shape", "qwen3-1.7b", "GPU benchmark model: qwen3-1.7b (random weights) or tiny (a smoke test)")
	cmd.Flags().Float64Var(&o.PeakTFLOPs, "peak-tflops", 0, "dense bf16 peak of the GPU for MFU (default: from the GPU's name)")
	cmd.Flags().Float64Var(&o.BandwidthGBs, "bandwidth-gbs", 0, "memory bandwidth of the GPU in GB/s for the decode bound (default: from the GPU's name)")
	return cmd
}
