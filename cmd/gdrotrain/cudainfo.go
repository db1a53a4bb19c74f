package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/tools/gpukit"
)

func newCudaInfoCmd() *cobra.Command {
	var deviceName, arch, matmul string
	var selfTest, asJSON bool
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
			out := cmd.OutOrStdout()
			logf := func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", a...) }
			if arch != "" {
				major, minor, err := cuda.ParseArch(arch)
				if err != nil {
					return fmt.Errorf("--compile-for %w", err)
				}
				p, err := cuda.Precompile(major, minor, logf)
				if err != nil {
					return fmt.Errorf("--compile-for %s: %w", arch, err)
				}
				fmt.Fprintf(out, "compiled %d kernel files for %s as %s with NVRTC %s into %s\n", p.Files, arch, p.Target, p.NVRTCVersion, p.Dir)
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
			info := newCudaInfoReport(d.Info, free, total)
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(info); err != nil {
					return err
				}
			} else {
				writeCudaInfo(out, info)
			}
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the device and libraries as one JSON object (the GPU kit's record)")
	cmd.Flags().BoolVar(&selfTest, "self-test", false, "run the GPU self-test against the CPU backend (exit 1 if any check fails)")
	cmd.Flags().StringVar(&matmul, "matmul-precision", "bf16", "with --self-test: matrix-product precision to test (bf16, tf32, fp32)")
	cmd.Flags().StringVar(&arch, "compile-for", "", "compile the kernels for this architecture (sm_80, sm_90, sm_100, …) with NVRTC only, no GPU")
	return cmd
}

// newCudaInfoReport is what cuda-info prints, and with --json its fields
// (the GPU kit reads them: gpukit.CudaInfo).
func newCudaInfoReport(i cuda.Info, free, total int64) gpukit.CudaInfo {
	driver := fmt.Sprintf("%d.%d", i.DriverVersion/1000, i.DriverVersion%1000/10)
	r := gpukit.CudaInfo{GPU: i.Name, Ordinal: i.Ordinal, Arch: fmt.Sprintf("sm_%d%d", i.Major, i.Minor), SMs: i.SMs,
		Devices: i.Devices, TotalGiB: float64(total) / (1 << 30), FreeGiB: float64(free) / (1 << 30),
		Emulator: strings.Contains(i.Name, "emulator"), Driver: driver, KernelCache: i.KernelsDir,
		Libraries: []gpukit.Library{
			{Name: "driver", Version: driver, Path: i.CudaLib, From: i.CudaFrom},
			{Name: "NVRTC", Version: i.NVRTCVersion, Path: i.NVRTCLib, From: i.NVRTCFrom},
			{Name: "cuBLAS", Version: fmt.Sprint(i.CublasVersion), Path: i.CublasLib, From: i.CublasFrom},
		}}
	nccl := gpukit.Library{Name: "NCCL"}
	if path, from, v, err := cuda.NCCLInfo(); err != nil {
		nccl.Error = err.Error()
	} else {
		nccl.Path, nccl.From = path, from
		nccl.Version = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	r.Libraries = append(r.Libraries, nccl)
	return r
}

// writeCudaInfo prints r as cuda-info's text.
func writeCudaInfo(w io.Writer, r gpukit.CudaInfo) {
	fmt.Fprintf(w, "GPU %d: %s (%s, %d SMs; %d visible)\n", r.Ordinal, r.GPU, r.Arch, r.SMs, r.Devices)
	fmt.Fprintf(w, "memory: %.2f GiB free of %.2f GiB\n", r.FreeGiB, r.TotalGiB)
	for _, l := range r.Libraries {
		if l.Error != "" {
			fmt.Fprintf(w, "%s: not loaded (only training on several GPUs needs it): %s\n", l.Name, l.Error)
			continue
		}
		fmt.Fprintf(w, "%s: %s (%s)\n    from %s\n", l.Name, l.Version, l.Path, l.From)
	}
	fmt.Fprintf(w, "kernel cache: %s\n", r.KernelCache)
}
