// Package selftest is the known-answer test the CUDA backend passes before
// it trains (docs/architecture.md decision 8): every backend op, one GRPO training
// step of a tiny random model and a greedy decode through the KV cache, each
// run on the GPU and on the CPU reference backend from the same inputs and
// compared within the tolerances written next to each check. It takes
// seconds; `gdrotrain cuda-info --self-test` runs it alone, and train,
// generate and bench run it first on CUDA unless --skip-self-test.
//
// A failure names the check, the kernels it exercises, the worst element
// and the tolerance, and suggests the exact matmul mode or the CPU backend.
package selftest

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	fastcpu "github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/numcheck"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/sampler"
)

// Check is the outcome of one comparison.
type Check struct {
	Name    string
	Kernels string
	Tol     numcheck.Tol
	Values  int
	MaxAbs  float64
	Err     error // nil when within tolerance
	worst   int   // the worst element's index (−1: none)
	// exact is the full-distribution check's report (the exact check
	// alone, when it compared; exact.go).
	exact *sampler.VocabReport
}

// Report lists every check of one run.
type Report struct {
	Device    string
	Precision cuda.Precision
	Checks    []Check
	Elapsed   time.Duration
}

// Failed returns the checks that did not pass.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Err != nil {
			out = append(out, c)
		}
	}
	return out
}

// Summary is one line: how many checks passed, where, in what time.
func (r *Report) Summary() string {
	return fmt.Sprintf("self-test: %d of %d checks passed on %s (matmul %s) in %s%s", len(r.Checks)-len(r.Failed()),
		len(r.Checks), r.Device, r.Precision, r.Elapsed.Round(time.Millisecond), r.exactLine())
}

// Error is returned when a check fails.
type Error struct{ Report *Report }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("GPU self-test failed: the CUDA backend disagrees with the CPU reference on ")
	b.WriteString(e.Report.Device)
	wg := false
	for _, c := range e.Report.Failed() {
		fmt.Fprintf(&b, "\n  %s (kernels: %s; tolerance atol %g + rtol %g): %v", c.Name, c.Kernels, c.Tol.Atol, c.Tol.Rtol, c.Err)
		wg = wg || strings.Contains(c.Kernels, "attn_wg_")
	}
	if wg {
		fmt.Fprintf(&b, "\nHINT: on an H100 or H200 that check runs the warpgroup-MMA attention kernels (sm_90a); "+
			"%s=0 keeps the attention on the mma.sync kernels", cuda.WGMMAEnv)
	}
	if e.Report.Precision != cuda.FP32 {
		b.WriteString("\nHINT: retry with --matmul-precision fp32 (exact products); if it still fails, ")
	} else {
		b.WriteString("\nHINT: ")
	}
	b.WriteString("train with --device cpu, and report this output together with what `gdrotrain cuda-info` prints")
	return b.String()
}

// Run runs every check on d with products in prec and returns the report,
// and an *Error when any check but the exact log-probs one failed (see
// verdict). logf (may be nil) gets one line per check.
func Run(d *cuda.Device, prec cuda.Precision, logf func(string, ...any)) (*Report, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	start := time.Now()
	r := &Report{Device: d.Info.Name, Precision: prec}
	cpu, gpu := fastcpu.NewBackend(), cuda.NewBackend(d, prec)
	record := func(c Check) {
		r.Checks = append(r.Checks, c)
		status := "ok"
		if c.Err != nil {
			status = "FAILED"
		}
		logf("self-test %-34s %-6s max abs err %.2e over %d values", c.Name, status, c.MaxAbs, c.Values)
	}
	for _, c := range OpCases() {
		if c.BF16Only && prec != cuda.BF16 {
			continue
		}
		record(checkOp(cpu, gpu, c, prec))
	}
	for _, c := range trainingStep(cpu, gpu, prec) {
		record(c)
	}
	record(greedyDecode(cpu, gpu, prec))
	for _, c := range exactChecks(gpu, prec) {
		record(c)
	}
	r.Elapsed = time.Since(start)
	return r, r.verdict()
}

// verdict is Run's error: an *Error when a check other than the exact
// log-probs check failed. That one's failure is in the report (its
// checks, the summary line, Error's list when another failed too) but
// fails only a run in exact mode (ExactErr).
func (r *Report) verdict() error {
	for _, c := range r.Failed() {
		if !isExact(c) {
			return &Error{Report: r}
		}
	}
	return nil
}

// checkOp runs one op case on both backends and compares the outputs
// within its tolerance in products of precision prec.
func checkOp(cpu, gpu model.Backend, c OpCase, prec cuda.Precision) Check {
	if c.Magnitude != nil {
		return compareProducts(cpu, gpu, c, productRoundoff[string(prec)])
	}
	tol := opTol
	if c.Products {
		tol = productTol[string(prec)]
	}
	chk := compareOn(cpu, gpu, c.Name, c.Kernels, tol, c.Run)
	if chk.Err != nil && chk.worst >= 0 && c.Locate != nil {
		chk.Err = fmt.Errorf("%w (worst element: %s)", chk.Err, c.Locate(chk.worst))
	}
	return chk
}

// compareOn runs op on both backends and compares the outputs. A backend
// error (a failed launch, an out-of-memory) fails the check with it.
func compareOn(cpu, gpu model.Backend, name, kernels string, tol numcheck.Tol, op func(model.Backend) []float32) Check {
	c := Check{Name: name, Kernels: kernels, Tol: tol, worst: -1}
	want, got, err := runBoth(cpu, gpu, op)
	if err != nil {
		c.Err = err
		return c
	}
	return compareValues(c, got, want)
}

// runBoth runs op on the CPU and on the GPU and collects either's error.
func runBoth(cpu, gpu model.Backend, op func(model.Backend) []float32) (want, got []float32, err error) {
	want = op(cpu)
	if err := cpu.Err(); err != nil {
		cpu.ResetErr()
		return nil, nil, fmt.Errorf("cpu reference: %w", err)
	}
	got = op(gpu)
	if err := gpu.Err(); err != nil {
		gpu.ResetErr()
		return nil, nil, fmt.Errorf("cuda: %w", err)
	}
	return want, got, nil
}

// compareValues fills c from a comparison of got with want.
func compareValues(c Check, got, want []float32) Check {
	w := make([]float64, len(want))
	for i, v := range want {
		w[i] = float64(v)
	}
	st, err := numcheck.Compare(got, w, c.Tol)
	c.Values, c.MaxAbs, c.Err, c.worst = len(got), st.MaxAbs, err, st.Worst
	if len(got) == 0 && err == nil {
		c.Err = errors.New("no values compared")
	}
	return c
}

// compareProducts checks a matrix-product case element by element against
// the rounding bound |got − want| ≤ 1e-6 + u·Σ|a||b|.
func compareProducts(cpu, gpu model.Backend, oc OpCase, u float64) Check {
	c := Check{Name: oc.Name, Kernels: oc.Kernels, Tol: numcheck.Tol{Atol: 1e-6, Rtol: u}}
	want, got, err := runBoth(cpu, gpu, oc.Run)
	if err != nil {
		c.Err = err
		return c
	}
	mag := oc.Magnitude(cpu)
	if len(got) != len(want) || len(mag) != len(want) {
		c.Err = fmt.Errorf("%d values, want %d", len(got), len(want))
		return c
	}
	c.Values = len(got)
	bad, worst, worstRatio := 0, -1, 0.0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		c.MaxAbs = math.Max(c.MaxAbs, d)
		ratio := d / (c.Tol.Atol + u*float64(mag[i]))
		if ratio > 1 || math.IsNaN(d) {
			bad++
			if worst < 0 || ratio > worstRatio || math.IsNaN(d) {
				worst, worstRatio = i, ratio
			}
		}
	}
	if bad > 0 {
		c.Err = fmt.Errorf("%d of %d elements outside atol %g + rtol %g·Σ|a||b| (the product rounding bound): worst [%d] got %.8g want %.8g, Σ|a||b| = %.4g",
			bad, len(want), c.Tol.Atol, u, worst, got[worst], want[worst], mag[worst])
	}
	return c
}
