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
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/cuda"
	cudaprofile "github.com/gdrotrain/gdrotrain/cuda/profile"
	"github.com/gdrotrain/gdrotrain/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var torchPython, script string
	var only, gpuShape string
	var dev deviceFlags
	var profile, asJSON, noTorch, torchOnly bool
	var peakTFLOPs, bandwidthGBs float64
	var cpuBench cpuBenchOptions
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
			cpuBench.python, cpuBench.script, cpuBench.noTorch = torchPython, script, noTorch
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
			return runBench(cmd.OutOrStdout(), shapes, cpuBench)
		},
	}
	cmd.Flags().StringVar(&torchPython, "torch-python", "/usr/bin/python3", "Python interpreter with torch for the baseline (empty: skip; scripts/sid_python.sh: the sid chroot's PyTorch 2.14)")
	cmd.Flags().StringVar(&script, "torch-script", filepath.Join("scripts", "bench_torch.py"), "PyTorch baseline script")
	cmd.Flags().StringVar(&only, "only", "", "measure only the named shape (tiny, small-50M)")
	cmd.Flags().IntVar(&cpuBench.rounds, "rounds", 5, "CPU: rounds of measurements, each shape alternating with PyTorch; each side's best round is reported")
	cmd.Flags().IntVar(&cpuBench.threads, "threads", 0, "CPU: threads for gdrotrain and for PyTorch and its BLAS (0: every core)")
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

// cpuBenchOptions are the flags of the CPU benchmark.
type cpuBenchOptions struct {
	python, script string
	noTorch        bool // --no-torch: no baseline
	rounds         int  // interleaved rounds; medians are reported
	threads        int  // on both sides (0: every core)
}

// torchInfo is the first line the PyTorch script prints: which BLAS its
// process really calls and with how many threads.
type torchInfo struct {
	Torch       string `json:"torch"`
	Threads     int    `json:"threads"`
	Parallel    string `json:"parallel"`
	BuildBLAS   string `json:"build_blas"`
	BLAS        string `json:"blas"`
	BLASKind    string `json:"blas_kind"`
	BLASConfig  string `json:"blas_config"`
	BLASThreads int    `json:"blas_threads"`
	BLASCore    string `json:"blas_core"`
}

type torchResult struct {
	Name      string  `json:"name"`
	FwdTokS   float64 `json:"fwd_tok_s"`
	TrainTokS float64 `json:"train_tok_s"`
}

// baseline is one PyTorch process the benchmark compares with.
type baseline struct {
	label   string // which kernels: "default kernels", "OPENBLAS_CORETYPE=SkylakeX"
	torch   *torchProc
	results [][]torchResult // per shape, per round
}

// runBench times every shape on the CPU backend and, when PyTorch is found,
// in PyTorch on the same number of threads (with its default kernels, and
// with gdrotrain's OpenBLAS core where that differs), interleaved shape by
// shape for o.rounds rounds (the machine's load then weighs on every side
// alike), and prints each side's best round and their ratio, then every
// round's ratios.
func runBench(w io.Writer, shapes []bench.Shape, o cpuBenchOptions) error {
	threads := o.threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	rounds := max(o.rounds, 1)
	b := cpu.NewBackendWith(cpu.Options{Workers: threads})
	fmt.Fprintf(w, "gdrotrain: CPU backend, %d threads, float32; matrix products: %s\n", b.Workers(), b.MatMulLibrary())
	var bases []*baseline
	var notes []string
	py := o.python
	if o.noTorch {
		py = ""
	}
	torch, note := startTorch(shapes, py, o.script, threads, "")
	if o.noTorch {
		note = "PyTorch baseline not run (--no-torch)"
	}
	if torch != nil {
		bases = append(bases, &baseline{label: "PyTorch's default kernels", torch: torch})
		printTorchInfo(w, o.python, "", torch.info)
		if i := torch.info; i.BLASKind != "OpenBLAS" && i.BLASKind != "MKL" {
			fmt.Fprintln(w, "WARNING: PyTorch's matrix products do not use an optimized BLAS, so the ratios flatter gdrotrain; "+
				"install OpenBLAS for the baseline (apt-get install libopenblas0-pthread; `make bench` does)")
		}
		same, n := sameCoreBaseline(shapes, o, threads, b.BLASCore(), torch.info)
		if same != nil {
			bases = append(bases, same)
			printTorchInfo(w, o.python, " with "+cblasCoreEnv+"="+b.BLASCore(), same.torch.info)
		}
		notes = append(notes, n)
	} else {
		notes = append(notes, note)
	}
	defer func() {
		for _, x := range bases {
			if x.torch != nil {
				x.torch.close()
			}
		}
	}()
	benchers := make([]*bench.Bencher, len(shapes))
	for i, s := range shapes {
		x, err := bench.NewBencher(b, s)
		if err != nil {
			return err
		}
		if err := x.Warm(); err != nil {
			return err
		}
		benchers[i] = x
	}
	ours := make([][]bench.Result, len(shapes))
	for _, x := range bases {
		x.results = make([][]torchResult, len(shapes))
	}
	for r := 0; r < rounds; r++ {
		for i, s := range shapes {
			res, err := benchers[i].Run()
			if err != nil {
				return err
			}
			ours[i] = append(ours[i], res)
			for _, x := range bases {
				if x.torch == nil {
					continue
				}
				t, err := x.torch.measure(s.Name)
				if err != nil {
					notes = append(notes, fmt.Sprintf("PyTorch baseline (%s) failed: %v", x.label, err))
					x.torch.close()
					x.torch = nil
					continue
				}
				x.results[i] = append(x.results[i], t)
			}
		}
	}
	if len(bases) == 0 {
		bases = append(bases, &baseline{results: make([][]torchResult, len(shapes))})
	}
	var spread []string
	for k, x := range bases {
		if len(bases) > 1 {
			fmt.Fprintf(w, "against %s:\n", x.label)
		}
		if k == 0 || len(bases) > 1 {
			fmt.Fprintf(w, "%-10s %8s %7s %12s %12s %12s %12s %8s %8s\n", "shape", "params", "tokens", "fwd tok/s", "torch fwd", "train tok/s", "torch train", "fwd ×", "train ×")
		}
		for i, s := range shapes {
			of := best(ours[i], func(r bench.Result) float64 { return r.FwdTokPerS })
			ot := best(ours[i], func(r bench.Result) float64 { return r.TrainTokPerS })
			tf, tt, rf, rt := "-", "-", "-", "-"
			if theirs := x.results[i]; len(theirs) == rounds {
				f := best(theirs, func(r torchResult) float64 { return r.FwdTokS })
				t := best(theirs, func(r torchResult) float64 { return r.TrainTokS })
				tf, tt = fmt.Sprintf("%.1f", f), fmt.Sprintf("%.1f", t)
				rf, rt = fmt.Sprintf("%.2f", of/f), fmt.Sprintf("%.2f", ot/t)
				line := fmt.Sprintf("%s per round: fwd ×", s.Name)
				if len(bases) > 1 {
					line = fmt.Sprintf("%s per round against %s: fwd ×", s.Name, x.label)
				}
				for r := range theirs {
					line += fmt.Sprintf(" %.2f", ours[i][r].FwdTokPerS/theirs[r].FwdTokS)
				}
				line += ", train ×"
				for r := range theirs {
					line += fmt.Sprintf(" %.2f", ours[i][r].TrainTokPerS/theirs[r].TrainTokS)
				}
				spread = append(spread, line)
			}
			fmt.Fprintf(w, "%-10s %7.1fM %7d %12.1f %12s %12.1f %12s %8s %8s\n", s.Name, float64(ours[i][0].Params)/1e6, s.Batch*s.SeqLen,
				of, tf, ot, tt, rf, rt)
		}
	}
	fmt.Fprintf(w, "best of %d interleaved rounds for each side; ratio × = gdrotrain / PyTorch (higher is better); train = forward + backward\n", rounds)
	for _, l := range spread {
		fmt.Fprintln(w, l)
	}
	for _, n := range notes {
		if n != "" {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// printTorchInfo prints which BLAS a PyTorch process calls, its kernels and
// threads; with says what its environment adds (" with OPENBLAS_CORETYPE=…").
func printTorchInfo(w io.Writer, python, with string, i torchInfo) {
	fmt.Fprintf(w, "PyTorch %s (%s)%s: %d threads (%s); BLAS: %s", i.Torch, python, with, i.Threads, i.Parallel, orUnknown(i.BLASKind))
	if i.BLASConfig != "" {
		fmt.Fprintf(w, " (%s)", i.BLASConfig)
	}
	if i.BLASCore != "" {
		fmt.Fprintf(w, ", core %s", i.BLASCore)
	}
	if i.BLASThreads > 0 {
		fmt.Fprintf(w, " with %d threads", i.BLASThreads)
	}
	fmt.Fprintf(w, "; %s\n", orUnknown(i.BLAS))
}

// sameCoreBaseline starts a second PyTorch with OPENBLAS_CORETYPE set to
// gdrotrain's core, when PyTorch's BLAS is an OpenBLAS that picked another
// core by itself; otherwise it says why one baseline is enough, or why the
// same kernels cannot be had (PyTorch calls another BLAS, or its OpenBLAS
// ignores the variable), so no ratio pretends to compare equal kernels.
func sameCoreBaseline(shapes []bench.Shape, o cpuBenchOptions, threads int, core string, def torchInfo) (*baseline, string) {
	switch {
	case core == "":
		return nil, ""
	case def.BLASKind != "OpenBLAS":
		return nil, fmt.Sprintf("PyTorch calls %s, not OpenBLAS: OPENBLAS_CORETYPE does not reach its kernels, so no ratio "+
			"compares the same matrix kernels (gdrotrain's: OpenBLAS core %s)", orUnknown(def.BLASKind), core)
	case def.BLASCore == "":
		return nil, fmt.Sprintf("PyTorch's OpenBLAS does not report its core; gdrotrain's is %s", core)
	case strings.EqualFold(def.BLASCore, core):
		return nil, fmt.Sprintf("PyTorch's OpenBLAS runs core %s by itself, as gdrotrain does: the ratios compare the same matrix kernels", core)
	}
	t, note := startTorch(shapes, o.python, o.script, threads, core)
	if t == nil {
		return nil, fmt.Sprintf("PyTorch with %s=%s: %s", cblasCoreEnv, core, note)
	}
	if !strings.EqualFold(t.info.BLASCore, core) {
		t.close()
		return nil, fmt.Sprintf("PyTorch's OpenBLAS ignores %s=%s (it runs core %s): no ratio compares the same matrix kernels",
			cblasCoreEnv, core, orUnknown(t.info.BLASCore))
	}
	return &baseline{label: fmt.Sprintf("%s=%s (gdrotrain's core)", cblasCoreEnv, core), torch: t},
		fmt.Sprintf("PyTorch's OpenBLAS picks core %s by itself and gdrotrain %s: the first ratios compare the programs as "+
			"each runs by default, the second with the same matrix kernels", def.BLASCore, core)
}

// cblasCoreEnv is OpenBLAS's variable for its kernels (cblas.CoreEnv; that
// package is internal to backend/cpu).
const cblasCoreEnv = "OPENBLAS_CORETYPE"

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// best is the largest f over rs: the round least slowed by other work on
// the machine, for each side alike.
func best[T any](rs []T, f func(T) float64) float64 {
	v := 0.0
	for _, r := range rs {
		v = max(v, f(r))
	}
	return v
}

// torchProc is the PyTorch baseline script, kept running so its
// measurements interleave with ours.
type torchProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
	info   torchInfo
}

// startTorch starts the PyTorch script on the shapes with threads threads
// for torch and its BLAS, and OPENBLAS_CORETYPE=core unless core is ""
// (then the caller's environment, with the user's own setting if any); a
// missing torch is a note, not an error, so `make bench` works everywhere.
func startTorch(shapes []bench.Shape, py, script string, threads int, core string) (*torchProc, string) {
	if py == "" {
		return nil, "PyTorch baseline skipped (--torch-python empty)"
	}
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline skipped: %v", err)
	}
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline skipped: %s cannot import torch (apt-get install python3-torch libopenblas0-pthread, "+
			"or PyTorch 2.14 from a Debian sid chroot: bash scripts/sid_chroot.sh, then --torch-python scripts/sid_python.sh)", py)
	}
	in, err := json.Marshal(shapes)
	if err != nil {
		return nil, err.Error()
	}
	t := &torchProc{cmd: exec.Command(py, script, "--threads", strconv.Itoa(threads)), stderr: &bytes.Buffer{}}
	n := strconv.Itoa(threads)
	t.cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+n, "OPENBLAS_NUM_THREADS="+n, "MKL_NUM_THREADS="+n)
	if core != "" {
		t.cmd.Env = append(t.cmd.Env, cblasCoreEnv+"="+core)
	}
	t.cmd.Stderr = t.stderr
	if t.in, err = t.cmd.StdinPipe(); err != nil {
		return nil, err.Error()
	}
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err.Error()
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Sprintf("PyTorch baseline: %v", err)
	}
	t.out = bufio.NewScanner(stdout)
	t.out.Buffer(make([]byte, 1<<16), 1<<20)
	var first struct {
		Info *torchInfo `json:"info"`
	}
	if _, err := t.in.Write(append(in, '\n')); err != nil || !t.out.Scan() || json.Unmarshal(t.out.Bytes(), &first) != nil || first.Info == nil {
		t.close()
		return nil, fmt.Sprintf("PyTorch baseline failed to start: %s", t.stderr.String())
	}
	t.info = *first.Info
	return t, ""
}

// measure asks the script to time one shape. The pause before it lets this
// process's goroutines settle; the one after lets PyTorch's BLAS threads,
// which busy-wait for a while after their last call, go to sleep before
// gdrotrain measures again.
func (t *torchProc) measure(name string) (torchResult, error) {
	time.Sleep(300 * time.Millisecond)
	defer time.Sleep(300 * time.Millisecond)
	if _, err := fmt.Fprintln(t.in, name); err != nil {
		return torchResult{}, err
	}
	if !t.out.Scan() {
		return torchResult{}, fmt.Errorf("no result for %s: %s", name, t.stderr.String())
	}
	var r torchResult
	if err := json.Unmarshal(t.out.Bytes(), &r); err != nil || r.Name != name {
		return torchResult{}, fmt.Errorf("bad result for %s: %q", name, t.out.Text())
	}
	return r, nil
}

func (t *torchProc) close() {
	t.in.Close()
	_ = t.cmd.Wait()
}
