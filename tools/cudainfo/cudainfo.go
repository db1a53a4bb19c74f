// Package cudainfo is `gdrotrain cuda-info`: what the GPU and the CUDA
// libraries found are, as text or as the GPU kit's JSON record
// (gpukit.CudaInfo), the GPU self-test on demand, or the kernels compiled
// for an architecture without a GPU. The command is its flags and one call
// to Run, whose errors name those flags.
package cudainfo

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/cuda/selftest"
	"github.com/gdrotrain/gdrotrain/device"
	"github.com/gdrotrain/gdrotrain/tools/gpukit"
)

// Options are cuda-info's settings, the flags of `gdrotrain cuda-info`.
type Options struct {
	// Device is the GPU: cuda or cuda:N (--device).
	Device string
	// CompileFor compiles every kernel for this architecture (sm_80,
	// sm_90, sm_100, …) with NVRTC alone, no GPU, instead (--compile-for).
	CompileFor string
	// SelfTest runs the GPU self-test after the report (--self-test), its
	// matrix products in MatMul precision (--matmul-precision).
	SelfTest bool
	MatMul   string
	// JSON prints the report as one JSON object (--json).
	JSON bool
	// Stdout gets the report, Stderr the libraries' log.
	Stdout, Stderr io.Writer
}

// Run prints the GPU's report (and runs the self-test), or precompiles the
// kernels for CompileFor.
func Run(o Options) error {
	logf := func(format string, a ...any) { fmt.Fprintf(o.Stderr, format+"\n", a...) }
	if o.CompileFor != "" {
		return precompile(o.Stdout, o.CompileFor, logf)
	}
	kind, gpu, err := device.Parse(o.Device)
	if err != nil || kind != device.CUDA {
		return fmt.Errorf("--device %q: want cuda or cuda:N", o.Device)
	}
	d, err := cuda.Open(gpu, logf)
	if err != nil {
		return err
	}
	free, total, err := d.MemInfo()
	if err != nil {
		return err
	}
	info := report(d.Info, free, total)
	if o.JSON {
		enc := json.NewEncoder(o.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			return err
		}
	} else {
		write(o.Stdout, info)
	}
	if !o.SelfTest {
		return nil
	}
	prec, err := cuda.ParsePrecision(o.MatMul)
	if err != nil {
		return fmt.Errorf("--matmul-precision: %w", err)
	}
	r, err := selftest.Run(d, prec, logf)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Stdout, r.Summary())
	return nil
}

// precompile compiles every kernel for arch into the kernel cache.
func precompile(w io.Writer, arch string, logf func(string, ...any)) error {
	major, minor, err := cuda.ParseArch(arch)
	if err != nil {
		return fmt.Errorf("--compile-for %w", err)
	}
	p, err := cuda.Precompile(major, minor, logf)
	if err != nil {
		return fmt.Errorf("--compile-for %s: %w", arch, err)
	}
	fmt.Fprintf(w, "compiled %d kernel files for %s as %s with NVRTC %s into %s\n", p.Files, arch, p.Target, p.NVRTCVersion, p.Dir)
	return nil
}

// report is what cuda-info prints, and with --json its fields
// (the GPU kit reads them: gpukit.CudaInfo).
func report(i cuda.Info, free, total int64) gpukit.CudaInfo {
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

// write prints r as cuda-info's text.
func write(w io.Writer, r gpukit.CudaInfo) {
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
