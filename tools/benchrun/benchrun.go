// Package benchrun is `gdrotrain bench`: the CPU benchmark beside a
// PyTorch process (tools/bench), or on CUDA the GPU benchmark beside
// PyTorch + transformers or the step profile with the paper configs'
// pipeline estimate (tools/profile). It sits above both and above the
// configs the estimate resolves; the command is its flags and one call to
// Run, whose errors name those flags.
package benchrun

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/launch"
	"github.com/gdrotrain/gdrotrain/tools/bench"
	cudaprofile "github.com/gdrotrain/gdrotrain/tools/profile"
)

// Options are bench's settings, the flags of `gdrotrain bench`.
type Options struct {
	// CPU is the CPU benchmark's: the Python with torch and the baseline
	// script (--torch-python, --torch-script), --no-torch, --rounds and
	// --threads. The GPU benchmark runs bench_torch_gpu.py beside the
	// script.
	CPU bench.CPUOptions
	// Only measures only the named CPU shape (--only; "": every one).
	Only string
	// Device is the backend (--device, --matmul-precision,
	// --skip-self-test); a GPU's runs the GPU benchmark.
	Device launch.Device
	// Profile counts a training and a decode step instead of timing them
	// (--profile, CUDA).
	Profile bool
	// TorchOnly runs the GPU benchmark's PyTorch baseline alone
	// (--torch-only).
	TorchOnly bool
	// JSON prints the GPU's measurements as JSON (--json).
	JSON bool
	// GPUShape (--gpu-shape), PeakTFLOPs (--peak-tflops) and BandwidthGBs
	// (--bandwidth-gbs) are the GPU benchmark's.
	GPUShape                 string
	PeakTFLOPs, BandwidthGBs float64
	// Stdout gets the measurements, Stderr the device's log.
	Stdout, Stderr io.Writer
}

// Run checks the options and runs the benchmark the device calls for.
// Cancelling ctx (the command's SIGINT, SIGTERM) stops the GPU benchmark
// between rows with what it measured printed (profile.Bench).
func Run(ctx context.Context, o Options) error {
	if o.CPU.NoTorch && o.TorchOnly {
		return fmt.Errorf("--no-torch and --torch-only exclude each other")
	}
	if o.TorchOnly && (o.Device.Name == "cpu" || o.Profile) {
		return fmt.Errorf("--torch-only: the PyTorch baseline alone is for the GPU benchmark (--device cuda, without --profile); the CPU benchmark interleaves both sides")
	}
	if o.Device.Name != "cpu" {
		b, err := o.Device.Open(o.Stderr)
		if err != nil {
			return err
		}
		if cb, ok := b.(*cuda.Backend); ok {
			return o.gpu(ctx, cb)
		}
	}
	var shapes []bench.Shape
	for _, s := range bench.Shapes() {
		if o.Only == "" || o.Only == s.Name {
			shapes = append(shapes, s)
		}
	}
	if len(shapes) == 0 {
		return fmt.Errorf("--only %q matches no shape", o.Only)
	}
	return bench.CompareCPU(o.Stdout, shapes, o.CPU)
}

// gpu runs the step profile (Profile) or the GPU benchmark on b.
func (o Options) gpu(ctx context.Context, b *cuda.Backend) error {
	if !o.Profile {
		return cudaprofile.Bench(ctx, o.Stdout, b, cudaprofile.BenchOptions{Shape: o.GPUShape, Python: o.CPU.Python,
			Script: filepath.Join(filepath.Dir(o.CPU.Script), "bench_torch_gpu.py"), PeakTFLOPs: o.PeakTFLOPs, BandwidthGBs: o.BandwidthGBs,
			JSON: o.JSON, NoTorch: o.CPU.NoTorch, TorchOnly: o.TorchOnly})
	}
	train, err := cudaprofile.WriteTrain(o.Stdout, b, o.JSON)
	if err != nil {
		return err
	}
	decode, err := cudaprofile.WriteDecode(o.Stdout, b, o.JSON)
	if err != nil {
		return err
	}
	// The step time of generation and training, synchronous and
	// overlapped on 8 GPUs, estimated from those counts.
	wls, err := cudaprofile.PaperWorkloads(paperRunSettings)
	if err != nil {
		return err
	}
	return cudaprofile.WritePipeline(o.Stdout, train, decode, wls, o.JSON)
}
