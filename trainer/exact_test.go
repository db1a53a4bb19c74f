package trainer

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
)

// exactRunConfig is the fixture's run in exact mode at the paper's
// sampling settings, with a KL term (a reference forward beside the
// skipped π_old one) and micro-batches that split prompts.
func exactRunConfig(t *testing.T, task testfix.Task, name string, extra ...string) Config {
	t.Helper()
	cfg, err := LoadBytes(nil, "", append(append(task.Sets(), "train.steps=3", "checkpoint.every=0", "validation.every=0",
		"precision.exact_logprobs=true", "sampling.temperature=0.6", "sampling.top_p=0.8", "sampling.top_k=20",
		"sampling.max_new_tokens=6", "loss.kl_coef=0.01", "train.ppo_epochs=2"), extra...))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Run.Name = name
	return cfg
}

// TestExactLogProbsRun: a run in exact mode has a mismatch of exactly 0
// at every step, and its losses equal, bit for bit, those of the run that
// still computes π_old by a forward pass and checks every token's bits
// against the sampler's (precision.exact_logprobs_check, which stops the
// run on any difference); on one rank and on two (the rows, with the
// sampler's entropies, exchanged between ranks); with an fp32 KV cache
// and with the CPU's bf16 and fp8 caches (the training forward reads keys
// and values as the cache holds them, Model.ExactKV); with ZeRO-2 and with
// LoRA adapters.
func TestExactLogProbsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("twelve tiny runs")
	}
	task := testfix.TinyTask(t)
	for i, c := range []struct {
		ranks int
		kv    string
		extra []string
	}{{1, "fp32", nil}, {2, "fp32", nil}, {1, "bf16", nil}, {2, "fp8", nil},
		{2, "fp32", []string{"dist.zero_stage=2"}}, {1, "bf16", []string{"lora.rank=4", "lora.alpha=8"}}} {
		ranks := c.ranks
		var metrics [2][]map[string]any
		for k, check := range []string{"false", "true"} {
			sets := append([]string{"precision.exact_logprobs_check=" + check, "precision.kv_cache=" + c.kv}, c.extra...)
			cfg := exactRunConfig(t, task, fmt.Sprintf("exact-%s-%d", check, i), sets...)
			for r, err := range runRanks(t, cfg, ranks, "", nil, nil) {
				if err != nil {
					t.Fatalf("%d ranks, check %s, rank %d: %v", ranks, check, r, err)
				}
			}
			metrics[k] = readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))
		}
		if len(metrics[0]) != 3 || len(metrics[1]) != 3 {
			t.Fatalf("%d ranks: %d and %d metrics lines, want 3", ranks, len(metrics[0]), len(metrics[1]))
		}
		for s := range metrics[0] {
			a, b := metrics[0][s], metrics[1][s]
			for _, key := range []string{"mismatch_logp_abs_max", "mismatch_logp_abs_mean", "mismatch_kl"} {
				if a[key] != 0.0 || b[key] != 0.0 {
					t.Errorf("%d ranks, step %d: %s = %v and %v (with the check), want exactly 0", ranks, s+1, key, a[key], b[key])
				}
			}
			if b["mismatch_vocab_rows"] != 0.0 || b["vocab_rows_checked"] == nil || b["vocab_rows_checked"].(float64) < 1 || a["vocab_rows_checked"] != nil {
				t.Errorf("%d ranks, step %d: the full-distribution check compared %v rows (want > 0 with the check, none without: %v), %v differ (want exactly 0)",
					ranks, s+1, b["vocab_rows_checked"], a["vocab_rows_checked"], b["mismatch_vocab_rows"])
			}
			for _, key := range []string{"policy_loss", "kl", "ppo_kl", "entropy", "grad_norm", "reward_mean", "clip_frac"} {
				if a[key] == nil || a[key] != b[key] {
					t.Errorf("%d ranks, step %d: %s = %v, with the π_old forward %v", ranks, s+1, key, a[key], b[key])
				}
			}
		}
	}
}

// TestExactLogProbsConfig: exact mode is refused where it cannot hold.
func TestExactLogProbsConfig(t *testing.T) {
	task := testfix.TinyTask(t)
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"precision.exact_logprobs_check=true"}, "precision.exact_logprobs_check"},
		{[]string{"precision.exact_logprobs=true", "dist.rollout_ranks=1", "train.max_off_policy_steps=1", "loss.rollout_correction.mode=token_tis"}, "train.max_off_policy_steps to 0"},
	} {
		_, err := LoadBytes(nil, "", append(task.Sets(), c.sets...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.sets, err, c.want)
		}
	}
	// A backend that cannot be made batch-invariant (here the reference)
	// is refused at open, not run with a mismatch.
	cfg, err := LoadBytes(nil, "", append(task.Sets(), "precision.exact_logprobs=true"))
	if err != nil {
		t.Fatal(err)
	}
	notInvariant := func(string, string, func(string, ...any)) (model.Backend, error) { return model.NewReferenceCPU(), nil }
	if _, _, err := OpenBackend(cfg, notInvariant, t.Logf); err == nil || !strings.Contains(err.Error(), "needs a backend with batch-invariant kernels") {
		t.Errorf("open on a backend without exact mode: %v", err)
	}
	// The rollout correction is accepted at the paper's settings in exact
	// mode: the sampler's log-probs are the policy's.
	if _, err := LoadBytes(nil, "", append(task.Sets(), "precision.exact_logprobs=true", "sampling.temperature=0.6",
		"loss.rollout_correction.mode=token_tis")); err != nil {
		t.Error(err)
	}
}

// TestExactGenerationRanks: with generation ranks sampling on the
// trainer's weights (train.max_off_policy_steps 0), exact mode holds: the
// mismatch is exactly 0 at every step, and the run equals the one-process
// run bit for bit — the mismatch figures included, which outside exact
// mode differ with two generation ranks (they decode other batches, and
// the log-probs round otherwise; TestAsyncSyncMatchesOneProcess). With
// precision.exact_logprobs_check too: the generation ranks send each
// token's whole-vocabulary digest beside its log-prob, and the training
// rank's π_old forward matches both (the check once failed at step 1, the
// generation ranks sending no digests).
func TestExactGenerationRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("six tiny runs")
	}
	task := testfix.TinyTask(t)
	for _, check := range []string{"false", "true"} {
		cfg := exactRunConfig(t, task, "exact-one-"+check, "precision.exact_logprobs_check="+check)
		if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
			t.Fatal(errs[0])
		}
		want := stripKeys(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"), asyncKeys...)
		for _, gens := range []int{1, 2} {
			c := cfg
			c.Run.Name = fmt.Sprintf("exact-gens-%d-%s", gens, check)
			noErrs(t, runAsync(t, c, 1, gens, "", time.Minute, func(int, *Trainer) {}, nil))
			for s, m := range readLines(t, filepath.Join(c.RunDir(), "metrics.jsonl")) {
				if m["mismatch_logp_abs_max"] != 0.0 || m["mismatch_kl"] != 0.0 {
					t.Errorf("%d generation ranks, check %s, step %d: mismatch_logp_abs_max %v, mismatch_kl %v, want exactly 0", gens, check, s+1, m["mismatch_logp_abs_max"], m["mismatch_kl"])
				}
				if rows, _ := m["vocab_rows_checked"].(float64); check == "true" && (rows < 1 || m["mismatch_vocab_rows"] != 0.0) {
					t.Errorf("%d generation ranks, step %d: the full-distribution check compared %v rows, %v differ (want > 0 and exactly 0)", gens, s+1, m["vocab_rows_checked"], m["mismatch_vocab_rows"])
				}
			}
			if got := stripKeys(t, filepath.Join(c.RunDir(), "metrics.jsonl"), asyncKeys...); got != want {
				t.Errorf("%d generation ranks in exact mode, check %s: metrics differ from one process:\n%s\nvs\n%s", gens, check, got, want)
			}
		}
	}
}

// TestExactResume: a run in exact mode stopped after step 2 and resumed
// (checkpoint.every 1) equals the uninterrupted 3-step run bit for bit —
// every metrics line and the final checkpoint's weights and moments — and
// every step of both, the resumed ones included, checks the sampler's
// bits against the π_old forward (precision.exact_logprobs_check) with a
// mismatch of exactly 0: on one rank, on two (ZeRO-1, a bf16 KV cache)
// and with a generation rank sampling on the trainer's weights.
func TestExactResume(t *testing.T) {
	if testing.Short() {
		t.Skip("nine tiny runs")
	}
	task := testfix.TinyTask(t)
	for i, c := range []struct {
		trainers, gens int
		kv             string
	}{{1, 0, "fp32"}, {2, 0, "bf16"}, {1, 1, "fp32"}} {
		run := func(name string, steps int, resume string) Config {
			t.Helper()
			cfg := exactRunConfig(t, task, fmt.Sprintf("%s-%d", name, i), "precision.exact_logprobs_check=true",
				"precision.kv_cache="+c.kv, "checkpoint.every=1", fmt.Sprintf("train.steps=%d", steps))
			if c.gens > 0 {
				noErrs(t, runAsync(t, cfg, c.trainers, c.gens, resume, time.Minute, nil, nil))
				return cfg
			}
			for r, err := range runRanks(t, cfg, c.trainers, resume, nil, nil) {
				if err != nil {
					t.Fatalf("%d ranks, %s, rank %d: %v", c.trainers, name, r, err)
				}
			}
			return cfg
		}
		full := run("full", 3, "")
		run("part", 2, "")
		part := run("part", 3, "auto")
		what := fmt.Sprintf("%d training and %d generation ranks, %s cache", c.trainers, c.gens, c.kv)
		lines := readLines(t, filepath.Join(part.RunDir(), "metrics.jsonl"))
		if len(lines) != 3 {
			t.Fatalf("%s: the resumed run has %d metrics lines, want 3", what, len(lines))
		}
		for s, m := range lines {
			if m["mismatch_logp_abs_max"] != 0.0 || m["mismatch_kl"] != 0.0 || m["mismatch_vocab_rows"] != 0.0 {
				t.Errorf("%s, step %d: mismatch_logp_abs_max %v, mismatch_kl %v, mismatch_vocab_rows %v, want exactly 0",
					what, s+1, m["mismatch_logp_abs_max"], m["mismatch_kl"], m["mismatch_vocab_rows"])
			}
			if rows, _ := m["vocab_rows_checked"].(float64); rows < 1 {
				t.Errorf("%s, step %d: the full-distribution check compared %v rows, want > 0", what, s+1, m["vocab_rows_checked"])
			}
		}
		if a, b := stripTimes(t, filepath.Join(full.RunDir(), "metrics.jsonl")), stripTimes(t, filepath.Join(part.RunDir(), "metrics.jsonl")); a != b {
			t.Errorf("%s: the resumed run's metrics differ from the uninterrupted run's:\n%s\nvs\n%s", what, b, a)
		}
		sameWeights(t, full.RunDir(), part.RunDir())
	}
}
