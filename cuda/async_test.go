package cuda

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/model"
	"github.com/gdrotrain/gdrotrain/trainer"
)

// Generation ranks on the emulator (trainer/async.go, nccl_weights.go):
// one training rank and one generation rank, processes of their own, the
// weights broadcast after each step through the emulator's NCCL on a
// communicator of training rank 0 and the generation rank, under bf16
// products (so the matrices travel as bf16, the embedding and norms as
// float32). Each run is the tiny task for 2–3 steps.

// asyncSetsEnv passes a worker its run's config overrides (one per line).
const asyncSetsEnv = "GDROTRAIN_TEST_ASYNC_SETS"

// asyncRun trains (or, role "async-gen", generates for) the tiny task's
// run under bf16 products on this process's emulated GPU, as rank of the
// world g (nil: one process alone). One training rank only. A set
// "resume=X" is Options.Resume.
func asyncRun(t *testing.T, task testfix.Task, role string, g *dist.Group, sets []string) {
	t.Helper()
	all := append(task.Sets(), "run.device=cuda", "precision.matmul=bf16",
		"validation.every=0", "checkpoint.every=0", "dist.timeout_s=120")
	resume := ""
	for _, kv := range sets {
		if r, ok := strings.CutPrefix(kv, "resume="); ok {
			resume = r
		} else if kv != "" {
			all = append(all, kv)
		}
	}
	cfg, err := trainer.LoadBytes(nil, "", all)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(testDevice(t), BF16)
	o := trainer.Options{Scorer: testfix.Parity{}, Resume: resume,
		Backend: func(string, string, func(string, ...any)) (model.Backend, error) { return b, nil }}
	if g != nil {
		o.Dist = &trainer.Dist{World: g, NewWeightLink: func(model.Backend) (trainer.WeightLink, error) {
			l, err := OpenWeightLink(b, g, 1, 120*time.Second)
			if err != nil || l == nil {
				return nil, err
			}
			return l, nil
		}}
	}
	if role == "async-gen" {
		gen, err := trainer.OpenGenerator(cfg, io.Discard, o)
		if err != nil {
			g.Close()
			t.Fatal(err)
		}
		defer gen.Close()
		if err := gen.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	tr, err := trainer.Open(cfg, io.Discard, o)
	if err != nil {
		if g != nil {
			g.Close()
		}
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func asyncWorker(t *testing.T, role string, rank, world, port int) {
	task, g := dpWorker(t, rank, world, port)
	asyncRun(t, task, role, g, strings.Split(os.Getenv(asyncSetsEnv), "\n"))
	t.Logf("world rank %d of %d (%s): done", rank, world, role)
}

// runAsyncRanks runs the tiny task's run name on one training and one
// generation rank and returns its metrics.
func runAsyncRanks(t *testing.T, task testfix.Task, name string, sets ...string) []map[string]any {
	t.Helper()
	sets = append([]string{"run.name=" + name, "dist.rollout_ranks=1"}, sets...)
	start := time.Now()
	runRanks(t, []string{"async-train", "async-gen"}, time.Minute, dpTaskEnv+"="+task.Dir, asyncSetsEnv+"="+strings.Join(sets, "\n"))
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%s: %.1f s", name, time.Since(start).Seconds())
	return testfix.Metrics(t, filepath.Join(task.Dir, name))
}

// asyncVaries says which figures differ between runs of the same
// trajectory: times, throughputs and the bytes a sync counted.
func asyncVaries(k string) bool {
	for _, p := range []string{"time_", "_per_s", "mfu", "memory_", "weight_sync_bytes"} {
		if strings.Contains(k, p) {
			return true
		}
	}
	return false
}

// sameTrajectory checks that two runs' metrics (but asyncVaries) and last
// checkpoints' weights are bitwise equal.
func sameTrajectory(t *testing.T, what string, task testfix.Task, want, got string) {
	t.Helper()
	x, y := testfix.Metrics(t, filepath.Join(task.Dir, want)), testfix.Metrics(t, filepath.Join(task.Dir, got))
	if len(x) != len(y) || len(x) == 0 {
		t.Fatalf("%s: %d and %d metrics lines", what, len(x), len(y))
	}
	for i := range x {
		if x[i]["grad_norm"] == 0.0 {
			t.Errorf("%s: step %d: zero gradient, the comparison would be vacuous", what, i+1)
		}
		for k, v := range x[i] {
			if asyncVaries(k) {
				continue
			}
			if f, ok := v.(float64); ok {
				if g, _ := y[i][k].(float64); math.Float64bits(g) != math.Float64bits(f) {
					t.Errorf("%s: step %d %s: %v (%s), %v (%s)", what, i+1, k, f, want, g, got)
				}
			}
		}
	}
	a, _, _ := checkpoint.Latest(filepath.Join(task.Dir, want, "checkpoints"))
	b, _, _ := checkpoint.Latest(filepath.Join(task.Dir, got, "checkpoints"))
	if a == "" || b == "" {
		t.Fatalf("%s: final checkpoints %q, %q", what, a, b)
	}
	wa, wb := testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
	if !reflect.DeepEqual(wa, wb) {
		testfix.CloseTensors(t, what+": weights", wa, wb, nil, 0)
		t.Errorf("%s: the weights differ", what)
	}
}

// syncBytes is the payload of the tiny model's trainable tensors: bf16
// for every matrix but the embedding, float32 otherwise.
func syncBytes(t *testing.T, task testfix.Task, lc *model.LoRAConfig) int {
	mc, err := model.LoadConfig(task.Model)
	if err != nil {
		t.Fatal(err)
	}
	named := model.ParamShapes(mc)
	if lc != nil {
		named = model.AdapterShapes(mc, lc)
	}
	n := 0
	for _, np := range named {
		k := 1
		for _, d := range np.Shape {
			k *= d
		}
		if len(np.Shape) >= 2 && np.Name != "model.embed_tokens.weight" {
			n += 2 * k
		} else {
			n += 4 * k
		}
	}
	return n
}

// TestAsyncOnEmulator: at train.max_off_policy_steps 0 one training and
// one generation rank train bitwise as one process (the generation rank's
// bf16-only matrices are the operands the one process's bf16 copies
// give); at 1 two runs are bitwise equal, with the weight versions of the
// one-step lag; every sync moves the bf16 payload once per new version.
// Not under -short: at 1 a run resumed with rollouts in flight equals the
// uninterrupted one, and with LoRA the sync sends the adapters alone, the
// run again one process's.
func TestAsyncOnEmulator(t *testing.T) {
	needNCCL(t, 2)
	task := testfix.TinyTask(t)
	start := time.Now()
	asyncRun(t, task, "", nil, []string{"run.name=one"})
	t.Logf("one process: %.1f s", time.Since(start).Seconds())

	full := syncBytes(t, task, nil)
	t.Logf("a sync moves %d bytes", full)
	m := runAsyncRanks(t, task, "sync")
	sameTrajectory(t, "1 training + 1 generation rank at k = 0 against one process", task, "one", "sync")
	for i, l := range m {
		if l["weight_version"] != float64(i) || l["off_policy_steps"] != 0.0 || l["weight_sync_bytes"] != float64(full) {
			t.Errorf("k = 0, step %d: weight_version %v off_policy_steps %v weight_sync_bytes %v, want %d, 0 and %d",
				i+1, l["weight_version"], l["off_policy_steps"], l["weight_sync_bytes"], i, full)
		}
	}

	off := []string{"train.steps=3", "train.max_off_policy_steps=1", "loss.rollout_correction.mode=token_tis"}
	a := runAsyncRanks(t, task, "off-a", off...)
	runAsyncRanks(t, task, "off-b", off...)
	sameTrajectory(t, "k = 1, two runs", task, "off-a", "off-b")
	// Step 1 is generated with the initial weights (sent when the pipeline
	// starts), step 2 with them too (step 1's exchange sends nothing new),
	// step 3 with those after step 1 (sent in step 2's exchange); the last
	// step sends no plan.
	for i, want := range []struct{ version, lag, bytes int }{{0, 0, 0}, {0, 1, full}, {1, 1, 0}} {
		l := a[i]
		if l["weight_version"] != float64(want.version) || l["off_policy_steps"] != float64(want.lag) || l["weight_sync_bytes"] != float64(want.bytes) {
			t.Errorf("k = 1, step %d: weight_version %v off_policy_steps %v weight_sync_bytes %v, want %d, %d and %d",
				i+1, l["weight_version"], l["off_policy_steps"], l["weight_sync_bytes"], want.version, want.lag, want.bytes)
		}
	}
	if testing.Short() {
		return
	}

	// Stopped after step 2 with step 3's plan and the weights it needs
	// (version 1, the bf16 payload) in the checkpoint, resumed in fresh
	// processes: rank 0 sends those weights from the checkpoint's bytes.
	// Only the bytes counted differ (the resumed run sent them at its
	// start, outside any step's metrics).
	runAsyncRanks(t, task, "off-part", append(off[1:], "train.steps=2")...)
	runAsyncRanks(t, task, "off-part", append(off, "resume=auto")...)
	if log, err := os.ReadFile(filepath.Join(task.Dir, "off-part", "train.log")); err != nil || !strings.Contains(string(log), "at step 2") {
		t.Fatalf("the resumed run's train.log does not say it resumed at step 2 (%v)", err)
	}
	sameTrajectory(t, "k = 1, resumed after step 2 against uninterrupted", task, "off-a", "off-part")

	lora := []string{"lora.rank=2"}
	asyncRun(t, task, "", nil, append([]string{"run.name=lora-one"}, lora...))
	l := runAsyncRanks(t, task, "lora", lora...)
	sameTrajectory(t, "LoRA, 1 training + 1 generation rank at k = 0 against one process", task, "lora-one", "lora")
	adapters := syncBytes(t, task, &model.LoRAConfig{Rank: 2, Alpha: 32, Targets: model.LoRAModules})
	t.Logf("a LoRA sync moves %d bytes", adapters)
	for i := range l {
		if got := l[i]["weight_sync_bytes"]; got != float64(adapters) || adapters >= full/10 {
			t.Errorf("LoRA: step %d sent %v bytes, want the adapters' %d (the whole model's: %d)", i+1, got, adapters, full)
		}
	}
}
