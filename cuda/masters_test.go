package cuda

import (
	"context"
	"encoding/json"
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

// ZeRO-1 with sharded fp32 masters on the emulator, under bf16 products:
// the policy's matrices bf16 only, each rank holding the fp32 masters of
// its ranges, the bf16 ranges all-gathered through the emulator's NCCL.

// The worker's run, from the environment (runRanks passes only a role).
const (
	mastersRunEnv    = "GDROTRAIN_TEST_MASTERS_RUN"    // run name
	mastersResumeEnv = "GDROTRAIN_TEST_MASTERS_RESUME" // checkpoint folder to resume, or ""
	mastersSetsEnv   = "GDROTRAIN_TEST_MASTERS_SETS"   // extra config overrides, one per line
	mastersHostEnv   = "GDROTRAIN_TEST_MASTERS_HOST"   // "1": the control plane's reducer, not NCCL
)

// mastersRun trains the tiny task's run name in bf16 products on this
// process's emulated GPU as rank of world (g nil: alone), reducing and
// gathering through NCCL, or through the control plane where host. With sharded
// masters it also writes every bf16-only weight as the products read it
// (ReadHalf), rank by rank, to RUN/bf16-rank-R/model.safetensors beside
// a config.json, for the test to compare with the checkpoint's masters.
func mastersRun(t *testing.T, task testfix.Task, name, resume string, sets []string, g *dist.Group, host bool) {
	t.Helper()
	all := append(task.Sets(), "run.name="+name, "run.device=cuda", "precision.matmul=bf16",
		"validation.every=0", "checkpoint.every=1", "dist.state_check_every=1", "dist.timeout_s=120")
	cfg, err := trainer.LoadBytes(nil, "", append(all, sets...))
	if err != nil {
		t.Fatal(err)
	}
	d := testDevice(t)
	b := NewBackend(d, BF16)
	o := trainer.Options{Scorer: testfix.Parity{}, Resume: resume,
		Backend: func(string, string, func(string, ...any)) (model.Backend, error) { return b, nil }}
	if g != nil {
		o.Dist = &trainer.Dist{Group: g}
		if !host {
			o.Dist.NewReducer = func(model.Backend) (trainer.Reducer, error) { return OpenCommOver(b, g, 120*time.Second) }
		}
	}
	tr, err := trainer.Open(cfg, io.Discard, o)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tr.Opt == nil || !tr.Opt.MastersSharded() {
		return
	}
	rank := 0
	if g != nil {
		rank = g.Rank()
	}
	out := filepath.Join(cfg.RunDir(), fmt.Sprintf("bf16-rank-%d", rank))
	var ts []model.NamedTensor
	for _, np := range tr.Policy.P.Named(tr.Policy.Cfg) {
		host := make([]float32, (*np.Ptr).Numel())
		if b.IsHalfOnly(*np.Ptr) {
			b.ReadHalf(*np.Ptr, host)
		} else {
			b.Download(*np.Ptr, host)
		}
		ts = append(ts, model.NamedTensor{Name: np.Name, Shape: np.Shape, Data: host})
	}
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tr.Policy.Cfg)
	if err := os.WriteFile(filepath.Join(out, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := model.WriteSafetensors(filepath.Join(out, "model.safetensors"), ts, model.F32, nil); err != nil {
		t.Fatal(err)
	}
}

// mastersWorker is one rank of a TestShardedMastersOnEmulator run.
func mastersWorker(t *testing.T, rank, world, port int) {
	task, g := dpWorker(t, rank, world, port)
	var sets []string
	if s := os.Getenv(mastersSetsEnv); s != "" {
		sets = strings.Split(s, "\n")
	}
	mastersRun(t, task, os.Getenv(mastersRunEnv), os.Getenv(mastersResumeEnv), sets, g, os.Getenv(mastersHostEnv) == "1")
}

// TestShardedMastersOnEmulator: two processes under bf16 products with
// sharded masters train BITWISE as with moment-only ZeRO-1 (the whole fp32
// policy on every rank): the checkpoints' fp32 weights (the gathered
// masters) and moments, and every metric; the bf16 weights every rank's
// products read are the nearest-even rounding of those masters. A
// checkpoint written with sharded masters resumes at 2 ranks bitwise as
// the run that wrote it went on, and at 3 ranks (ranges not a multiple
// of 3: the scratch gathers of fused storages' views) and at 1 rank (whole
// fp32 weights with bf16 copies) within the data-parallel tolerance of
// TestDataParallelOnEmulator (another order of summing the gradients).
//
// Mutation seen to fail it: skipping the bf16 all-gather in
// Comm.GatherShards. The ranks' state check stops the run at step 1 (the
// fingerprint samples each rank's range of every bf16 matrix); without
// that sample it ran on, and each rank's bf16 weights differed from the
// rounded masters outside its own ranges. A lost bf16 output of
// AdamWHalf fails TestHalfOnlyWeights. Under -short only the first
// comparison runs (sharded masters against moment-only ZeRO-1, 2 ranks).
func TestShardedMastersOnEmulator(t *testing.T) {
	needNCCL(t, 3)
	task := testfix.TinyTask(t)
	host := "0"
	run := func(t *testing.T, name, resume string, world int, sets ...string) string {
		t.Helper()
		if world == 1 {
			mastersRun(t, task, name, resume, sets, nil, false)
		} else {
			roles := make([]string, world)
			for r := range roles {
				roles[r] = "dp-masters"
			}
			runRanks(t, roles, 2*time.Minute, dpTaskEnv+"="+task.Dir, mastersRunEnv+"="+name,
				mastersResumeEnv+"="+resume, mastersSetsEnv+"="+strings.Join(sets, "\n"), mastersHostEnv+"="+host)
		}
		if t.Failed() {
			t.FailNow()
		}
		return filepath.Join(task.Dir, name)
	}
	final := func(t *testing.T, run string) string {
		t.Helper()
		dir, m, _ := checkpoint.Latest(filepath.Join(run, "checkpoints"))
		if m == nil || m.Step != 2 {
			t.Fatalf("%s: newest checkpoint %q (%v), want step 2", run, dir, m)
		}
		return dir
	}
	moments := run(t, "moments", "", 2, "dist.shard_masters=false")
	masters := run(t, "masters", "", 2)
	if _, err := os.Stat(filepath.Join(moments, "bf16-rank-0")); err == nil {
		t.Fatal("dist.shard_masters=false made bf16-only weights")
	}
	a, b := final(t, moments), final(t, masters)
	wa, wb := testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
	bitwise(t, "fp32 weights (gathered masters)", wa, wb)
	bitwise(t, "AdamW moments", testfix.LoadMoments(t, a, wa), testfix.LoadMoments(t, b, wb))
	if x, y := testfix.Metrics(t, moments), testfix.Metrics(t, masters); !reflect.DeepEqual(x, y) {
		t.Errorf("metrics differ:\nmoment-only %v\nmasters     %v", x, y)
	} else if len(x) != 2 || x[0]["grad_norm"].(float64) == 0 {
		t.Errorf("metrics %v: want two steps with a gradient", x)
	}
	init := testfix.LoadWeights(t, task.Model)
	for r := range 2 {
		half := testfix.LoadWeights(t, filepath.Join(masters, fmt.Sprintf("bf16-rank-%d", r)))
		want := map[string][]float32{}
		sharded := 0
		for name, w := range wb {
			want[name] = w
			if strings.Contains(name, "norm") || name == "model.embed_tokens.weight" {
				continue // fp32 and whole
			}
			sharded++
			want[name] = make([]float32, len(w))
			for i, v := range w {
				want[name][i] = bf16Round(v)
			}
		}
		if sharded == 0 {
			t.Fatal("no sharded parameter: the comparison would be vacuous")
		}
		bitwise(t, fmt.Sprintf("rank %d's weights as products read them", r), want, half)
	}
	if testing.Short() {
		return // -short: sharded masters against moment-only ZeRO-1 alone
	}

	// ZeRO-2 over sharded masters: the gradients reduce-scattered per
	// micro-batch into the accumulators AdamWHalf reads. Each rank runs one
	// micro-batch per optimizer step here, so it equals ZeRO-1 bitwise.
	t.Run("ZeRO-2", func(t *testing.T) {
		z2 := final(t, run(t, "zero2-masters", "", 2, "dist.zero_stage=2"))
		log, _ := os.ReadFile(filepath.Join(task.Dir, "zero2-masters", "train.log"))
		for _, want := range []string{"ZeRO-2:", "fp32 master weights of 1/2"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("the ZeRO-2 run's train.log lacks %q", want)
			}
		}
		w := testfix.LoadWeights(t, z2)
		bitwise(t, "fp32 weights (gathered masters)", wb, w)
		bitwise(t, "AdamW moments", testfix.LoadMoments(t, b, wb), testfix.LoadMoments(t, z2, w))
		if x, y := testfix.Metrics(t, masters), testfix.Metrics(t, filepath.Join(task.Dir, "zero2-masters")); !reflect.DeepEqual(x, y) {
			t.Errorf("metrics differ:\nZeRO-1 %v\nZeRO-2 %v", x, y)
		}
	})

	step1 := filepath.Join(masters, "checkpoints")
	ckpt, m, _ := checkpoint.Latest(step1)
	entries, _ := os.ReadDir(step1)
	for _, e := range entries { // the step-1 checkpoint
		if dir := filepath.Join(step1, e.Name()); dir != ckpt {
			if mm, err := checkpoint.Verify(dir); err == nil && mm.Step == 1 {
				ckpt, m = dir, mm
			}
		}
	}
	if m == nil || m.Step != 1 {
		t.Fatalf("no step-1 checkpoint in %s", step1)
	}
	t.Run("resume at 2 ranks", func(t *testing.T) {
		w := testfix.LoadWeights(t, final(t, run(t, "resumed-2", ckpt, 2)))
		bitwise(t, "fp32 weights", wb, w)
	})
	for _, world := range []int{3, 1} {
		t.Run(fmt.Sprintf("resume at %d ranks", world), func(t *testing.T) {
			dir := run(t, fmt.Sprintf("resumed-%d", world), ckpt, world)
			w := testfix.LoadWeights(t, final(t, dir))
			testfix.CloseTensors(t, "weight change", wb, w, init, 1e-3)
			x, y := testfix.Metrics(t, masters), testfix.Metrics(t, dir)
			if len(y) == 0 || y[len(y)-1]["step"] != float64(2) {
				t.Fatalf("metrics %v: want step 2 last", y)
			}
			for k, v := range x[1] {
				if f, ok := v.(float64); ok {
					if g, _ := y[len(y)-1][k].(float64); math.Abs(g-f) > 1e-6+1e-4*math.Abs(f) {
						t.Errorf("step 2 %s: %v resumed at %d ranks, %v at 2", k, g, world, f)
					}
				}
			}
		})
	}
	// The control plane's reducer and gatherer (the CPU backend's way; a
	// CUDA run without NCCL): bf16 ranges travel as 2-byte values.
	t.Run("host reducer", func(t *testing.T) {
		host = "1"
		a, b := final(t, run(t, "host-moments", "", 2, "dist.shard_masters=false")), final(t, run(t, "host-masters", "", 2))
		wa, wb := testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
		bitwise(t, "fp32 weights (gathered masters)", wa, wb)
		bitwise(t, "AdamW moments", testfix.LoadMoments(t, a, wa), testfix.LoadMoments(t, b, wb))
		if _, err := os.Stat(filepath.Join(task.Dir, "host-masters", "bf16-rank-1")); err != nil {
			t.Errorf("the host-reducer run did not shard the masters: %v", err)
		}
	})
}

// bitwise fails on any tensor of got whose bits differ from want's.
func bitwise(t *testing.T, what string, want, got map[string][]float32) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Fatalf("%s %s: %d values, want %d", what, name, len(g), len(w))
		}
		for i := range w {
			if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
				t.Errorf("%s %s [%d]: %g, want %g (bitwise)", what, name, i, g[i], w[i])
				break
			}
		}
	}
}
