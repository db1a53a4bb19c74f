package cuda

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// precision.exact_logprobs across processes on the emulator
// (docs/algorithm.md §5.10): data-parallel ranks reducing through the
// emulator's NCCL, and generation ranks receiving the weights through it
// in the dtype the kernels read (bf16 matrices), at the paper's sampling
// settings with a KL term, under bf16 products and a bf16 KV cache.

// exactSets are the exact-mode settings of every run below.
var exactSets = []string{"precision.kv_cache=bf16", "precision.exact_logprobs=true", "sampling.temperature=0.6",
	"sampling.top_p=0.8", "sampling.top_k=20", "sampling.max_new_tokens=6", "loss.kl_coef=0.01"}

// exactZero checks that every step of run name has a mismatch of exactly
// 0 and, with the check (precision.exact_logprobs_check), compared some
// whole-vocabulary rows, all equal.
func exactZero(t *testing.T, task testfix.Task, name string, check bool) {
	t.Helper()
	m := testfix.Metrics(t, filepath.Join(task.Dir, name))
	if len(m) == 0 {
		t.Fatalf("%s: no metrics lines", name)
	}
	for s, l := range m {
		for _, k := range []string{"mismatch_logp_abs_max", "mismatch_logp_abs_mean", "mismatch_kl"} {
			if l[k] != 0.0 {
				t.Errorf("%s, step %d: %s = %v, want exactly 0", name, s+1, k, l[k])
			}
		}
		if rows, _ := l["vocab_rows_checked"].(float64); check && (rows < 1 || l["mismatch_vocab_rows"] != 0.0) {
			t.Errorf("%s, step %d: the full-distribution check compared %v rows, %v differ (want > 0 and exactly 0)", name, s+1, l["vocab_rows_checked"], l["mismatch_vocab_rows"])
		}
	}
}

// sameMoments checks that the final checkpoints of runs want and got
// hold the same AdamW moments, bit for bit (sameTrajectory compares the
// rest).
func sameMoments(t *testing.T, what string, task testfix.Task, want, got string) {
	t.Helper()
	a, _, _ := checkpoint.Latest(filepath.Join(task.Dir, want, "checkpoints"))
	b, _, _ := checkpoint.Latest(filepath.Join(task.Dir, got, "checkpoints"))
	w := testfix.LoadWeights(t, a)
	if !reflect.DeepEqual(testfix.LoadMoments(t, a, w), testfix.LoadMoments(t, b, w)) {
		t.Errorf("%s: the AdamW moments differ", what)
	}
}

// TestExactDataParallelOnEmulator: two training ranks (processes) in exact
// mode. Under ZeRO-1 (sharded masters, the default: the matrices bf16
// only) a run that skips the π_old forward is the reference; the same run
// with precision.exact_logprobs_check, stopped after step 1 and resumed,
// equals it bit for bit (metrics, final weights and moments), every step
// of it checked: the π_old forward matches the sampler's log-probs and
// vocabulary digests bit for bit on both ranks (the check stops the run
// otherwise), the mismatch is exactly 0. LoRA adapters over an fp8 KV
// cache, checked, have a mismatch of exactly 0 on both ranks too (the
// training forward reads the quantised keys and values the sampler
// wrote). ZeRO-2 in exact mode is TestExactLogProbsRun's (CPU): it changes
// only how gradients are reduced, which exact mode does not touch
// (TestShardedMastersOnEmulator covers that reduction here). ZeRO-0 (the whole fp32 policy
// replicated, the kernels reading its bf16 copies; gradients all-reduced)
// adds the gradient norm's float64 squares by whole tensors where ZeRO-1
// adds each rank's shards and then the ranks (optim.GradNorm against
// ClipShardGradNorm), so its grad_norm may differ from ZeRO-1's in the last
// bit: its checked run is compared with its own run that skips the π_old
// forward. Under -short ZeRO-1 alone.
func TestExactDataParallelOnEmulator(t *testing.T) {
	needNCCL(t, 2)
	task := testfix.TinyTask(t)
	run := func(name, resume string, sets ...string) {
		t.Helper()
		start := time.Now()
		runRanks(t, []string{"dp-masters", "dp-masters"}, 2*time.Minute, dpTaskEnv+"="+task.Dir, mastersRunEnv+"="+name,
			mastersResumeEnv+"="+resume, mastersSetsEnv+"="+strings.Join(append(append([]string{}, exactSets...), sets...), "\n"))
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: %.1f s", name, time.Since(start).Seconds())
	}
	run("exact-zero1", "")
	exactZero(t, task, "exact-zero1", false)
	check := "precision.exact_logprobs_check=true"
	run("exact-resumed", "", check, "train.steps=1")
	run("exact-resumed", "auto", check)
	exactZero(t, task, "exact-resumed", true)
	what := "ZeRO-1, checked, resumed after step 1 against the π_old forward skipped"
	sameTrajectory(t, what, task, "exact-zero1", "exact-resumed")
	sameMoments(t, what, task, "exact-zero1", "exact-resumed")
	if testing.Short() {
		return
	}
	run("exact-lora-fp8", "", check, "lora.rank=4", "lora.alpha=8", "precision.kv_cache=fp8")
	exactZero(t, task, "exact-lora-fp8", true)
	run("exact-zero0-skip", "", "dist.zero_stage=0")
	exactZero(t, task, "exact-zero0-skip", false)
	run("exact-zero0", "", check, "dist.zero_stage=0")
	exactZero(t, task, "exact-zero0", true)
	what = "ZeRO-0, checked, against exact-zero0-skip, the π_old forward skipped"
	sameTrajectory(t, what, task, "exact-zero0-skip", "exact-zero0")
	sameMoments(t, what, task, "exact-zero0-skip", "exact-zero0")
}

// TestExactGenerationRanksOnEmulator: one training and one generation rank
// in exact mode at train.max_off_policy_steps 0 train bit for bit as one
// process, with a mismatch of exactly 0 at every step. Each step sends the
// weights through the emulator's NCCL as the kernels read them (the bf16
// payload of TestAsyncOnEmulator; the generation rank's matrices are bf16
// only), and precision.exact_logprobs_check is on in both runs: the
// training rank's π_old forward matches every log-prob and vocabulary
// digest the generation rank sent (the digests were not sent before:
// "0 sampler vocabulary digests" at step 1).
func TestExactGenerationRanksOnEmulator(t *testing.T) {
	needNCCL(t, 2)
	task := testfix.TinyTask(t)
	sets := append(append([]string{}, exactSets...), "precision.exact_logprobs_check=true")
	start := time.Now()
	asyncRun(t, task, "", nil, append([]string{"run.name=exact-one"}, sets...))
	t.Logf("one process: %.1f s", time.Since(start).Seconds())
	full := syncBytes(t, task, nil)
	for i, l := range runAsyncRanks(t, task, "exact-gen", sets...) {
		if l["weight_sync_bytes"] != float64(full) {
			t.Errorf("step %d sent %v bytes of weights, want %d (the matrices in bf16, the rest float32)", i+1, l["weight_sync_bytes"], full)
		}
	}
	exactZero(t, task, "exact-one", true)
	exactZero(t, task, "exact-gen", true)
	sameTrajectory(t, "exact mode, 1 training + 1 generation rank against one process", task, "exact-one", "exact-gen")
}
