package gpukit

import (
	"bytes"
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

// A go test -v log: top-level tests, a subtest, a skip with its reason,
// a failure, and a worker's output quoted inside a log line (not counted).
const testLog = `=== RUN   TestDeviceForExternalTests
    backend_test.go:616: device: NVIDIA H100 80GB HBM3 (GPU 0, sm_90, 132 SMs, 79.1 GiB; driver 13.0, NVRTC 13.0, cuBLAS 130100) (gpu)
--- PASS: TestDeviceForExternalTests (3.50s)
=== RUN   TestNCCLCollectives
    nccl_test.go:152: rank 0 (collectives):     nccl_test.go:351: rank 0 of 2: match | --- PASS: TestNCCLWorker (6.91s) | PASS
--- PASS: TestNCCLCollectives (10.21s)
    --- PASS: TestNCCLCollectives/world2 (6.94s)
    --- SKIP: TestNCCLCollectives/world4 (0.00s)
        nccl_test.go:160: skipped: 4 ranks need 4 GPUs, 2 visible (the emulator runs them with one)
--- FAIL: TestMMAFragments (0.10s)
    backend_test.go:950: fragment 3 wrong
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
		"cuda-info.log":     "cuda: 58 kernels ready\n",
		"cuda-info.json":    `{"gpu": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "devices": 2, "driver": "13.0", "libraries": [{"name": "cuBLAS", "version": "130100", "path": "/v/nvidia/cu13/lib/libcublas.so.13", "from": "pip wheel in /v (VIRTUAL_ENV)"}]}`,
		"selftest-fp32.log": "Error: GPU self-test failed: the CUDA backend disagrees with the CPU reference on X\n  matmul NN (kernels: gemm; tolerance atol 0 + rtol 0): off\n  greedy decode (KV cache) (kernels: attn_*, gemm; tolerance atol 1 + rtol 1): token\nHINT: …\n",
		"selftest-bf16.log": "cuda: ready\nself-test: 28 of 28 checks passed on NVIDIA H100 (matmul bf16) in 1.2s\n",
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
	if s.Result != "fail" || s.Counts["pass"] != 2 || s.Counts["fail"] != 3 || s.Counts["skip"] != 1 || s.Seconds != 977 {
		t.Errorf("result %s, counts %v, %v s", s.Result, s.Counts, s.Seconds)
	}
	details := map[string]string{}
	for _, st := range s.Steps {
		details[st.Name] = st.Detail
	}
	for step, want := range map[string]string{
		"info":          "NVIDIA H100 80GB HBM3 (sm_90), 2 visible, driver for CUDA 13.0",
		"selftest-fp32": "failed checks: matmul NN; greedy decode (KV cache)",
		"selftest-bf16": "self-test: 28 of 28 checks passed on NVIDIA H100 (matmul bf16) in 1.2s",
		"cuda-tests":    "FAIL", // a failure's last lines
	} {
		if !strings.Contains(details[step], want) {
			t.Errorf("%s: detail %q, want %q", step, details[step], want)
		}
	}
	ct := s.Tests["cuda-tests"]
	if ct == nil || ct.Passed != 3 || ct.Failed != 1 || ct.Skipped != 1 || !slices.Equal(ct.Failing, []string{"TestMMAFragments"}) ||
		!strings.HasSuffix(ct.Device, "(gpu)") || len(ct.SkippedTests) != 1 || !strings.Contains(ct.SkippedTests[0], "4 ranks need 4 GPUs") {
		t.Errorf("cuda tests %+v", ct)
	}
	if s.CudaInfo == nil || s.CudaInfo.Libraries[0].From != "pip wheel in /v (VIRTUAL_ENV)" || len(s.NvidiaSMI) != 2 ||
		s.NvidiaSMI[1]["driver_version"] != "580.65.06" || s.Python == "" || s.HF["bf16"] == nil || s.HF["fp32"] != nil ||
		s.SelfTest["bf16"] == "" || len(s.Bench) == 0 || len(s.Unreadable) != 0 {
		t.Errorf("summary %+v", s)
	}
	var md bytes.Buffer
	if err := s.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# gdrotrain GPU kit: FAIL", "| cuBLAS | 130100 | `/v/nvidia/cu13/lib/libcublas.so.13` | pip wheel in /v (VIRTUAL_ENV) |",
		"| nccl-tests | **FAIL** (exit 124) | 900 | timed out after 900 s", "| hf-fp32 | SKIP | 0 | no PyTorch + transformers: no python3 |",
		"| qwen3-1.7b-2k | 4×2048 | 0.273 | 30000 | 41.0 % | – | 25000 | – | 1.20 |", "| attn-2x8k | wgmma | 2.100 | 523.5 | 7.500 | 366.5 | 440 / 316 |", "| decode-b256-c4096 | – (out of memory) |",
		"- FAIL TestMMAFragments", "- skip TestNCCLCollectives/world4: nccl_test.go:160: skipped: 4 ranks need 4 GPUs"} {
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
		{"too few fields", map[string]string{"steps.tsv": header + "info\tpass\t0\n"}, "steps.tsv:2: 3 fields, want 6", nil},
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
