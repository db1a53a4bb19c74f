package trainer

// Generation ranks (async.go) on the CPU backend, every rank a goroutine
// joined by loopback TCP as in dp_test.go: with train.max_off_policy_steps
// 0 the run is the synchronous run bit for bit; with 1 it is deterministic
// and a run resumed from a checkpoint with rollouts in flight equals one
// that never stopped, bit for bit; every row's weight version is checked;
// a generation rank that dies or hangs fails the run, named, within
// dist.timeout_s, and leaves the last checkpoint intact.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/grpo"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/reward"
)

// runAsync runs cfg on trainers training ranks and gens generation ranks
// and returns each world rank's Run error. prep prepares each training
// rank's trainer; hook, when set, is generation rank r's onWork.
func runAsync(t *testing.T, cfg Config, trainers, gens int, resume string, timeout time.Duration,
	prep func(r int, tr *Trainer), hook func(r int) func(step int) error) []error {
	t.Helper()
	return runAsyncScored(t, cfg, trainers, gens, resume, timeout, prep, hook, testfix.Parity{})
}

// runAsyncScored is runAsync with the generation ranks' scorer.
func runAsyncScored(t *testing.T, cfg Config, trainers, gens int, resume string, timeout time.Duration,
	prep func(r int, tr *Trainer), hook func(r int) func(step int) error, scorer reward.Scorer) []error {
	t.Helper()
	cfg.Dist.RolloutRanks = gens
	world, err := dist.Loopback(trainers+gens, timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range world {
			g.Close()
		}
	})
	var tg []*dist.Group
	if trainers > 1 {
		tg = groups(t, trainers)
	}
	errs := make([]error, trainers+gens)
	var wg sync.WaitGroup
	for r := range trainers + gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r >= trainers {
				g, err := OpenGenerator(cfg, io.Discard, Options{Dist: &Dist{World: world[r]}, Scorer: scorer})
				if err != nil {
					errs[r] = fmt.Errorf("open generator: %w", err)
					world[r].Close()
					return
				}
				defer g.Close()
				if hook != nil {
					g.onWork = hook(r)
				}
				errs[r] = g.Run(context.Background())
				return
			}
			d := &Dist{World: world[r]}
			if tg != nil {
				d.Group = tg[r]
			}
			tr, err := Open(cfg, io.Discard, Options{Resume: resume, Dist: d})
			if err != nil {
				errs[r] = fmt.Errorf("open: %w", err)
				world[r].Close()
				if tg != nil {
					tg[r].Close()
				}
				return
			}
			defer tr.Close()
			parity(tr)
			if prep != nil {
				prep(r, tr)
			}
			errs[r] = tr.Run(context.Background())
		}()
	}
	wg.Wait()
	return errs
}

func noErrs(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// asyncKeys are the generation ranks' fields; mismatchKeys the figures of
// the sampler's log-probs.
var asyncKeys, mismatchKeys = []string{"weight_version", "off_policy_steps", "weight_sync_bytes"},
	[]string{"mismatch_kl", "mismatch_logp_abs_max", "mismatch_logp_abs_mean", "mismatch_seq_log_ratio_abs_max", "mismatch_seq_log_ratio_mean"}

// stripKeys is stripTimes without keys.
func stripKeys(t *testing.T, path string, keys ...string) string {
	t.Helper()
	s := stripTimes(t, path)
	var out []string
	for _, line := range strings.Split(s, "\n") {
		for _, k := range keys {
			if i := strings.Index(line, `"`+k+`":`); i >= 0 {
				j := i + len(k) + 3
				for j < len(line) && line[j] != ',' && line[j] != '}' {
					j++
				}
				if line[j] == ',' {
					j++
				}
				line = line[:i] + line[j:]
			}
		}
		out = append(out, strings.Replace(line, ",}", "}", 1))
	}
	return strings.Join(out, "\n")
}

// sameWeights checks that two runs' last checkpoints hold bitwise equal
// weights and moments.
func sameWeights(t *testing.T, wantRun, gotRun string) {
	t.Helper()
	want, got := lastCheckpoint(t, wantRun), lastCheckpoint(t, gotRun)
	files, _ := filepath.Glob(filepath.Join(want, "*.safetensors"))
	if len(files) == 0 {
		t.Fatalf("%s: no safetensors", want)
	}
	for _, f := range files {
		a, err1 := os.ReadFile(f)
		b, err2 := os.ReadFile(filepath.Join(got, filepath.Base(f)))
		if err1 != nil || err2 != nil {
			t.Fatalf("%v %v", err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between %s and %s", filepath.Base(f), want, got)
		}
	}
}

func TestAsyncSyncMatchesOneProcess(t *testing.T) {
	cfg := dpConfigs(t)["rollout_gdro"]
	cfg.Run.Name = "sync"
	if errs := runRanks(t, cfg, 1, "", nil, primeClasses); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for _, tc := range []struct{ trainers, gens int }{{1, 1}, {1, 2}} {
		c := cfg
		c.Run.Name = fmt.Sprintf("async-%d-%d", tc.trainers, tc.gens)
		noErrs(t, runAsync(t, c, tc.trainers, tc.gens, "", time.Minute, primeClasses, nil))
		// Two generation ranks decode other batches than one process: the
		// same tokens (every draw is keyed by step, prompt and rollout
		// index), but the sampler's log-probs round otherwise, so only the
		// mismatch figures, which measure them, may differ (the correction
		// is off: they change nothing else).
		keys := asyncKeys
		if tc.gens > 1 {
			keys = append(keys, mismatchKeys...)
		}
		want, got := stripKeys(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"), keys...), stripKeys(t, filepath.Join(c.RunDir(), "metrics.jsonl"), keys...)
		if want != got {
			t.Errorf("%d training + %d generation ranks at max_off_policy_steps 0: metrics differ from one process:\n%s\nvs\n%s", tc.trainers, tc.gens, want, got)
		}
		sameWeights(t, cfg.RunDir(), c.RunDir())
		for i, m := range readLines(t, filepath.Join(c.RunDir(), "metrics.jsonl")) {
			if m["weight_version"] != float64(i) || m["off_policy_steps"] != 0.0 {
				t.Errorf("step %d: weight_version %v off_policy_steps %v, want %d and 0", i+1, m["weight_version"], m["off_policy_steps"], i)
			}
		}
	}
}

// offPolicyConfig is the Rollout-GDRO run one step off-policy.
func offPolicyConfig(t *testing.T, name string, steps int) Config {
	cfg := dpConfigs(t)["rollout_gdro"]
	cfg.Run.Name = name
	cfg.Train.Steps = steps
	cfg.Train.MaxOffPolicySteps = 1
	cfg.Loss.RolloutCorrection.Mode = grpo.CorrectTokenTIS
	cfg.Checkpoint.Every = 1
	return cfg
}

func TestAsyncOneStepOffResume(t *testing.T) {
	full := offPolicyConfig(t, "full", 4)
	noErrs(t, runAsync(t, full, 2, 1, "", time.Minute, primeClasses, nil))
	lines := readLines(t, filepath.Join(full.RunDir(), "metrics.jsonl"))
	for i, m := range lines {
		wantV, wantLag := max(0, i-1), min(i, 1)
		if m["weight_version"] != float64(wantV) || m["off_policy_steps"] != float64(wantLag) {
			t.Errorf("step %d: weight_version %v off_policy_steps %v, want %d and %d", i+1, m["weight_version"], m["off_policy_steps"], wantV, wantLag)
		}
	}
	// Step t's exchange sends step t+1's plan with the weights of step
	// t−1: version 0 again at step 1 (the generation ranks hold it since
	// the start), none at the last step (its plan waits in the checkpoint).
	for i, want := range []bool{false, true, true, false} {
		if b := lines[i]["weight_sync_bytes"].(float64); (b > 0) != want {
			t.Errorf("step %d sent %v bytes of weights, want some: %v", i+1, b, want)
		}
	}

	// The same run again: deterministic.
	again := offPolicyConfig(t, "again", 4)
	noErrs(t, runAsync(t, again, 2, 1, "", time.Minute, primeClasses, nil))
	if a, b := stripTimes(t, filepath.Join(full.RunDir(), "metrics.jsonl")), stripTimes(t, filepath.Join(again.RunDir(), "metrics.jsonl")); a != b {
		t.Errorf("two runs one step off-policy differ:\n%s\nvs\n%s", a, b)
	}
	sameWeights(t, full.RunDir(), again.RunDir())

	// Stopped after step 2 with step 3 planned and its weights (version 1)
	// in the checkpoint; resumed on fresh ranks (the same layout: other
	// training ranks add the gradients in another order, other generation
	// ranks decode other batches, whose sampler log-probs feed the
	// correction).
	part := offPolicyConfig(t, "part", 2)
	noErrs(t, runAsync(t, part, 2, 1, "", time.Minute, primeClasses, nil))
	if _, err := os.Stat(filepath.Join(lastCheckpoint(t, part.RunDir()), rolloutWeightsFile)); err != nil {
		t.Fatalf("the checkpoint lacks the weights of the rollouts in flight: %v", err)
	}
	resumed := part
	resumed.Train.Steps = 4
	noErrs(t, runAsync(t, resumed, 2, 1, "auto", time.Minute, nil, nil))
	// Only the weight bytes sent differ: the stopped run kept step 3's
	// weights in its checkpoint, and its resumption sent them at its start.
	if a, b := stripKeys(t, filepath.Join(full.RunDir(), "metrics.jsonl"), "weight_sync_bytes"), stripKeys(t, filepath.Join(part.RunDir(), "metrics.jsonl"), "weight_sync_bytes"); a != b {
		t.Errorf("the resumed run differs from the uninterrupted one:\n%s\nvs\n%s", a, b)
	}
	sameWeights(t, full.RunDir(), part.RunDir())
}

// nothingSolved scores every response incorrect: every group has equal
// rewards, so a step has no gradient and leaves the weights as they were.
type nothingSolved struct{}

func (nothingSolved) Mode() reward.Mode { return reward.ModeDAPO }
func (nothingSolved) Score(string, string) reward.Result {
	return reward.Result{Score: -1, Status: reward.StatusOK}
}

// TestAsyncUnchangedWeights: a step that leaves the weights unchanged
// (no correct rollout: no gradient) makes the next version's hash the one
// the generation rank holds, so rank 0 sends no weights; the generation
// rank takes the new version number without a transfer (issue 44: it
// refused, "holds the weights of version 0 …; step 2 asks for version 1"
// with the same sha256), on 2 training ranks and 1 generation rank, at
// either max_off_policy_steps.
func TestAsyncUnchangedWeights(t *testing.T) {
	for _, k := range []int{0, 1} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			cfg := offPolicyConfig(t, fmt.Sprintf("unchanged-k%d", k), 3)
			cfg.Train.MaxOffPolicySteps = k
			// Nothing else moves the weights: no KL term (its gradient is
			// a rounding difference from the reference), no decay.
			cfg.Loss.KLCoef, cfg.GDRO.Prompt.KLCoef, cfg.Optim.WeightDecay = 0, 0, 0
			unsolved := func(r int, tr *Trainer) {
				for src := range tr.scorers {
					tr.scorers[src] = reward.Counted{Scorer: nothingSolved{}, M: &tr.rmet}
				}
			}
			noErrs(t, runAsyncScored(t, cfg, 2, 1, "", time.Minute, unsolved, nil, nothingSolved{}))
			lines := readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))
			if len(lines) != 3 {
				t.Fatalf("%d steps logged, want 3", len(lines))
			}
			for i, m := range lines {
				if m["acc_mean"] != 0.0 {
					t.Errorf("step %d: acc_mean %v, want 0 (nothing solved)", i+1, m["acc_mean"])
				}
				if want := float64(max(0, i-k)); m["weight_version"] != want {
					t.Errorf("step %d: weight_version %v, want %v", i+1, m["weight_version"], want)
				}
			}
			// Only the first version travelled: later ones have its hash.
			if b := lines[len(lines)-1]["weight_sync_bytes"]; b != 0.0 {
				t.Errorf("last step: weight_sync_bytes %v, want 0 (the weights did not change)", b)
			}
		})
	}
}

func TestAsyncGenerationRankFails(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		hook       func(step int) error
	}{
		{"dies", "rank 1 closed the connection", func(step int) error {
			if step == 3 {
				return errors.New("killed")
			}
			return nil
		}},
		{"hangs", "rank 1 did not answer within 5s", func(step int) error {
			if step == 3 {
				time.Sleep(8 * time.Second)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := offPolicyConfig(t, tc.name, 4)
			errs := runAsync(t, cfg, 1, 1, "", 5*time.Second, nil, func(int) func(int) error { return tc.hook })
			err := errs[0]
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "generation rank 1") {
				t.Fatalf("training rank 0: got %v, want an error naming the generation rank (%q)", err, tc.want)
			}
			t.Log(err)
			last := lastCheckpoint(t, cfg.RunDir())
			if _, err := checkpoint.Verify(last); err != nil {
				t.Errorf("the last checkpoint %s: %v", last, err)
			}
			if filepath.Base(last) != checkpoint.Name(1) && filepath.Base(last) != checkpoint.Name(2) {
				t.Errorf("last checkpoint %s, want step 1 or 2", last)
			}
		})
	}
}

func TestAsyncConfigRules(t *testing.T) {
	base := dpConfigs(t)["prompt_gdro"]
	for _, tc := range []struct {
		name, want string
		set        func(c *Config)
	}{
		{"k=2", "more is not built", func(c *Config) { c.Dist.RolloutRanks, c.Train.MaxOffPolicySteps = 1, 2 }},
		{"k=1 without generation ranks", "set dist.rollout_ranks", func(c *Config) { c.Train.MaxOffPolicySteps = 1 }},
		{"k=1 uncorrected", "loss.rollout_correction.mode", func(c *Config) { c.Dist.RolloutRanks, c.Train.MaxOffPolicySteps = 1, 1 }},
		{"dynamic sampling", "dynamic_sampling", func(c *Config) { c.Dist.RolloutRanks, c.Train.DynamicSampling.Enabled = 1, true }},
	} {
		c := base
		tc.set(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error about %q", tc.name, err, tc.want)
		}
	}
	ok := base
	ok.Dist.RolloutRanks, ok.Train.MaxOffPolicySteps, ok.Loss.RolloutCorrection.Mode = 1, 1, grpo.CorrectTokenTIS
	if err := ok.Validate(); err != nil {
		t.Errorf("one step off-policy with token_tis: %v", err)
	}
}

// TestAsyncLoRA: with LoRA the weight sync sends the adapters alone (their
// fp32 bytes per new version), and one training plus one generation rank
// at max_off_policy_steps 0 end bitwise where one process does.
func TestAsyncLoRA(t *testing.T) {
	cfg := dpConfigs(t)["rollout_gdro"]
	cfg.LoRA.Rank, cfg.LoRA.Alpha, cfg.Optim.LR = 4, 8, 1e-2
	cfg.Run.Name = "one"
	if errs := runRanks(t, cfg, 1, "", nil, primeClasses); errs[0] != nil {
		t.Fatal(errs[0])
	}
	c := cfg
	c.Run.Name = "async"
	noErrs(t, runAsync(t, c, 1, 1, "", time.Minute, primeClasses, nil))
	if want, got := stripKeys(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"), asyncKeys...), stripKeys(t, filepath.Join(c.RunDir(), "metrics.jsonl"), asyncKeys...); want != got {
		t.Errorf("LoRA, 1 training + 1 generation rank: metrics differ from one process:\n%s\nvs\n%s", want, got)
	}
	sameWeights(t, cfg.RunDir(), c.RunDir())
	mc, err := model.LoadConfig(cfg.Model.Path)
	if err != nil {
		t.Fatal(err)
	}
	adapters := 0
	for _, np := range model.AdapterShapes(mc, cfg.LoRA.Model()) {
		adapters += 4 * np.Shape[0] * np.Shape[1]
	}
	for i, m := range readLines(t, filepath.Join(c.RunDir(), "metrics.jsonl")) {
		if b := m["weight_sync_bytes"].(float64); b != 0 && b != float64(adapters) {
			t.Errorf("step %d sent %v bytes of weights; the adapters are %d", i+1, b, adapters)
		}
	}
}
