package cuda_test

// precision.exact_logprobs on the CUDA backend (docs/algorithm.md §5.10):
// the sampler's decode and the training forward run batch-invariant
// products, one attention kernel and the training forward reads its keys
// and values in the cache's format, so the sampler's log-probs are π_old
// bit for bit. precision.exact_logprobs_check still runs the π_old forward
// and stops the run on any differing bit, so each run below passing is the
// claim; the metrics must show a mismatch of exactly 0, and the losses
// equal those of the run that skips the π_old forward. With fp32, bf16
// and fp8 caches, and LoRA adapters (a frozen bf16 base).

import (
	"testing"

	"github.com/gdrotrain/gdrotrain/cuda"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

func TestExactLogProbsCUDA(t *testing.T) {
	cuda.OpenTestDevice(t)
	paper := []string{"run.device=cuda", "train.steps=2", "precision.exact_logprobs=true", "sampling.temperature=0.6",
		"sampling.top_p=0.8", "sampling.top_k=20", "sampling.max_new_tokens=6"}
	cases := []struct {
		name string
		sets []string
	}{
		{"fp32", []string{"precision.matmul=fp32", "precision.kv_cache=fp32"}},
		{"bf16", []string{"precision.matmul=bf16", "precision.kv_cache=bf16"}},
		{"fp8", []string{"precision.matmul=bf16", "precision.kv_cache=fp8"}},
		{"lora", []string{"precision.matmul=bf16", "precision.kv_cache=bf16", "lora.rank=4", "lora.alpha=8"}},
	}
	if testing.Short() {
		cases = cases[1:2]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [2][]map[string]any
			for k, check := range []string{"true", "false"} {
				sets := append(append(append([]string{}, fixture(t)...), paper...), c.sets...)
				sets = append(sets, "run.name=exact-"+c.name+"-"+check, "precision.exact_logprobs_check="+check)
				got[k] = testfix.Metrics(t, run(t, sets, ""))
			}
			for s := range got[0] {
				a, b := got[0][s], got[1][s]
				for _, key := range []string{"mismatch_logp_abs_max", "mismatch_kl"} {
					if a[key] != 0.0 || b[key] != 0.0 {
						t.Errorf("step %d: %s = %v (π_old forward) and %v, want exactly 0", s+1, key, a[key], b[key])
					}
				}
				for _, key := range []string{"policy_loss", "kl", "entropy", "grad_norm", "reward_mean"} {
					if a[key] == nil || a[key] != b[key] {
						t.Errorf("step %d: %s = %v with the π_old forward, %v without", s+1, key, a[key], b[key])
					}
				}
			}
		})
	}
}
