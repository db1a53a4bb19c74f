package selftest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fastcpu "github.com/gdrotrain/gdrotrain/backend/cpu"
	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/cudaemu"
	"github.com/gdrotrain/gdrotrain/model"
)

var emuDir string // the emulator built by device, removed by TestMain

func TestMain(m *testing.M) {
	code := m.Run()
	if emuDir != "" {
		os.RemoveAll(emuDir)
	}
	os.Exit(code)
}

// device opens the GPU, or the CPU emulator where there is none (built
// once for the package's tests).
func device(t *testing.T) *cuda.Device {
	t.Helper()
	if os.Getenv(cuda.LibDirEnv) == "" {
		if d, err := cuda.Open(0, t.Logf); err == nil {
			return d
		} else if !cuda.IsNoGPU(err) {
			t.Fatal(err)
		}
		if !cudaemu.Available() {
			if os.Getenv("GDROTRAIN_REQUIRE_EMULATOR") != "" {
				t.Fatal("GDROTRAIN_REQUIRE_EMULATOR is set but g++ is missing")
			}
			t.Skip("skipped: no GPU and no g++ for the CPU emulator")
		}
		dir, err := os.MkdirTemp("", "gdrotrain-selftest-emu-")
		if err != nil {
			t.Fatal(err)
		}
		emuDir = dir
		if err := cudaemu.Build(dir, cuda.Sources()); err != nil {
			t.Fatal(err)
		}
		os.Setenv(cuda.LibDirEnv, dir)
		os.Setenv(cuda.CacheDirEnv, filepath.Join(dir, "kernel-cache"))
	}
	d, err := cuda.Open(0, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSelfTestPasses: the self-test passes on the device (the emulator
// here) in each product precision (bf16 alone under -short).
func TestSelfTestPasses(t *testing.T) {
	d := device(t)
	precs := []cuda.Precision{cuda.FP32, cuda.BF16, cuda.TF32}
	if testing.Short() {
		precs = []cuda.Precision{cuda.BF16}
	}
	for _, prec := range precs {
		r, err := runButExact(t, d, prec)
		if err != nil {
			t.Fatalf("%s: %v", prec, err)
		}
		if len(r.Checks) < 25 {
			t.Errorf("%s: only %d checks ran", prec, len(r.Checks))
		}
		t.Log(r.Summary())
	}
}

// TestSelfTestCatchesFaults injects faults into the emulator (a kernel that
// does not run, a GEMM off by one) and requires the self-test to fail,
// naming the op and the tolerance. Under -short: a kernel's fault and the
// GEMM's only.
func TestSelfTestCatchesFaults(t *testing.T) {
	d := device(t)
	if emuDir == "" {
		t.Skip("fault injection needs the emulator (this machine has a GPU)")
	}
	for _, c := range []struct {
		fault, wantCheck string
		prec             cuda.Precision // "": FP32
	}{
		{"rmsnorm_fwd", "rmsnorm fwd+bwd", ""},
		{"gemm", "matmul NN", ""},
		{"attn_gemm_softmax", "attention packed training", ""},
		{"attn_gemm_dscores", "attention packed training", ""},
		{"rmsnorm_bwd_dxdw_res", "fused residual rmsnorm fwd+bwd", ""},
		{"adamw", "adamw", ""},
		{"adamw_multi", "training step", ""},
		{"topk_rows", "device sampling reductions", ""},
		// The emulator is sm_90: under bf16 products the training attention runs the wgmma kernels.
		{"attn_wg_bwd_dkv_h", "attention, bf16 activations, head_dim 128", cuda.BF16},
	} {
		t.Run(c.fault, func(t *testing.T) {
			if testing.Short() && c.fault != "rmsnorm_fwd" && c.fault != "gemm" {
				t.Skip("-short: a kernel's fault and the GEMM's only")
			}
			t.Setenv("GDROTRAIN_EMU_FAULT", c.fault)
			prec := c.prec
			if prec == "" {
				prec = cuda.FP32
			}
			r, err := Run(d, prec, nil)
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("fault %s: self-test passed (%v)", c.fault, err)
			}
			msg := err.Error()
			wants := []string{c.wantCheck, "tolerance", "--device cpu", "rtol"}
			if strings.HasPrefix(c.fault, "attn_wg_") {
				wants = append(wants, cuda.WGMMAEnv+"=0 keeps the attention on the mma.sync kernels")
			}
			for _, want := range wants {
				if !strings.Contains(msg, want) {
					t.Errorf("fault %s: message lacks %q:\n%s", c.fault, want, msg)
				}
			}
			t.Logf("%s → %d failed checks; first lines:\n%s", c.fault, len(r.Failed()), firstLines(msg, 3))
		})
	}
	// Once the fault is gone the device passes again.
	if _, err := runButExact(t, d, cuda.FP32); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
}

// TestHeadDimSweep: the checks that run attention at every head dim fail
// when their kernels do, naming the head dim of the worst element, and the
// sweep covers every even head dim up to cuda.MaxHeadDim. (Only these
// checks run: a whole self-test per fault is TestSelfTestCatchesFaults'
// business.)
func TestHeadDimSweep(t *testing.T) {
	d := device(t)
	if emuDir == "" {
		t.Skip("fault injection needs the emulator (this machine has a GPU)")
	}
	cpu, gpu := fastcpu.NewBackend(), cuda.NewBackend(d, cuda.FP32)
	var sweep []OpCase
	for _, c := range OpCases() {
		if strings.HasPrefix(c.Name, "attention every head_dim") {
			sweep = append(sweep, c)
		}
	}
	if len(sweep) != 3 {
		t.Fatalf("%d head-dim checks, want decode, decode over a bf16 cache and prefill", len(sweep))
	}
	if got := sweep[0].Locate(0); got != "head_dim 2" {
		t.Errorf("the sweep's first element is in %s, want head_dim 2", got)
	}
	if got := sweep[0].Locate(1 << 30); got != fmt.Sprintf("head_dim %d", cuda.MaxHeadDim) {
		t.Errorf("the sweep's last element is in %s, want head_dim %d", got, cuda.MaxHeadDim)
	}
	for _, c := range []struct {
		fault string
		check int
	}{{"attn_decode_split_p2", 0}, {"attn_decode_split_kvh_p2", 1}, {"attn_fwd", 0}, {"attn_gemm_softmax", 2}} { // H/G = 2: the _p2 split kernels
		t.Setenv("GDROTRAIN_EMU_FAULT", c.fault)
		chk := checkOp(cpu, gpu, sweep[c.check], cuda.FP32)
		if chk.Err == nil || !strings.Contains(chk.Err.Error(), "(worst element: head_dim ") {
			t.Errorf("fault %s: %s: %v, want a failure naming a head dim", c.fault, sweep[c.check].Name, chk.Err)
		}
	}
}

// runButExact runs the self-test: every check but the exact log-probs one
// must pass (Run's error); the exact check must have run, on the
// backend's own route, and passed, its figures in the summary.
func runButExact(t *testing.T, d *cuda.Device, prec cuda.Precision) (*Report, error) {
	t.Helper()
	r, err := Run(d, prec, t.Logf)
	if err != nil {
		return r, err
	}
	sum := r.Summary()
	if mma, err := r.ExactRoute(); !strings.Contains(sum, exactName) || mma || err != nil || r.check(exactMMAName) != nil {
		t.Errorf("%s: the exact check did not run or did not pass on the backend's route (mma.sync fallback %v, %v): %s", prec, mma, err, sum)
	}
	return r, nil
}

// TestExactCheck: the exact check passes on a batch-invariant backend in
// exact mode (the fast CPU backend) and fails without it, naming the first
// difference; its failure is in the summary line and the report's failed
// checks but not in Run's error, unless another check failed too.
func TestExactCheck(t *testing.T) {
	for _, on := range []bool{true, false} {
		c, ok := exactCheck(fastcpu.NewBackend(), cuda.FP32, on)
		if !ok || c.exact == nil || c.Values == 0 {
			t.Fatalf("exact mode %v: the check did not compare (%v, %+v)", on, ok, c)
		}
		t.Logf("exact mode %v: %d of %d rows differ, max |Δ| %.3g", on, c.exact.Differing, c.Values, c.MaxAbs)
		if on && c.Err != nil {
			t.Errorf("exact mode: %v", c.Err)
		}
		if !on && (c.Err == nil || !strings.Contains(c.Err.Error(), "vocabulary id")) {
			t.Errorf("exact mode off: %v, want a failure naming the first difference", c.Err)
		}
		if _, ok := exactCheck(model.NewReferenceCPU(), cuda.FP32, on); ok {
			t.Errorf("a backend without exact mode was checked")
		}
		r := &Report{Device: "X", Precision: cuda.FP32, Checks: []Check{{Name: "matmul NN"}, c}}
		want := fmt.Sprintf("%s: %d of %d whole-vocabulary log-softmax rows differ", exactName, c.exact.Differing, c.Values)
		if !on {
			want = exactName + " FAILED: " + c.Err.Error()
		}
		if mma, err := r.ExactRoute(); !strings.Contains(r.Summary(), want) || (err == nil) == !on || mma {
			t.Errorf("exact mode %v: summary %q lacks %q, or ExactRoute %v, %v", on, r.Summary(), want, mma, err)
		}
		if err := r.verdict(); err != nil {
			t.Errorf("exact mode %v: only the exact check can have failed, but Run's error is %v", on, err)
		}
		if on {
			continue
		}
		r.Checks[0].Err = errors.New("off")
		var se *Error
		if err := r.verdict(); !errors.As(err, &se) || !strings.Contains(err.Error(), "exact log-probs (kernels: ") {
			t.Errorf("a failed product check and the exact check: %v, want an *Error listing both", err)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestExactFallback: where the exact check fails on the warpgroup-MMA
// products (the emulator's sm_90a device; the failure is injected, since
// the emulator's wgmma adds as its mma.sync does) the self-test checks the
// mma.sync products too, and a run in exact mode keeps its products there
// for the whole process (exactRoute, ForDevice's for such a run, sets
// cuda.ExactWGMMAEnv) instead of refusing to start; where both fail, it
// refuses, naming both. The exact checks alone run (Run's other checks
// are TestSelfTestPasses').
func TestExactFallback(t *testing.T) {
	d := device(t)
	if !cuda.NewBackend(d, cuda.BF16).ExactOnWGMMA() {
		t.Skip("the device's exact products are not warpgroup MMAs")
	}
	defer func(f func(model.Backend, cuda.Precision, bool) (Check, bool)) { checkExact = f }(checkExact)
	for _, c := range []struct {
		name        string
		failMMASync bool
		wantMMA     bool
		wantErr     string
	}{
		{"the warpgroup-MMA products fail", false, true, ""},
		{"both routes fail", true, false, "on the mma.sync products: injected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(cuda.ExactWGMMAEnv, "") // restored after; ForDevice may set it
			var routes []bool
			checkExact = func(b model.Backend, prec cuda.Precision, on bool) (Check, bool) {
				chk, ok := exactCheck(b, prec, on)
				wg := b.(*cuda.Backend).ExactOnWGMMA()
				routes = append(routes, wg)
				if wg || c.failMMASync {
					chk.Err = fmt.Errorf("injected: %d rows differ", 1+len(routes))
				}
				return chk, ok
			}
			r := &Report{Device: d.Info.Name, Precision: cuda.BF16, Checks: exactChecks(cuda.NewBackend(d, cuda.BF16), cuda.BF16)}
			if len(routes) != 2 || !routes[0] || routes[1] {
				t.Fatalf("exact checks ran on routes %v (warpgroup MMA?), want [true false]", routes)
			}
			if err := r.verdict(); err != nil {
				t.Errorf("the exact checks' failures failed Run: %v", err)
			}
			var log strings.Builder
			err := exactRoute(r, &log)
			if mma, rerr := r.ExactRoute(); mma != c.wantMMA || (rerr != nil) != (c.wantErr != "") {
				t.Errorf("ExactRoute: %v, %v", mma, rerr)
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "on the warpgroup-MMA products: injected") {
					t.Errorf("ForDevice: %v, want a refusal naming both routes", err)
				}
				if os.Getenv(cuda.ExactWGMMAEnv) != "" {
					t.Errorf("a refused run set %s", cuda.ExactWGMMAEnv)
				}
				return
			}
			if err != nil {
				t.Fatalf("ForDevice: %v, want the run kept on mma.sync", err)
			}
			if os.Getenv(cuda.ExactWGMMAEnv) != "0" || cuda.NewBackend(d, cuda.BF16).ExactOnWGMMA() {
				t.Errorf("%s = %q after the fallback; a backend made now still takes the warpgroup MMA: %v",
					cuda.ExactWGMMAEnv, os.Getenv(cuda.ExactWGMMAEnv), cuda.NewBackend(d, cuda.BF16).ExactOnWGMMA())
			}
			for _, want := range []string{"exact log-probs on warpgroup MMA FAILED: injected", "exact log-probs on mma.sync: 0 of ",
				"keeps its bf16 products on the mma.sync kernels"} {
				if !strings.Contains(r.Summary(), want) {
					t.Errorf("summary lacks %q: %s", want, r.Summary())
				}
			}
			if !strings.Contains(log.String(), "stay on mma.sync") {
				t.Errorf("the run's log does not say where its products went:\n%s", log.String())
			}
		})
	}
}
