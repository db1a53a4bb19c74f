package trainer

// Tests of the options of docs/algorithm.md §5.10–5.12 and §9.2: rollout
// correction, overlong handling, dynamic sampling and the validation
// figures, each against a hand-derived table or an independent
// computation (finite differences, enumeration).

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/data"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/reward"
)

// TestFirstKAny: the reference's figure from the first correct sample's
// position (1-based; 0 none).
func TestFirstKAny(t *testing.T) {
	first := []int{1, 3, 0, 2, 8}
	for k, want := range map[int]float64{1: 0.2, 2: 0.4, 4: 0.6, 8: 0.8} {
		if got := firstKAny(first, k); math.Abs(got-want) > 1e-15 {
			t.Errorf("first_k_any@%d = %v, want %v", k, got, want)
		}
	}
}

// TestKeepGroups: dynamic sampling keeps the first prompts_per_step
// groups whose rewards (with the overlong penalty) differ, in order.
func TestKeepGroups(t *testing.T) {
	score := func(p int, s ...float64) []rowData {
		var out []rowData
		for _, x := range s {
			out = append(out, rowData{prompt: p, result: reward.Result{Score: x}})
		}
		return out
	}
	var rows []rowData
	rows = append(rows, score(0, 1, 1)...)       // all equal: dropped
	rows = append(rows, score(1, 1, -1)...)      // kept
	rows = append(rows, score(2, -1, -1, -1)...) // dropped
	pen := score(3, 1, 1)                        // equal scores, unequal penalties: kept
	pen[1].penalty = -0.5
	rows = append(rows, pen...)
	rows = append(rows, score(4, -1, 1)...) // informative, beyond prompts_per_step
	tr := &Trainer{Cfg: Default()}
	tr.Cfg.Train.PromptsPerStep = 2
	tr.Cfg.Train.DynamicSampling = DynamicSamplingConfig{Enabled: true, MaxRounds: 3}
	b := stepBatch{prompts: make([]data.Prompt, 5), rows: rows, rounds: 2}
	met := &StepMetrics{}
	keep := tr.keepGroups(b, met)
	if len(keep) != 2 || keep[0] != 1 || keep[1] != 3 {
		t.Fatalf("kept %v, want [1 3]", keep)
	}
	dm := met.DynamicSamplingMetrics
	if dm.KeptRows != 4 || dm.GeneratedRows != 11 || dm.ZeroVarianceGroups != 2 || dm.Rounds != 2 || math.Abs(dm.Oversampling-11.0/4) > 1e-15 {
		t.Errorf("metrics %+v", dm)
	}
	kept, rowOf := keptRows(b, keep)
	if len(kept) != 4 || rowOf[2] != 0 || rowOf[8] != 3 || rowOf[0] != -1 || rowOf[10] != -1 {
		t.Errorf("kept rows %d, index map %v", len(kept), rowOf)
	}
}

// dsConfig is a Prompt-GDRO run of the tiny task with dynamic sampling and
// the other options on, scored by parity (some groups equal, some not).
func dsConfig(t *testing.T, extra ...string) Config {
	task := testfix.TinyTask(t)
	cfg, err := LoadBytes(nil, "", append(append(task.Sets(), "train.steps=4", "checkpoint.every=1", "validation.every=0",
		"train.dynamic_sampling.enabled=true", "train.dynamic_sampling.max_rounds=3", "gdro.rollout.n_mean=3",
		"sampling.max_new_tokens=6", "loss.overlong.filter=true", "loss.overlong.soft_penalty_tokens=2",
		"loss.rollout_correction.mode=token_tis"), extra...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDynamicSamplingRun: a run with dynamic sampling, overlong handling
// and the correction on trains only on informative groups, reports what it
// did, and a run resumed from its step-2 checkpoint ends bitwise where the
// uninterrupted one does.
func TestDynamicSamplingRun(t *testing.T) {
	if testing.Short() {
		t.Skip("three tiny runs")
	}
	cfg := dsConfig(t)
	cfg.Run.Name = "straight"
	if errs := runRanks(t, cfg, 1, "", nil, func(_ int, tr *Trainer) { parity(tr) }); errs[0] != nil {
		t.Fatal(errs[0])
	}
	lines := readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))
	rounds := 0.0
	for _, m := range lines {
		for _, k := range []string{"ds_kept_prompts", "ds_generated_rows", "ds_oversampling", "mismatch_kl", "is_weight_mean", "overlong_filtered_frac"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("step %v: no %s in %v", m["step"], k, m)
			}
		}
		kept, gen := m["ds_kept_rows"].(float64), m["ds_generated_rows"].(float64)
		if kept > gen || m["ds_kept_prompts"].(float64) > 4 || (m["ds_cap_hit"] == false && m["ds_kept_prompts"].(float64) != 4) {
			t.Errorf("step %v: kept %v of %v rows, %v prompts, cap hit %v", m["step"], kept, gen, m["ds_kept_prompts"], m["ds_cap_hit"])
		}
		rounds += m["ds_rounds"].(float64)
		// The CPU sampler and trainer share kernels: the mismatch is rounding.
		if d := m["mismatch_logp_abs_max"].(float64); d > 1e-3 {
			t.Errorf("step %v: sampler/trainer log-probs differ by %v on the CPU", m["step"], d)
		}
	}
	if rounds <= float64(len(lines)) {
		t.Logf("no step needed a second round (%v rounds in %d steps)", rounds, len(lines))
	}

	// Resume from step 2 in another folder: the same end, bitwise.
	half := cfg
	half.Run.Name, half.Train.Steps = "half", 2
	if errs := runRanks(t, half, 1, "", nil, func(_ int, tr *Trainer) { parity(tr) }); errs[0] != nil {
		t.Fatal(errs[0])
	}
	half.Train.Steps = 4
	if errs := runRanks(t, half, 1, "auto", nil, func(_ int, tr *Trainer) { parity(tr) }); errs[0] != nil {
		t.Fatal(errs[0])
	}
	a, _ := os.ReadFile(filepath.Join(cfg.RunDir(), "metrics.jsonl"))
	b, _ := os.ReadFile(filepath.Join(half.RunDir(), "metrics.jsonl"))
	if x, y := stripTimes(t, filepath.Join(cfg.RunDir(), "metrics.jsonl")), stripTimes(t, filepath.Join(half.RunDir(), "metrics.jsonl")); x != y {
		t.Errorf("resumed metrics differ:\n%s\n%s", x, y)
	}
	if len(a) == 0 || len(b) == 0 {
		t.Fatal("empty metrics")
	}
	w1 := testfix.LoadWeights(t, lastCheckpoint(t, cfg.RunDir()))
	w2 := testfix.LoadWeights(t, lastCheckpoint(t, half.RunDir()))
	for name, x := range w1 {
		for i := range x {
			if x[i] != w2[name][i] {
				t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", name, i, x[i], w2[name][i])
			}
		}
	}
}

// TestDynamicSamplingDataParallel: two ranks equal one process with the
// options on (rows, their sampler log-probs and mismatch figures cross
// the exchange).
func TestDynamicSamplingDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("three tiny runs")
	}
	cfg := dsConfig(t, "dist.state_check_every=1", "checkpoint.every=0")
	cfg.Run.Name = "one"
	if errs := runRanks(t, cfg, 1, "", nil, func(_ int, tr *Trainer) { parity(tr) }); errs[0] != nil {
		t.Fatal(errs[0])
	}
	oneDir := cfg.RunDir()
	cfg.Run.Name = "two"
	for r, err := range runRanks(t, cfg, 2, "", nil, func(_ int, tr *Trainer) { parity(tr) }) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	sameWithin(t, cfg.Model.Path, oneDir, cfg.RunDir(), cfg.Train.Steps, 0)
}

// TestRLOptionRules: the options refuse the combinations they cannot serve.
func TestRLOptionRules(t *testing.T) {
	task := testfix.TinyTask(t)
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"loss.rollout_correction.mode=token_tis", "sampling.temperature=0.7"}, "sampling.temperature 1"},
		{[]string{"loss.rollout_correction.mode=seq_mis", "sampling.top_k=20"}, "sampling.temperature 1"},
		{[]string{"loss.overlong.soft_penalty_tokens=4", "sampling.max_new_tokens=4"}, "soft_penalty_tokens"},
		{[]string{"train.dynamic_sampling.enabled=true", "gdro.prompt.signal=surrogate_kl"}, "surrogate_kl"},
		{[]string{"train.dynamic_sampling.enabled=true", "train.method=rollout_gdro", "gdro.rollout.mode=reference_compat"}, "reference_compat"},
		{[]string{"train.dynamic_sampling.max_rounds=0"}, "max_rounds"},
	} {
		_, err := LoadBytes(nil, "", append(task.Sets(), c.sets...))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.sets, err, c.want)
		}
	}
	// The defaults change nothing.
	d := Default()
	if d.Loss.RolloutCorrection.Corrects() || d.Loss.Overlong.Filter || d.Loss.Overlong.SoftPenaltyTokens != 0 || d.Train.DynamicSampling.Enabled {
		t.Error("a default turns an option on")
	}
}

func lastCheckpoint(t *testing.T, run string) string {
	t.Helper()
	last, _, _ := checkpoint.Latest(filepath.Join(run, "checkpoints"))
	if last == "" {
		t.Fatalf("%s: no checkpoint", run)
	}
	return last
}
