package trainer

// Data parallel on the CPU backend: 2 and 4 ranks, run in this process as
// goroutines joined by loopback TCP, train like one rank with the whole
// batch, and a stop requested on one rank stops them all at the same
// checkpoint, from which runs at another world size continue.
//
// Tolerance: the ranks' partial gradients are summed in another order than
// one process accumulates them, so the gradients differ in the last bits of
// float32; through AdamW (lr 1e-3, two steps) that leaves the weights within
// a few float32 ulps of each other. Every float compared — weights, AdamW
// moments, metrics, controller state — must satisfy
// |got − want| ≤ 1e-6 + 1e-4·|want|, chosen two orders of magnitude above
// the largest difference seen (≈1e-6 relative, the moments) and far below
// what a missing all-reduce or a per-rank loss normalisation gives (factors
// of 2 to 4 in the gradient norm, different weights on different ranks).
// Integers, booleans and strings (bins, counts, allocations) must be equal,
// and the ranks of one run are checked bitwise equal among themselves at
// every step (dist.state_check_every=1).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrotrain/gdrotrain/checkpoint"
	"github.com/gdrotrain/gdrotrain/dist"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
	"github.com/gdrotrain/gdrotrain/reward"
)

const dpAtol, dpRtol, dpTensorTol = 1e-6, 1e-4, 1e-3

// groups forms a control plane of size ranks on loopback.
func groups(t *testing.T, size int) []*dist.Group {
	t.Helper()
	gs, err := dist.Loopback(size, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range gs {
			g.Close()
		}
	})
	return gs
}

// runRanks runs cfg on size ranks (size 1: one process, no group) and
// returns each rank's Run error. Every rank scores with testfix.Parity (so
// advantages are not all zero); ctxOf gives rank r's context (nil:
// background); prep, when set, prepares rank r's trainer before Run.
func runRanks(t *testing.T, cfg Config, size int, resume string, ctxOf func(r int) context.Context, prep func(r int, tr *Trainer)) []error {
	t.Helper()
	if size == 1 {
		tr, err := Open(cfg, io.Discard, Options{Resume: resume})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		parity(tr)
		ctx := context.Background()
		if ctxOf != nil {
			ctx = ctxOf(0)
		}
		if prep != nil {
			prep(0, tr)
		}
		return []error{tr.Run(ctx)}
	}
	gs := groups(t, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := Open(cfg, io.Discard, Options{Resume: resume, Dist: &Dist{Group: gs[r]}})
			if err != nil {
				errs[r] = fmt.Errorf("open: %w", err)
				gs[r].Close()
				return
			}
			defer tr.Close()
			parity(tr)
			ctx := context.Background()
			if ctxOf != nil {
				ctx = ctxOf(r)
			}
			if prep != nil {
				prep(r, tr)
			}
			errs[r] = tr.Run(ctx)
		}()
	}
	wg.Wait()
	return errs
}

// parity makes tr score with testfix.Parity, still counted by the verifier
// metrics (which the ranks must sum).
func parity(tr *Trainer) {
	for src := range tr.scorers {
		tr.scorers[src] = reward.Counted{Scorer: testfix.Parity{}, M: &tr.rmet}
	}
}

// dpConfigs are the runs compared: the Prompt-GDRO fixture (4 prompts of
// 2 rollouts, micro-batches splitting prompts) and a Rollout-GDRO run
// (12 prompts with rollout counts 2…6 decided by the controller, two PPO
// epochs, mini-batches ending between prompts of different sizes).
func dpConfigs(t *testing.T) map[string]Config {
	task := testfix.TinyTask(t)
	common := append(task.Sets(), "dist.state_check_every=1", "checkpoint.every=0", "validation.every=0")
	prompt, err := LoadBytes(nil, "", common)
	if err != nil {
		t.Fatal(err)
	}
	roll, err := LoadBytes(nil, "", append(common, "train.method=prompt_rollout_gdro", "train.prompts_per_step=12",
		"train.mini_batch_prompts=5", "train.micro_batch_rows=7", "train.ppo_epochs=2", "sampling.max_new_tokens=6",
		"gdro.rollout.n_min=2", "gdro.rollout.n_max=6", "gdro.rollout.n_mean=3", "gdro.classifier.edges=[0.5]",
		"gdro.classifier.history_len=4", "gdro.classifier.hysteresis=0"))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Config{"prompt_gdro": prompt, "rollout_gdro": roll}
}

// primeClasses gives the classifier one earlier appearance per prompt,
// solved for every other prompt, so that Rollout-GDRO's first step already
// sees two classes and gives them different rollout counts (the ranks'
// slices then hold different numbers of rows per prompt).
func primeClasses(r int, tr *Trainer) {
	var uids []string
	var solved []bool
	for i, p := range tr.train.ds.Prompts {
		uids, solved = append(uids, p.UID), append(solved, i%2 == 0)
	}
	if err := tr.Ctrl.Classifier().Observe(uids, solved); err != nil {
		panic(err)
	}
}

// TestDataParallelMatchesOneRank: both runs at 2 and 4 ranks under ZeRO-0,
// 1 and 2 (2 ranks under ZeRO-1 and 2 with -short) end where one rank ends.
func TestDataParallelMatchesOneRank(t *testing.T) {
	cfgs := dpConfigs(t)
	names := []string{"prompt_gdro", "rollout_gdro"}
	for _, name := range names {
		cfg := cfgs[name]
		cfg.Run.Name = name + "-1"
		var prep func(int, *Trainer)
		if name == "rollout_gdro" {
			prep = primeClasses
		}
		if errs := runRanks(t, cfg, 1, "", nil, prep); errs[0] != nil {
			t.Fatal(errs[0])
		}
		oneDir := cfg.RunDir()
		if name == "rollout_gdro" {
			arms := map[float64]bool{}
			for _, n := range readLines(t, filepath.Join(oneDir, "metrics.jsonl"))[0]["bin_n"].([]any) {
				arms[n.(float64)] = true
			}
			if len(arms) < 2 {
				t.Fatalf("step 1 gave every class the same rollout count (%v): the test needs unequal n_i", arms)
			}
		}
		for _, tc := range []struct{ size, zero int }{{2, 1}, {4, 1}, {2, 0}, {2, 2}, {4, 2}} {
			if testing.Short() && (tc.size != 2 || tc.zero == 0) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d ranks ZeRO-%d", name, tc.size, tc.zero), func(t *testing.T) {
				c := cfg
				c.Run.Name = fmt.Sprintf("%s-%d-%d", name, tc.size, tc.zero)
				c.Dist.ZeROStage = tc.zero
				for r, err := range runRanks(t, c, tc.size, "", nil, prep) {
					if err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				sameWithin(t, c.Model.Path, oneDir, c.RunDir(), c.Train.Steps, 0)
				// ZeRO-1 and 2 write one moments file per rank, ZeRO-0 one file.
				last, _, _ := checkpoint.Latest(filepath.Join(c.RunDir(), "checkpoints"))
				shards, _ := filepath.Glob(filepath.Join(last, "optimizer-rank-*"))
				_, err := os.Stat(filepath.Join(last, optimizerFile))
				if want := tc.size * min(tc.zero, 1); len(shards) != want || (err == nil) != (tc.zero == 0) {
					t.Errorf("checkpoint %s: %d moment shard files (want %d), %s present: %v", last, len(shards), want, optimizerFile, err == nil)
				}
			})
		}
	}
}

// sameWithin checks that two run folders end in the same state and wrote
// the same metrics, floats within the tolerance above.
//
// gotDir's metrics.jsonl may lack the first skip lines (a run resumed from a
// checkpoint in another run folder).
func sameWithin(t *testing.T, base, wantDir, gotDir string, steps, skip int) {
	t.Helper()
	a, ma, _ := checkpoint.Latest(filepath.Join(wantDir, "checkpoints"))
	b, mb, _ := checkpoint.Latest(filepath.Join(gotDir, "checkpoints"))
	if a == "" || b == "" || ma.Step != steps || mb.Step != steps {
		t.Fatalf("final checkpoints %q and %q, want step %d", a, b, steps)
	}
	wa, wb := testfix.LoadWeights(t, a), testfix.LoadWeights(t, b)
	testfix.CloseTensors(t, "weight change", wa, wb, testfix.LoadWeights(t, base), dpTensorTol)
	testfix.CloseTensors(t, "AdamW moments", testfix.LoadMoments(t, a, wa), testfix.LoadMoments(t, b, wb), nil, dpTensorTol)
	var sa, sb map[string]any
	json.Unmarshal(ma.State, &sa)
	json.Unmarshal(mb.State, &sb)
	// The first step of the run folder's metrics.jsonl is the folder's, not
	// the trajectory's: one past the checkpoint a resumed copy began from.
	if fa, fb := sa["first_step"], sb["first_step"]; fa != float64(1) || fb != float64(skip+1) {
		t.Errorf("first_step %v and %v, want 1 and %d", fa, fb, skip+1)
	}
	delete(sa, "first_step")
	delete(sb, "first_step")
	closeJSON(t, "trainer state", sa, sb)
	x, y := readLines(t, filepath.Join(wantDir, "metrics.jsonl")), readLines(t, filepath.Join(gotDir, "metrics.jsonl"))
	if len(x) != steps || len(y) != steps-skip {
		t.Fatalf("%d and %d metrics lines, want %d and %d", len(x), len(y), steps, steps-skip)
	}
	x = x[skip:]
	for i := range x {
		// The sampler/trainer mismatch figures are differences of two
		// log-probs that agree to rounding on the CPU: where the ranks'
		// batches change the rounding (BLAS kernels by shape) they differ
		// by rounding too, so they are held to an absolute bound.
		for k, v := range x[i] {
			if strings.HasPrefix(k, "mismatch_") || strings.HasPrefix(k, "is_") {
				a, _ := v.(float64)
				b, ok := y[i][k].(float64)
				if !ok || math.Abs(a-b) > mismatchAtol {
					t.Errorf("metrics of step %d: %s %v and %v differ by more than %g", skip+i+1, k, v, y[i][k], mismatchAtol)
				}
				delete(x[i], k)
				delete(y[i], k)
			}
		}
		for _, m := range []map[string]any{x[i], y[i]} {
			for k := range m {
				if strings.HasPrefix(k, "time_") || strings.HasSuffix(k, "_per_s") {
					delete(m, k)
				}
			}
		}
		closeJSON(t, fmt.Sprintf("metrics of step %d", skip+i+1), x[i], y[i])
	}
}

// mismatchAtol bounds the difference of two runs' sampler/trainer mismatch
// figures on the CPU (they are rounding-level numbers, ≈ 1e-7 … 1e-5).
const mismatchAtol = 1e-4

// closeJSON compares decoded JSON values: numbers within the tolerance,
// everything else exactly.
func closeJSON(t *testing.T, what string, want, got any) {
	t.Helper()
	if path, ok := jsonClose(want, got, ""); !ok {
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		t.Errorf("%s differs at %s:\n%.800s\n%.800s", what, path, a, b)
	}
}

func jsonClose(want, got any, path string) (string, bool) {
	switch x := want.(type) {
	case float64:
		y, ok := got.(float64)
		return path, ok && math.Abs(x-y) <= dpAtol+dpRtol*math.Abs(x)
	case map[string]any:
		y, ok := got.(map[string]any)
		if !ok || len(x) != len(y) {
			return path, false
		}
		for k, v := range x {
			if p, ok := jsonClose(v, y[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		y, ok := got.([]any)
		if !ok || len(x) != len(y) {
			return path, false
		}
		for i := range x {
			if p, ok := jsonClose(x[i], y[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, want == got
}

// TestDataParallelStop: a stop requested on rank 1 during step 2's update
// makes both ranks finish step 2, checkpoint it (rank 0 writes) and return
// ErrStopped; the run then continues from that checkpoint at world size 1
// and at world size 2, each ending like the uninterrupted run.
func TestDataParallelStop(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	cfg.Train.Steps = 3
	cfg.Run.Name = "uninterrupted"
	if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	refDir := cfg.RunDir()

	cfg.Run.Name = "stopped"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	updates := 0
	hook := func(r int, tr *Trainer) {
		if r != 1 {
			return
		}
		tr.onPhase = func(p Phase) {
			if p == PhaseUpdate {
				if updates++; updates == 2 {
					cancel() // rank 1's signal handler
				}
			}
		}
	}
	ctxOf := func(r int) context.Context {
		if r == 1 {
			return ctx
		}
		return context.Background()
	}
	for r, err := range runRanks(t, cfg, 2, "", ctxOf, hook) {
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("rank %d: Run = %v, want ErrStopped", r, err)
		}
	}
	root := filepath.Join(cfg.RunDir(), "checkpoints")
	dir, m, skipped := checkpoint.Latest(root)
	if len(skipped) > 0 || m == nil || m.Step != 2 {
		t.Fatalf("after the stop: newest checkpoint %q (%v), damaged %v; want step 2", dir, m, skipped)
	}
	if n := len(readLines(t, filepath.Join(cfg.RunDir(), "metrics.jsonl"))); n != 2 {
		t.Fatalf("%d metrics lines after the stop, want 2", n)
	}
	for _, size := range []int{1, 2} {
		t.Run(fmt.Sprintf("resume at %d ranks", size), func(t *testing.T) {
			c := cfg
			c.Run.Name = fmt.Sprintf("resumed-%d", size)
			// A copy of the stopped run's checkpoint in a fresh run folder,
			// resumed by --resume DIR.
			for r, err := range runRanks(t, c, size, dir, nil, nil) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			a, mb, _ := checkpoint.Latest(filepath.Join(c.RunDir(), "checkpoints"))
			if mb == nil || mb.Step != 3 {
				t.Fatalf("resumed run's newest checkpoint %q (%v), want step 3", a, mb)
			}
			sameWithin(t, c.Model.Path, refDir, c.RunDir(), 3, 2)
		})
	}
}

// TestDataParallelDivergence: a rank whose weights differ (a bug, or a
// non-deterministic rank) stops the run at the next state check, naming
// the rank and the step, on every rank.
func TestDataParallelDivergence(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	cfg.Run.Name = "diverged"
	// Replicated optimizer state: under ZeRO-1 the all-gather after AdamW
	// overwrites every rank's weights with the owners' parts each update,
	// so a perturbed weight does not persist to be caught.
	cfg.Dist.ZeROStage = 0
	errs := runRanks(t, cfg, 2, "", nil, func(r int, tr *Trainer) {
		if r != 1 {
			return
		}
		tr.onPhase = func(p Phase) {
			if p != PhaseUpdate || tr.step != 1 {
				return
			}
			norm := tr.Policy.P.FinalNorm
			host := make([]float32, norm.Numel())
			tr.Policy.B.Download(norm, host)
			host[0] += 1e-3
			tr.Policy.B.Upload(norm, host)
		}
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "state check every 1 steps at step 1") ||
			!strings.Contains(err.Error(), "weights (fingerprint") || !strings.Contains(err.Error(), "rank(s) [1] differ") {
			t.Errorf("rank %d: %v, want the state check to name rank 1 and step 1", r, err)
		}
	}
}

// TestDataParallelRankFails: a rank that drops out mid-step (here: closes
// its connections during step 2's generation) makes the other ranks fail
// at their next collective, naming it, instead of hanging.
func TestDataParallelRankFails(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	cfg.Run.Name = "failed"
	var g1 *dist.Group
	errs := runRanks(t, cfg, 3, "", nil, func(r int, tr *Trainer) {
		if r != 1 {
			return
		}
		g1 = tr.group.(*dataParallel).g
		tr.onPhase = func(p Phase) {
			if p == PhaseGenerate && tr.step == 2 {
				g1.Close()
			}
		}
	})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), `dist: rank 0: all-gather "rows" of step 2: rank 1 closed the connection`) {
		t.Errorf("rank 0: %v", errs[0])
	}
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d finished although rank 1 dropped out", r)
		}
	}
}

// TestSlicePrompts: the ranks' slices are contiguous, cover every prompt
// once in order, and split the rows about equally; ranks beyond the
// prompts get empty slices.
func TestSlicePrompts(t *testing.T) {
	for _, c := range []struct {
		n    []int
		size int
		want [][2]int // [lo, hi) by rank
	}{
		{[]int{2, 2, 2, 2}, 1, [][2]int{{0, 4}}},
		{[]int{2, 2, 2, 2}, 2, [][2]int{{0, 2}, {2, 4}}},
		{[]int{2, 2, 2, 2}, 4, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}}},
		{[]int{6, 2, 2, 2}, 2, [][2]int{{0, 1}, {1, 4}}},               // rows 6 | 6
		{[]int{2, 6, 3, 5, 2, 4}, 3, [][2]int{{0, 2}, {2, 4}, {4, 6}}}, // rows 8 | 8 | 6
		{[]int{3, 3}, 4, [][2]int{{0, 1}, {1, 1}, {1, 2}, {2, 2}}},
		{[]int{12}, 3, [][2]int{{0, 1}, {1, 1}, {1, 1}}},
	} {
		var got [][2]int
		next := 0
		for r := range c.size {
			lo, hi := slicePrompts(c.n, r, c.size)
			got = append(got, [2]int{lo, hi})
			if lo != next || hi < lo {
				t.Errorf("n %v, %d ranks: rank %d gets [%d, %d), want it to start at %d", c.n, c.size, r, lo, hi, next)
			}
			next = hi
		}
		if next != len(c.n) || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("n %v, %d ranks: slices %v, want %v", c.n, c.size, got, c.want)
		}
	}
}

// TestMicroBatches: the update's layout is the one-process layout:
// mini-batches of whole prompts, micro-batches of mb rows within each, ga
// counted per mini-batch.
func TestMicroBatches(t *testing.T) {
	got := microBatches([]int{2, 6, 3, 5, 2, 4, 6, 2}, 5, 7)
	// mini-batch 0: rows 0…18 (18 rows: 7, 7, 4); mini-batch 1: rows 18…30 (12 rows: 7, 5)
	want := []microSpan{{0, 7, 0, 3}, {7, 14, 0, 3}, {14, 18, 0, 3}, {18, 25, 1, 2}, {25, 30, 1, 2}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("microBatches = %v, want %v", got, want)
	}
}

// TestDataParallelValidation: each rank samples and scores its slice of
// the validation prompts and the outcomes are gathered: the validation
// before training (identical weights) is byte for byte one process's, at 2
// and 3 ranks (3: a rank without prompts), and the final one, like the
// metrics, within the tolerance above; the verifier counts in the state
// are the whole set's.
func TestDataParallelValidation(t *testing.T) {
	cfg := dpConfigs(t)["prompt_gdro"]
	cfg.Validation.BeforeTraining = true
	cfg.Run.Name = "val-1"
	if errs := runRanks(t, cfg, 1, "", nil, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	want := readLines(t, filepath.Join(cfg.RunDir(), "validation.jsonl"))
	rawWant, _ := os.ReadFile(filepath.Join(cfg.RunDir(), "validation.jsonl"))
	if len(want) != 2 || want[0]["prompts"].(float64) < 2 {
		t.Fatalf("one process wrote %d validation lines: %v", len(want), want)
	}
	oneDir := cfg.RunDir()
	for _, size := range []int{2, 3} {
		c := cfg
		c.Run.Name = fmt.Sprintf("val-%d", size)
		for r, err := range runRanks(t, c, size, "", nil, nil) {
			if err != nil {
				t.Fatalf("%d ranks, rank %d: %v", size, r, err)
			}
		}
		rawGot, _ := os.ReadFile(filepath.Join(c.RunDir(), "validation.jsonl"))
		first := func(raw []byte) string { return strings.SplitN(string(raw), "\n", 2)[0] }
		if first(rawGot) != first(rawWant) {
			t.Errorf("%d ranks: validation before training\n%s\nwant\n%s", size, first(rawGot), first(rawWant))
		}
		got := readLines(t, filepath.Join(c.RunDir(), "validation.jsonl"))
		if len(got) != len(want) {
			t.Fatalf("%d ranks: %d validation lines, want %d", size, len(got), len(want))
		}
		closeJSON(t, fmt.Sprintf("%d ranks: final validation", size), want[1], got[1])
		sameWithin(t, c.Model.Path, oneDir, c.RunDir(), c.Train.Steps, 0)
	}
}
