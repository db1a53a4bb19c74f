package bench

// The CPU benchmark beside PyTorch (gdrotrain bench on the CPU): the same
// shapes on the CPU backend and in PyTorch, on the same number of threads,
// interleaved shape by shape.

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/gdrotrain/gdrotrain/backend/cpu"
)

// CPUOptions are the CPU benchmark's settings.
type CPUOptions struct {
	Python, Script string // the interpreter with torch ("": no baseline) and the baseline script
	NoTorch        bool   // --no-torch: no baseline
	Rounds         int    // interleaved rounds; each side's best is reported
	Threads        int    // on both sides (0: every core)
}

// baseline is one PyTorch process the benchmark compares with.
type baseline struct {
	label   string // which kernels: "default kernels", "OPENBLAS_CORETYPE=SkylakeX"
	torch   *torchProc
	results [][]torchResult // per shape, per round
}

// CompareCPU times every shape on the CPU backend and, when PyTorch is
// found, in PyTorch on the same number of threads (with its default
// kernels, and with gdrotrain's OpenBLAS core where that differs),
// interleaved shape by shape for o.Rounds rounds (the machine's load then
// weighs on every side alike), and prints each side's best round and their
// ratio, then every round's ratios.
func CompareCPU(w io.Writer, shapes []Shape, o CPUOptions) error {
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
	rounds := max(o.Rounds, 1)
	b := cpu.NewBackendWith(cpu.Options{Workers: threads})
	fmt.Fprintf(w, "gdrotrain: CPU backend, %d threads, float32; matrix products: %s\n", b.Workers(), b.MatMulLibrary())
	bases, notes := startBaselines(w, shapes, o, threads, b.BLASCore())
	defer func() {
		for _, x := range bases {
			if x.torch != nil {
				x.torch.close()
			}
		}
	}()
	ours, failed, err := measureRounds(b, shapes, bases, rounds)
	if err != nil {
		return err
	}
	notes = append(notes, failed...)
	if len(bases) == 0 {
		bases = append(bases, &baseline{results: make([][]torchResult, len(shapes))})
	}
	printComparison(w, shapes, bases, ours, rounds)
	for _, n := range notes {
		if n != "" {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// startBaselines starts PyTorch with its default kernels and, where its
// OpenBLAS picks another core than core (gdrotrain's), a second one with
// ours; the notes say what was not started, and why.
func startBaselines(w io.Writer, shapes []Shape, o CPUOptions, threads int, core string) ([]*baseline, []string) {
	py := o.Python
	if o.NoTorch {
		py = ""
	}
	torch, note := startTorch(shapes, py, o.Script, threads, "")
	if o.NoTorch {
		note = "PyTorch baseline not run (--no-torch)"
	}
	if torch == nil {
		return nil, []string{note}
	}
	bases := []*baseline{{label: "PyTorch's default kernels", torch: torch}}
	printTorchInfo(w, o.Python, "", torch.info)
	if i := torch.info; i.BLASKind != "OpenBLAS" && i.BLASKind != "MKL" {
		fmt.Fprintln(w, "WARNING: PyTorch's matrix products do not use an optimized BLAS, so the ratios flatter gdrotrain; "+
			"install OpenBLAS for the baseline (apt-get install libopenblas0-pthread; `make bench` does)")
	}
	same, n := sameCoreBaseline(shapes, o, threads, core, torch.info)
	if same != nil {
		bases = append(bases, same)
		printTorchInfo(w, o.Python, " with "+cblasCoreEnv+"="+core, same.torch.info)
	}
	return bases, []string{n}
}

// measureRounds measures every shape rounds times on b, each measurement
// followed by every baseline's of the same shape. A baseline that fails
// is closed and left out of the later rounds, with a note saying why.
func measureRounds(b *cpu.Backend, shapes []Shape, bases []*baseline, rounds int) ([][]Result, []string, error) {
	benchers := make([]*Bencher, len(shapes))
	for i, s := range shapes {
		x, err := NewBencher(b, s)
		if err != nil {
			return nil, nil, err
		}
		if err := x.Warm(); err != nil {
			return nil, nil, err
		}
		benchers[i] = x
	}
	ours := make([][]Result, len(shapes))
	for _, x := range bases {
		x.results = make([][]torchResult, len(shapes))
	}
	var notes []string
	for r := 0; r < rounds; r++ {
		for i, s := range shapes {
			res, err := benchers[i].Run()
			if err != nil {
				return nil, nil, err
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
	return ours, notes, nil
}

// printComparison prints, against each baseline, every shape's best round
// on both sides and their ratio, then every round's ratios.
func printComparison(w io.Writer, shapes []Shape, bases []*baseline, ours [][]Result, rounds int) {
	var spread []string
	for k, x := range bases {
		if len(bases) > 1 {
			fmt.Fprintf(w, "against %s:\n", x.label)
		}
		if k == 0 || len(bases) > 1 {
			fmt.Fprintf(w, "%-10s %8s %7s %12s %12s %12s %12s %8s %8s\n", "shape", "params", "tokens", "fwd tok/s", "torch fwd", "train tok/s", "torch train", "fwd ×", "train ×")
		}
		for i, s := range shapes {
			of := best(ours[i], func(r Result) float64 { return r.FwdTokPerS })
			ot := best(ours[i], func(r Result) float64 { return r.TrainTokPerS })
			tf, tt, rf, rt := "-", "-", "-", "-"
			if theirs := x.results[i]; len(theirs) == rounds {
				f := best(theirs, func(r torchResult) float64 { return r.FwdTokS })
				t := best(theirs, func(r torchResult) float64 { return r.TrainTokS })
				tf, tt = fmt.Sprintf("%.1f", f), fmt.Sprintf("%.1f", t)
				rf, rt = fmt.Sprintf("%.2f", of/f), fmt.Sprintf("%.2f", ot/t)
				spread = append(spread, roundRatios(s.Name, x.label, len(bases) > 1, ours[i], theirs))
			}
			fmt.Fprintf(w, "%-10s %7.1fM %7d %12.1f %12s %12.1f %12s %8s %8s\n", s.Name, float64(ours[i][0].Params)/1e6, s.Batch*s.SeqLen,
				of, tf, ot, tt, rf, rt)
		}
	}
	fmt.Fprintf(w, "best of %d interleaved rounds for each side; ratio × = gdrotrain / PyTorch (higher is better); train = forward + backward\n", rounds)
	for _, l := range spread {
		fmt.Fprintln(w, l)
	}
}

// roundRatios is one shape's line of per-round ratios against a baseline
// (named when there are several).
func roundRatios(name, label string, named bool, ours []Result, theirs []torchResult) string {
	line := fmt.Sprintf("%s per round: fwd ×", name)
	if named {
		line = fmt.Sprintf("%s per round against %s: fwd ×", name, label)
	}
	for r := range theirs {
		line += fmt.Sprintf(" %.2f", ours[r].FwdTokPerS/theirs[r].FwdTokS)
	}
	line += ", train ×"
	for r := range theirs {
		line += fmt.Sprintf(" %.2f", ours[r].TrainTokPerS/theirs[r].TrainTokS)
	}
	return line
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
func sameCoreBaseline(shapes []Shape, o CPUOptions, threads int, core string, def torchInfo) (*baseline, string) {
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
	t, note := startTorch(shapes, o.Python, o.Script, threads, core)
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
