package gpukit

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// results writes a kit results folder: file name → content.
func results(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const header = "step\tstatus\trc\tseconds\tlog\tnote\n"

// A go test -v log as go test prints it: top-level tests, subtests whose
// results come when their parent ends, a skip's reason logged before its
// result line, a failing subtest (and so its parent), and a worker's
// output quoted inside a log line (not counted).
const testLog = `=== RUN   TestDeviceForExternalTests
    backend_test.go:616: device: NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs, 79.1 GiB; driver 13.0, NVRTC 13.0, cuBLAS 130100) (gpu)
--- PASS: TestDeviceForExternalTests (3.50s)
=== RUN   TestNCCLCollectives
=== RUN   TestNCCLCollectives/world2
    nccl_test.go:152: rank 0 (collectives):     nccl_test.go:351: rank 0 of 2: match | --- PASS: TestNCCLWorker (6.91s) | PASS
=== RUN   TestNCCLCollectives/world4
    nccl_test.go:160: skipped: 4 ranks need 4 GPUs, 2 visible (the emulator runs them with one)
--- PASS: TestNCCLCollectives (10.21s)
    --- PASS: TestNCCLCollectives/world2 (6.94s)
    --- SKIP: TestNCCLCollectives/world4 (0.00s)
=== RUN   TestMMAFragments
=== RUN   TestMMAFragments/m16n8k16
    backend_test.go:950: fragment 3 wrong
--- FAIL: TestMMAFragments (0.10s)
    --- FAIL: TestMMAFragments/m16n8k16 (0.10s)
=== RUN   TestSonameMajor
    libs_test.go:20: checked 4 names
--- PASS: TestSonameMajor (0.00s)
FAIL
`

func TestSummarize(t *testing.T) {
	dir := results(t, map[string]string{
		"steps.tsv": header + "info\tpass\t0\t12\tcuda-info.log\t\n" +
			"selftest-fp32\tfail\t1\t3\tselftest-fp32.log\t\n" +
			"selftest-bf16\tpass\t0\t2\tselftest-bf16.log\t\n" +
			"cuda-tests\tfail\t1\t60\tcuda-tests.log\t\n" +
			"nccl-tests\tfail\t124\t900\tnccl-tests.log\ttimed out after 900 s\n" +
			"hf-fp32\tskip\t0\t0\t\tno PyTorch + transformers: no python3\n",
		"cuda-info.log":  "cuda: 58 kernels ready\n",
		"cuda-info.json": `{"gpu": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "devices": 2, "driver": "13.0", "libraries": [{"name": "cuBLAS", "version": "130100", "path": "/v/nvidia/cu13/lib/libcublas.so.13", "from": "pip wheel in /v (VIRTUAL_ENV)"}]}`,
		"selftest-fp32.log": "Error: GPU self-test failed: the CUDA backend disagrees with the CPU reference on X\n  matmul NN (kernels: gemm; tolerance atol 0 + rtol 0): off\n  greedy decode (KV cache) (kernels: attn_*, gemm; tolerance atol 1 + rtol 1): token\n" +
			"  exact log-probs (kernels: every kernel in exact mode: gemm; tolerance atol 0 + rtol 0): 3 of 186 whole-vocabulary log-softmax rows differ (max |Δ| 2e-07); first: decode in 3 slots against training: sequence 1, continuation token 2, vocabulary id 7: -5 vs -5.0000005\nHINT: …\n",
		"selftest-bf16.log": "cuda: ready\nself-test: 28 of 28 checks passed on NVIDIA H100 (matmul bf16) in 1.2s; exact log-probs: 0 of 186 whole-vocabulary log-softmax rows differ (max |Δ| 0)\n",
		"cuda-tests.log":    testLog,
		"nccl-tests.log":    "=== RUN   TestNCCLGradientReducer\n",
		"nvidia-smi.csv":    "index, name, driver_version\n0, NVIDIA H100 80GB HBM3, 580.65.06\n1, NVIDIA H100 80GB HBM3, 580.65.06\n",
		"python.txt":        "python 3.12.3 torch 2.9.0 CUDA 13.0 transformers 4.57.0\n",
		"hf-bf16.log":       "== hf-bf16: python3 hf_check.py\n{\"ok\": true, \"max_abs\": 0.01}\n",
		"bench.json":        `{"gpu": "NVIDIA H100", "shape": "qwen3-1.7b", "train": [{"name": "qwen3-1.7b-2k", "batch": 4, "seq_len": 2048, "tok_s": 30000, "step_s": 0.273, "mfu": 0.41, "torch_tok_s": 25000, "ratio": 1.2}], "decode": [{"name": "decode-b256-c4096", "error": "out of memory"}], "attention": [{"name": "attn-2x8k", "route": "wgmma", "fwd_s": 0.0021, "bwd_s": 0.0075, "fwd_tflops": 523.5, "bwd_tflops": 366.5, "assumed_fwd_tflops": 440, "assumed_bwd_tflops": 316}]}`,
	})
	s, err := Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Result != "fail" || len(s.Phases) != 6 || s.Counts["pass"] != 2 || s.Counts["fail"] != 3 || s.Counts["skip"] != 1 || s.Seconds != 977 {
		t.Errorf("result %s, counts %v, %v s", s.Result, s.Counts, s.Seconds)
	}
	details := map[string]string{}
	for _, st := range s.Steps {
		details[st.Name] = st.Detail
	}
	for step, want := range map[string]string{
		"info":          "NVIDIA H100 80GB HBM3 (sm_90), 2 visible, driver for CUDA 13.0",
		"selftest-fp32": "failed checks: matmul NN; greedy decode (KV cache); exact log-probs",
		"selftest-bf16": "self-test: 28 of 28 checks passed on NVIDIA H100 (matmul bf16) in 1.2s",
		"cuda-tests":    "FAILED TestMMAFragments/m16n8k16; 4 passed, 2 failed, 1 skipped", // the failing test by name, not the log's tail
	} {
		if !strings.Contains(details[step], want) {
			t.Errorf("%s: detail %q, want %q", step, details[step], want)
		}
	}
	ct := s.Tests["cuda-tests"]
	if ct == nil || ct.Passed != 4 || ct.Failed != 2 || ct.Skipped != 1 || !slices.Equal(ct.Failing, []string{"TestMMAFragments", "TestMMAFragments/m16n8k16"}) ||
		!strings.HasSuffix(ct.Device, "(gpu)") || len(ct.SkippedTests) != 1 || !strings.Contains(ct.SkippedTests[0], "4 ranks need 4 GPUs") {
		t.Errorf("cuda tests %+v", ct)
	}
	if s.CudaInfo == nil || s.CudaInfo.Libraries[0].From != "pip wheel in /v (VIRTUAL_ENV)" || len(s.NvidiaSMI) != 2 ||
		s.NvidiaSMI[1]["driver_version"] != "580.65.06" || s.Python == "" || s.HF["bf16"] == nil || s.HF["fp32"] != nil ||
		s.SelfTest["bf16"] == "" || len(s.Bench) == 0 || len(s.Unreadable) != 0 ||
		s.SelfTestExact["bf16"] != "0 of 186 whole-vocabulary log-softmax rows differ (max |Δ| 0)" || !strings.HasSuffix(s.SelfTestExact["fp32"], "vocabulary id 7: -5 vs -5.0000005") {
		t.Errorf("summary %+v", s)
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# gdrotrain GPU kit: FAIL", "| cuBLAS | 130100 | `/v/nvidia/cu13/lib/libcublas.so.13` | pip wheel in /v (VIRTUAL_ENV) |",
		"| nccl-tests | **FAIL** (exit 124) | 900 | timed out after 900 s", "| hf-fp32 | SKIP | 0 | no PyTorch + transformers: no python3 |",
		"| qwen3-1.7b-2k | 4×2048 | 0.273 | 30000 | 41.0 % | – | 25000 | – | 1.20 |", "| attn-2x8k | wgmma | 2.100 | 523.5 | 7.500 | 366.5 | 440 / 316 |", "| decode-b256-c4096 | – (out of memory) |",
		"- FAIL TestMMAFragments/m16n8k16", "- bf16: pass: 0 of 186 whole-vocabulary log-softmax rows differ", "- fp32: **FAIL**: 3 of 186 whole-vocabulary log-softmax rows differ", "- skip TestNCCLCollectives/world4: skipped: 4 ranks need 4 GPUs"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
}

// TestSummarizeBadInput: a folder that is not a kit's, a malformed steps
// line, and records a failed step left half-written.
func TestSummarizeBadInput(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		err   string // "" when it summarizes
		bad   []string
	}{
		{"no steps.tsv", map[string]string{}, "no such file: is this a GPU kit results folder?", nil},
		{"too few fields", map[string]string{"steps.tsv": header + "info\tpass\t0\n"}, "steps.tsv:2: 3 fields, want 7", nil},
		{"bad status", map[string]string{"steps.tsv": header + "info\tok\t0\t1\tl\t\n"}, `steps.tsv:2: status "ok"`, nil},
		{"bad seconds", map[string]string{"steps.tsv": header + "info\tpass\t0\tx\tl\t\n"}, "steps.tsv:2: strconv.ParseFloat", nil},
		{"half-written records", map[string]string{"steps.tsv": header + "info\tfail\t7\t1\tcuda-info.log\t\n",
			"cuda-info.json": "fake gdrotrain fails\n", "bench.json": `{"train": [`}, "", []string{"cuda-info.json", "bench.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Summarize(results(t, c.files))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Unreadable) != len(c.bad) {
				t.Fatalf("unreadable %q, want %q", s.Unreadable, c.bad)
			}
			for i, b := range c.bad {
				if !strings.HasPrefix(s.Unreadable[i], b) {
					t.Errorf("unreadable %q, want %q first", s.Unreadable[i], b)
				}
			}
			if s.CudaInfo != nil || s.Bench != nil {
				t.Errorf("a half-written record was kept")
			}
			var md bytes.Buffer
			if err := s.WriteMarkdown(&md); err != nil || !strings.Contains(md.String(), "Not summarized (unreadable): cuda-info.json") {
				t.Errorf("report.md (%v):\n%s", err, md.String())
			}
		})
	}
}

// TestSkipReasons: a skip's reason is the last line its own test logged
// before its `--- SKIP` line, whatever comes after it and whichever test
// printed in between (parallel tests resume with `=== CONT`).
func TestSkipReasons(t *testing.T) {
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"top-level", "=== RUN   TestA\n    a_test.go:3: before\n    a_test.go:3: the reason\n--- SKIP: TestA (0.00s)\n=== RUN   TestB\n--- PASS: TestB (0.00s)\n",
			[]string{"TestA: the reason"}},
		{"no message", "=== RUN   TestA\n    a_test.go:9: \n--- SKIP: TestA (0.00s)\n    b_test.go:1: not TestA's\n", []string{"TestA"}},
		{"subtest, result at the parent's end", "=== RUN   TestP\n=== RUN   TestP/x\n    a_test.go:5: x's reason\n        its second line\n" +
			"=== RUN   TestP/y\n    a_test.go:6: y log\n--- PASS: TestP (0.00s)\n    --- SKIP: TestP/x (0.00s)\n    --- PASS: TestP/y (0.00s)\n",
			[]string{"TestP/x: x's reason"}},
		{"parallel", "=== RUN   TestA\n=== PAUSE TestA\n=== RUN   TestB\n=== PAUSE TestB\n=== CONT  TestA\n    a_test.go:1: A's reason\n" +
			"=== CONT  TestB\n    b_test.go:2: B logs\n=== NAME  TestA\n--- SKIP: TestA (0.00s)\n--- PASS: TestB (0.00s)\n",
			[]string{"TestA: A's reason"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := countTests([]byte(c.log)).SkippedTests
			if !slices.Equal(got, c.want) {
				t.Errorf("skipped %q, want %q", got, c.want)
			}
		})
	}
}

// TestPhases: steps group into phases in the order run.sh recorded them; a
// phase is fail if a step failed, else cut if the deadline cut one, and a
// cut phase says what it finished (a cut test step: the tests that passed
// and the one the timeout stopped); the run's result is cut when nothing
// failed but something was cut; a six-field line (a kit before phases) is
// its own phase.
func TestPhases(t *testing.T) {
	timedOut := "=== RUN   TestA\n--- PASS: TestA (1.00s)\n=== RUN   TestSlow\npanic: test timed out after 2m0s\n\trunning tests:\n\t\tTestSlow (1m50s)\n\ngoroutine 1 [running]:\n"
	dir := results(t, map[string]string{
		"steps.tsv": "phase\tstep\tstatus\\trc\\tseconds\\tlog\\tnote\n" +
			"compile\tinfo\tpass\t0\t3\tcuda-info.log\t\n" +
			"selftest\tselftest-fp32\tpass\t0\t9\tselftest-fp32.log\t\n" +
			"selftest\tselftest-bf16\tskip\t0\t0\t\tnot wanted\n" +
			"cuda-tests\tcuda-tests\tcut\t2\t120\tcuda-tests.log\tcut by the deadline after 120 s\n" +
			"python\thf-model\tpass\t0\t1\thf.log\t\n" +
			"python\thf-fp32\tcut\t0\t0\t\tnot started: the deadline\n" +
			"baseline\tbaseline\tcut\t0\t0\t\tnot started: the deadline\n" +
			"report\tpass\t0\t1\treport.log\t\n",
		"cuda-tests.log": timedOut,
		"notes.txt":      "the warpgroup-MMA attention failed; the rest ran with GDROTRAIN_ATTN_WGMMA=0\n\n",
	})
	s, err := Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ name, status, finished string }
	var got []row
	for _, p := range s.Phases {
		got = append(got, row{p.Name, p.Status, p.Finished})
	}
	want := []row{{"compile", "pass", ""}, {"selftest", "pass", ""},
		{"cuda-tests", "cut", "cuda-tests: stopped in TestSlow; 1 passed, 0 failed, 0 skipped"},
		{"python", "cut", "ended: hf-model pass"}, {"baseline", "cut", "nothing"}, {"report", "pass", ""}}
	if !slices.Equal(got, want) {
		t.Errorf("phases\n%q\nwant\n%q", got, want)
	}
	if s.Result != "cut" || s.Counts["cut"] != 3 || len(s.Notes) != 1 || s.Tests["cuda-tests"].Running[0] != "TestSlow" {
		t.Errorf("result %s, counts %v, notes %q, tests %+v", s.Result, s.Counts, s.Notes, s.Tests["cuda-tests"])
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"# gdrotrain GPU kit: CUT", "**Note:** the warpgroup-MMA attention failed",
		"| cuda-tests | **CUT** | 120 | cuda-tests | cuda-tests: stopped in TestSlow; 1 passed",
		"| cuda-tests | **CUT** | 120 | cut by the deadline after 120 s; stopped in TestSlow"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("report.md lacks %q:\n%s", w, md.String())
		}
	}
}

// TestRunningTests: a log the deadline's SIGTERM cut off names the test
// (the deepest subtest) that was running; a complete log names none.
func TestRunningTests(t *testing.T) {
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"killed", "=== RUN   TestA\n--- PASS: TestA (1.00s)\n=== RUN   TestB\n=== RUN   TestB/sub\n    b_test.go:3: working\n", []string{"TestB/sub"}},
		{"complete", testLog, nil},
	} {
		if got := countTests([]byte(c.log)).Running; !slices.Equal(got, c.want) {
			t.Errorf("%s: running %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCompileFailures: a failed compile names every kernel file that did
// not compile, each once.
func TestCompileFailures(t *testing.T) {
	log := "Error: compile kernels/attention.cu for sm_100 with NVRTC 12.5: invalid value for --gpu-architecture\n" +
		"=== RUN   TestKernelsCompile\n    nvrtc_test.go:63: compile kernels/attention.cu for sm_100 with NVRTC 12.5: x\n" +
		"    nvrtc_test.go:63: compile kernels/norm.cu for sm_100 with NVRTC 12.5: y\n--- FAIL: TestKernelsCompile (1.00s)\n"
	dir := results(t, map[string]string{
		"steps.tsv":     header + "info\tfail\t1\t3\tcuda-info.log\t\n",
		"cuda-info.log": log,
	})
	s, err := Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kernels that did not compile: attention.cu (sm_100), norm.cu (sm_100)"; s.Steps[0].Detail != want {
		t.Errorf("detail %q, want %q", s.Steps[0].Detail, want)
	}
}

// TestBenchSources: the measured bench (bench.json, --no-torch) carries
// our rows; a complete baseline (bench-baseline.json, --torch-only) adds
// PyTorch's columns to the rows of the same name with their ratio; a
// half-written one is listed as unreadable and ours stand alone. peft's
// and tensorboard's lines are kept.
func TestBenchSources(t *testing.T) {
	ours := `{"shape": "tiny", "baseline": "", "train": [{"name": "t8x2k", "tok_s": 300}], "decode": [{"name": "d1", "tok_s": 50}]}`
	torch := `{"shape": "tiny", "baseline": "PyTorch 2.11", "train": [{"name": "t8x2k", "tok_s": 0, "torch_tok_s": 200, "torch_mfu": 0.4}],
		"decode": [{"name": "d1", "tok_s": 0, "torch_tok_s": 100}, {"name": "d2", "torch_tok_s": 7}]}`
	for _, c := range []struct {
		name, ours, baseline, want string
		unreadable                 int
		trainRatio, decodeRatio    float64
		decodeRows                 int
	}{
		{"baseline complete", ours, torch, "bench.json + bench-baseline.json", 0, 1.5, 0.5, 2},
		{"baseline cut", ours, `{"shape": "ti`, "bench.json", 1, 0, 0, 1},
		{"no baseline", ours, "", "bench.json", 0, 0, 0, 1},
		{"bench cut, baseline complete", `{"sha`, torch, "bench-baseline.json", 1, 0, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"steps.tsv": header, "bench.json": c.ours,
				"peft.log": "== peft\n{\"check\": \"peft\", \"ok\": true}\n"}
			if c.baseline != "" {
				files["bench-baseline.json"] = c.baseline
			}
			s, err := Summarize(results(t, files))
			if err != nil {
				t.Fatal(err)
			}
			if s.BenchFrom != c.want || len(s.Unreadable) != c.unreadable || s.Checks["peft"] == nil {
				t.Fatalf("bench from %q (want %q), unreadable %q, checks %v", s.BenchFrom, c.want, s.Unreadable, s.Checks)
			}
			var b struct {
				Baseline string
				Train    []struct{ Ratio float64 }
				Decode   []struct{ Ratio float64 }
			}
			if err := json.Unmarshal(s.Bench, &b); err != nil {
				t.Fatal(err)
			}
			if len(b.Decode) != c.decodeRows {
				t.Fatalf("%d decode rows, want %d: %s", len(b.Decode), c.decodeRows, s.Bench)
			}
			if math.Abs(b.Train[0].Ratio-c.trainRatio) > 1e-12 || math.Abs(b.Decode[0].Ratio-c.decodeRatio) > 1e-12 {
				t.Errorf("ratios train %v decode %v, want %v %v: %s", b.Train[0].Ratio, b.Decode[0].Ratio, c.trainRatio, c.decodeRatio, s.Bench)
			}
		})
	}
}

// TestBenchInterruptedReport: a bench cut by a signal (its phase's limit,
// the deadline) writes the rows it measured and an "interrupted" note;
// the report shows those rows and the note, the baseline's note after
// ours when it was cut too, and no row it did not measure.
func TestBenchInterruptedReport(t *testing.T) {
	ours := `{"shape": "qwen3-1.7b", "train": [{"name": "t2k", "batch": 4, "seq_len": 2048, "tok_s": 300, "step_s": 27, "mfu": 0.4}],
		"rows": ["t2k"], "interrupted": "SIGTERM after 1 of 3 rows; not measured: t8k, d1"}`
	torch := `{"shape": "qwen3-1.7b", "baseline": "baseline: PyTorch 2.11", "train": [{"name": "t2k", "torch_tok_s": 200}],
		"rows": ["t2k"], "interrupted": "SIGTERM during the PyTorch baseline after 1 of 2 rows; not measured: d1"}`
	for _, c := range []struct {
		name, baseline, note string
	}{
		{"bench cut", "", "SIGTERM after 1 of 3 rows; not measured: t8k, d1"},
		{"bench and baseline cut", torch, "SIGTERM after 1 of 3 rows; not measured: t8k, d1; " +
			"--torch-only: SIGTERM during the PyTorch baseline after 1 of 2 rows; not measured: d1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"steps.tsv": header + "bench\tcut\t124\t600\tbench.log\tcut by the 900 s deadline after 600 s\n",
				"bench.log": "Error: bench stopped (context canceled): SIGTERM after 1 of 3 rows\n", "bench.json": ours}
			if c.baseline != "" {
				files["bench-baseline.json"] = c.baseline
			}
			s, err := Summarize(results(t, files))
			if err != nil {
				t.Fatal(err)
			}
			var b struct {
				Interrupted string
				Train       []struct {
					Name  string
					Ratio float64
				}
				Decode []struct{ Name string }
			}
			if err := json.Unmarshal(s.Bench, &b); err != nil || len(s.Unreadable) > 0 {
				t.Fatalf("bench %s: %v, unreadable %q", s.Bench, err, s.Unreadable)
			}
			if b.Interrupted != c.note || len(b.Train) != 1 || b.Train[0].Name != "t2k" || len(b.Decode) != 0 {
				t.Errorf("merged bench %s, want t2k alone and the note %q", s.Bench, c.note)
			}
			var md bytes.Buffer
			if err := s.WriteMarkdown(&md); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"**Interrupted**: " + c.note + ". The rows below were measured", "| t2k | 4×2048 | 27.000 | 300 |"} {
				if !strings.Contains(md.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, md.String())
				}
			}
			if strings.Contains(md.String(), "| t8k ") || strings.Contains(md.String(), "| d1 ") {
				t.Errorf("report shows a row not measured:\n%s", md.String())
			}
		})
	}
}
