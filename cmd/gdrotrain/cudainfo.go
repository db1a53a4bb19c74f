package main

import (
	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/tools/cudainfo"
)

func newCudaInfoCmd() *cobra.Command {
	var o cudainfo.Options
	cmd := &cobra.Command{
		Use:   "cuda-info [--device cuda:N] [--self-test] [--compile-for sm_90]",
		Short: "Show the GPU, the CUDA libraries found and the kernel cache; or precompile the kernels without a GPU",
		Long: `cuda-info opens the GPU (loading libcuda, NVRTC and cuBLAS, compiling or
loading the kernels) and prints what it found, where each library came from
(GDROTRAIN_CUDA_LIB_DIR, the dynamic linker, a pip wheel of the active Python
environment, a toolkit folder; NCCL too, which only several GPUs need) and
the device's free memory; --json prints the same as one JSON object.
With --compile-for sm_XY (sm_80, sm_90, sm_100, sm_120, …) it needs no GPU:
NVRTC alone compiles every kernel into the kernel cache
(GDROTRAIN_KERNEL_CACHE, default ~/.cache/gdrotrain/kernels), e.g. on a Slurm
login node whose home folder the GPU nodes share. For an architecture that
NVRTC does not know (sm_100 with CUDA 12.5's) it compiles PTX for the newest
one it knows, which the driver compiles for the GPU, as the GPU itself would.
With --self-test it then compares every backend op, one GRPO training step
of a tiny model and a greedy decode with the CPU backend (train, generate and
bench do this first on CUDA unless --skip-self-test) and exits non-zero,
naming the op and the tolerance, if any disagrees.`,
		Example:      "  gdrotrain cuda-info\n  gdrotrain cuda-info --self-test --matmul-precision bf16\n  gdrotrain cuda-info --compile-for sm_90",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Stdout, o.Stderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return cudainfo.Run(o)
		},
	}
	cmd.Flags().StringVar(&o.Device, "device", "cuda", "cuda or cuda:N")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the device and libraries as one JSON object (the GPU kit's record)")
	cmd.Flags().BoolVar(&o.SelfTest, "self-test", false, "run the GPU self-test against the CPU backend (exit 1 if any check fails)")
	cmd.Flags().StringVar(&o.MatMul, "matmul-precision", "bf16", "with --self-test: matrix-product precision to test (bf16, tf32, fp32)")
	cmd.Flags().StringVar(&o.CompileFor, "compile-for", "", "compile the kernels for this architecture (sm_80, sm_90, sm_100, …) with NVRTC only, no GPU")
	return cmd
}
