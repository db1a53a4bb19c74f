package cuda

import (
	"context"
	"fmt"
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

// The data-parallel training step on the emulator: two processes, each a
// rank with its own emulated GPU, gradients summed and ZeRO-1 shards
// gathered through the emulator's NCCL, train like one process with the
// whole batch (trainer's CPU tests check the same at 2 and 4 ranks; this
// checks the CUDA wiring: the NCCL reducer and gatherer, device tensors
// in the sharded AdamW, per-rank moment files).

const (
	dpTaskEnv = "GDROTRAIN_TEST_DP_TASK" // the tiny task's folder
	dpSetsEnv = "GDROTRAIN_TEST_DP_SETS" // more config settings, space-separated
	dpNameEnv = "GDROTRAIN_TEST_DP_NAME" // the run's name (default ranks-W)
)

// dpRun trains the tiny task's Prompt-GDRO run named name on this
// process's emulated GPU, as rank of world (world 1: alone).
func dpRun(t *testing.T, task testfix.Task, name string, g *dist.Group, extra ...string) {
	t.Helper()
	cfg, err := trainer.LoadBytes(nil, "", append(append(task.Sets(), "run.name="+name, "run.device=cuda",
		"precision.matmul=fp32", "validation.every=0", "checkpoint.every=0", "dist.state_check_every=1", "dist.timeout_s=120"), extra...))
	if err != nil {
		t.Fatal(err)
	}
	d := testDevice(t)
	o := trainer.Options{Scorer: testfix.Parity{},
		Backend: func(string, string, func(string, ...any)) (model.Backend, error) { return NewBackend(d, FP32), nil }}
	if g != nil {
		o.Dist = &trainer.Dist{Group: g, NewReducer: func(b model.Backend) (trainer.Reducer, error) {
			return OpenCommOver(b.(*Backend), g, 120*time.Second)
		}}
	}
	tr, err := trainer.Open(cfg, io.Discard, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// dpWorker is a training worker's setup: the tiny task the test wrote
// (dpTaskEnv) and this rank's control plane (closed when t ends).
func dpWorker(t *testing.T, rank, world, port int) (testfix.Task, *dist.Group) {
	dir := os.Getenv(dpTaskEnv)
	task := testfix.Task{Dir: dir, Model: filepath.Join(dir, "model"), Train: filepath.Join(dir, "train.jsonl"), Val: filepath.Join(dir, "val.jsonl")}
	w, err := dist.Explicit(rank, world, rank, "127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	g, err := dist.NewGroup(w, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return task, g
}

func dpTrainWorker(t *testing.T, rank, world, port int) {
	task, g := dpWorker(t, rank, world, port)
	name := os.Getenv(dpNameEnv)
	if name == "" {
		name = fmt.Sprintf("ranks-%d", world)
	}
	dpRun(t, task, name, g, strings.Fields(os.Getenv(dpSetsEnv))...)
	t.Logf("rank %d of %d: trained", rank, world)
}

// TestDataParallelOnEmulator: 2 ranks (processes) against 1, on the
// emulator. Tolerance as in trainer's data-parallel tests: the ranks' sum
// of partial gradients adds in another order, so the per-tensor relative
// L2 distance of the weight change and of the AdamW moments must stay
// under 1e-3, and every metric within 1e-6 + 1e-4·|x|. Then ZeRO-2 (not
// under -short) against ZeRO-1, bitwise.
func TestDataParallelOnEmulator(t *testing.T) {
	needNCCL(t, 2)
	task := testfix.TinyTask(t)
	dpRun(t, task, "ranks-1", nil)
	runRanks(t, []string{"dp-train", "dp-train"}, time.Minute, dpTaskEnv+"="+task.Dir)
	one, two := filepath.Join(task.Dir, "ranks-1"), filepath.Join(task.Dir, "ranks-2")
	a, _, _ := checkpoint.Latest(filepath.Join(one, "checkpoints"))
	b, mb, _ := checkpoint.Latest(filepath.Join(two, "checkpoints"))
	if a == "" || b == "" || mb.Step != 2 {
		t.Fatalf("final checkpoints %q, %q", a, b)
	}
	if shards, _ := filepath.Glob(filepath.Join(b, "optimizer-rank-*")); len(shards) != 2 {
		t.Errorf("the 2-rank checkpoint holds %d moment files, want one per rank (ZeRO-1)", len(shards))
	}
	init, wa, wb := testfix.LoadWeights(t, task.Model), testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
	testfix.CloseTensors(t, "weight change", wa, wb, init, 1e-3)
	testfix.CloseTensors(t, "AdamW moments", testfix.LoadMoments(t, a, wa), testfix.LoadMoments(t, b, wb), nil, 1e-3)
	x, y := testfix.Metrics(t, one), testfix.Metrics(t, two)
	if len(x) != 2 || len(y) != 2 {
		t.Fatalf("%d and %d metrics lines, want 2", len(x), len(y))
	}
	for i := range x {
		for k, v := range x[i] {
			if f, ok := v.(float64); ok {
				g, _ := y[i][k].(float64)
				if math.Abs(g-f) > 1e-6+1e-4*math.Abs(f) {
					t.Errorf("step %d %s: %v with 2 ranks, %v with 1", i+1, k, g, f)
				}
			}
		}
	}
	if x[0]["grad_norm"].(float64) == 0 {
		t.Error("zero gradient: the comparison would be vacuous")
	}
	if testing.Short() {
		return // -short: ZeRO-1 only (TestNCCLShardedAdamW reduce-scatters)
	}

	// ZeRO-2 through NCCL: each rank runs one micro-batch per optimizer
	// step here, so its per-micro-batch reduce-scatter adds what ZeRO-1's
	// per-step one adds, and the runs agree bit for bit.
	runRanks(t, []string{"dp-train", "dp-train"}, time.Minute, dpTaskEnv+"="+task.Dir, dpSetsEnv+"=dist.zero_stage=2", dpNameEnv+"=zero2")
	if log, err := os.ReadFile(filepath.Join(task.Dir, "zero2", "train.log")); err != nil || !strings.Contains(string(log), "ZeRO-2:") {
		t.Fatalf("the zero2 run's train.log does not say it ran ZeRO-2 (%v)", err)
	}
	c, _, _ := checkpoint.Latest(filepath.Join(task.Dir, "zero2", "checkpoints"))
	wc := testfix.LoadWeights(t, c)
	if !reflect.DeepEqual(wb, wc) {
		testfix.CloseTensors(t, "ZeRO-2 weights against ZeRO-1", wb, wc, nil, 0)
		t.Error("ZeRO-2's weights differ from ZeRO-1's")
	}
	if !reflect.DeepEqual(testfix.LoadMoments(t, b, wb), testfix.LoadMoments(t, c, wc)) {
		t.Error("ZeRO-2's AdamW moments differ from ZeRO-1's")
	}
	if z := testfix.Metrics(t, filepath.Join(task.Dir, "zero2")); !reflect.DeepEqual(y, z) {
		t.Errorf("ZeRO-2's metrics differ from ZeRO-1's:\n%v\n%v", y, z)
	}
}
