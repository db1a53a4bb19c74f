package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/device"
)

func newCudaInfoCmd() *cobra.Command {
	var deviceName, arch, matmul string
	var selfTest bool
	cmd := &cobra.Command{
		Use:   "cuda-info [--device cuda:N] [--self-test] [--compile-for sm_90]",
		Short: "Show the GPU, the CUDA libraries found and the kernel cache; or precompile the kernels without a GPU",
		Long: `cuda-info opens the GPU (loading libcuda, NVRTC and cuBLAS, compiling or
loading the kernels) and prints what it found and the device's free memory.
With --compile-for sm_XY it needs no GPU: NVRTC alone compiles every kernel
into the kernel cache (GDROTRAIN_KERNEL_CACHE, default ~/.cache/gdrotrain/kernels),
e.g. on a Slurm login node whose home folder the GPU nodes share.
With --self-test it then compares every backend op, one GRPO training step
of a tiny model and a greedy decode with the CPU backend (train, generate and
bench do this first on CUDA unless --skip-self-test) and exits non-zero,
naming the op and the tolerance, if any disagrees.`,
		Example:      "  gdrotrain cuda-info\n  gdrotrain cuda-info --self-test --matmul-precision bf16\n  gdrotrain cuda-info --compile-for sm_90",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			logf := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			if arch != "" {
				var major, minor int
				if n, err := fmt.Sscanf(arch, "sm_%1d%1d", &major, &minor); n != 2 || err != nil {
					return fmt.Errorf("--compile-for %q: want sm_XY, e.g. sm_90", arch)
				}
				version, dir, files, err := cuda.Precompile(major, minor, logf)
				if err != nil {
					return fmt.Errorf("--compile-for: %w", err)
				}
				fmt.Fprintf(out, "compiled %d kernel files for %s with NVRTC %s into %s\n", files, arch, version, dir)
				return nil
			}
			kind, gpu, err := device.Parse(deviceName)
			if err != nil || kind != device.CUDA {
				return fmt.Errorf("--device %q: want cuda or cuda:N", deviceName)
			}
			d, err := cuda.Open(gpu, logf)
			if err != nil {
				return err
			}
			free, total, err := d.MemInfo()
			if err != nil {
				return err
			}
			i := d.Info
			fmt.Fprintf(out, "GPU %d: %s (sm_%d%d, %d SMs)\n", i.Ordinal, i.Name, i.Major, i.Minor, i.SMs)
			fmt.Fprintf(out, "memory: %.2f GiB free of %.2f GiB\n", float64(free)/(1<<30), float64(total)/(1<<30))
			fmt.Fprintf(out, "driver: %d.%d (%s)\n", i.DriverVersion/1000, i.DriverVersion%1000/10, i.CudaLib)
			fmt.Fprintf(out, "NVRTC: %s (%s)\n", i.NVRTCVersion, i.NVRTCLib)
			fmt.Fprintf(out, "cuBLAS: %d (%s)\n", i.CublasVersion, i.CublasLib)
			fmt.Fprintf(out, "kernel cache: %s\n", i.KernelsDir)
			if !selfTest {
				return nil
			}
			prec, err := cuda.ParsePrecision(matmul)
			if err != nil {
				return fmt.Errorf("--matmul-precision: %w", err)
			}
			r, err := selftest.Run(d, prec, logf)
			if err != nil {
				return err
			}
			fmt.Fprintln(out, r.Summary())
			return nil
		},
	}
	cmd.Flags().StringVar(&deviceName, "device", "cuda", "cuda or cuda:N")
	cmd.Flags().BoolVar(&selfTest, "self-test", false, "run the GPU self-test against the CPU backend (exit 1 if any check fails)")
	cmd.Flags().StringVar(&matmul, "matmul-precision", "bf16", "with --self-test: matrix-product precision to test (bf16, tf32, fp32)")
	cmd.Flags().StringVar(&arch, "compile-for", "", "compile the kernels for this architecture (sm_80, sm_90, …) with NVRTC only, no GPU")
	return cmd
}
