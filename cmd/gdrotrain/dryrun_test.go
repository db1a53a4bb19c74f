package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainDryRun prints the memory plan without training: on the CPU
// against the machine's memory, and with --device cuda either against the
// GPU or, where there is none, the plan plus one sentence saying so.
func TestTrainDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, err := runCmd(t, "", "init-tiny", "--out", dir); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", "--config", "demo", "--set", "model.path=" + dir, "--set", "data.train=[x.jsonl]", "--dry-run"}
	out, err := runCmd(t, "", args...)
	if err != nil {
		t.Fatalf("cpu dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"memory plan on cpu", "AdamW moments", "KV cache", "peak (persistent + larger phase)", "verdict: fits"} {
		if !strings.Contains(out, want) {
			t.Errorf("cpu dry run output lacks %q:\n%s", want, out)
		}
	}
	out, err = runCmd(t, "", append(args, "--device", "cuda")...)
	if !strings.Contains(out, "memory plan on cuda") {
		t.Errorf("cuda dry run printed no plan:\n%s", out)
	}
	if err != nil && !strings.Contains(err.Error(), "NVIDIA") && !strings.Contains(err.Error(), "CUDA_ERROR_NO_DEVICE") {
		t.Errorf("cuda dry run without a GPU: want the no-GPU sentence, got %v", err)
	}
	// A plan far beyond any machine is refused with what to change.
	out, err = runCmd(t, "", append(args, "--set", "train.micro_batch_rows=100000000")...)
	if err == nil || !strings.Contains(out, "lower train.micro_batch_rows") || !strings.Contains(out, "does not fit") {
		t.Errorf("oversized plan: want a refusal naming the knobs, got %v\n%s", err, out)
	}
}

// TestPaperConfigsPlan plans every paper config on the real Qwen3 shapes
// (docs/qwen3-shapes) against an 80 GB and a 141 GB GPU, as a login node
// would, and checks the verdicts the configs' comments state.
func TestPaperConfigsPlan(t *testing.T) {
	fits := map[string][2]bool{"1.7b": {true, true}, "4b": {false, true}, "8b": {false, false}}
	for _, method := range []string{"grpo", "prompt-gdro", "rollout-gdro"} {
		for size, want := range fits {
			for i, gib := range []string{"80", "141"} {
				out, err := runCmd(t, "", "train", "--config", "paper-"+method+"-"+size,
					"--set", "model.path="+filepath.Join("..", "..", "docs", "qwen3-shapes", size), "--dry-run", "--assume-memory-gib", gib)
				if got := err == nil; got != want[i] {
					t.Errorf("%s %s on %s GiB: fits %v, want %v (%v)\n%s", method, size, gib, got, want[i], err, out)
				}
			}
		}
	}
}

// TestPaperConfigsPlanWorld plans the 4B and 8B paper configs per rank of 8
// data-parallel ranks on 80 GB GPUs: as shipped (ZeRO-2) both fit; 4B
// fits with ZeRO-1 too (whole gradients) but not with ZeRO-0 (whole
// moments); 8B needs ZeRO-2, and fits on no single GPU.
func TestPaperConfigsPlanWorld(t *testing.T) {
	for _, method := range []string{"grpo", "prompt-gdro", "rollout-gdro"} {
		for _, tc := range []struct {
			size, world, zero string // zero "": as shipped
			fits              bool
		}{{"4b", "8", "", true}, {"8b", "8", "", true}, {"4b", "8", "1", true}, {"8b", "8", "1", false}, {"4b", "8", "0", false}, {"8b", "1", "", false}} {
			args := []string{"train", "--config", "paper-" + method + "-" + tc.size,
				"--set", "model.path=" + filepath.Join("..", "..", "docs", "qwen3-shapes", tc.size),
				"--dry-run", "--assume-memory-gib", "80", "--world-size", tc.world}
			if tc.zero != "" {
				args = append(args, "--set", "dist.zero_stage="+tc.zero)
			}
			out, err := runCmd(t, "", args...)
			if got := err == nil; got != tc.fits {
				t.Errorf("%s %s on %s × 80 GiB, ZeRO-%s: fits %v, want %v (%v)\n%s", method, tc.size, tc.world, tc.zero, got, tc.fits, err, out)
			}
			if tc.world == "8" && tc.zero == "" {
				for _, want := range []string{"per rank of 8 (data parallel, ZeRO-2)", "AdamW moments (fp32, 1/8)", "gradients (fp32, 1 layer + 1/8)", "masters 1/8"} {
					if !strings.Contains(out, want) {
						t.Errorf("%s %s: the plan does not say %q:\n%s", method, tc.size, want, out)
					}
				}
			}
		}
	}
}

// TestLoRAConfigsPlan: the paper's LoRA configs fit one GPU of the size
// their comments name (1.7B on 24 GB, 4B on 48 GB, 8B on 80 GB), where the
// same runs without adapters (lora.rank 0) do not; the plan names the
// frozen base and the adapters.
func TestLoRAConfigsPlan(t *testing.T) {
	for _, method := range []string{"grpo", "prompt-gdro"} {
		for _, tc := range []struct{ size, gib string }{{"1.7b", "24"}, {"4b", "48"}, {"8b", "80"}} {
			args := []string{"train", "--config", "paper-" + method + "-lora-" + tc.size,
				"--set", "model.path=" + filepath.Join("..", "..", "docs", "qwen3-shapes", tc.size), "--dry-run", "--assume-memory-gib", tc.gib}
			out, err := runCmd(t, "", args...)
			if err != nil {
				t.Errorf("%s %s LoRA on %s GiB: %v\n%s", method, tc.size, tc.gib, err, out)
			}
			for _, want := range []string{"LoRA base", "LoRA adapters r=32"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s %s: the plan does not say %q:\n%s", method, tc.size, want, out)
				}
			}
			if out, err := runCmd(t, "", append(args, "--set", "lora.rank=0")...); err == nil {
				t.Errorf("%s %s without LoRA fits %s GiB too: the LoRA config shows nothing\n%s", method, tc.size, tc.gib, out)
			}
		}
	}
}
