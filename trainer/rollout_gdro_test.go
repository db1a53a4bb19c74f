package trainer

// Rollout-GDRO through the trainer (docs/algorithm.md §7.5, §5.7–5.9): prompts
// with different rollout counts n_i, rewards that differ within a prompt's
// rows, mini-batches that end between prompts of different sizes,
// micro-batches that split prompts, and two PPO epochs. The per-row signal
// handed to the controllers must stay aligned with its row, its prompt, its
// class and its n_i throughout.

import (
	"context"
	"io"
	"math"
	"slices"
	"testing"

	"github.com/gdrotrain/gdrotrain/gdro"
	"github.com/gdrotrain/gdrotrain/internal/testinfra/testfix"
)

// rolloutTrainer opens a Rollout-GDRO (paper mode) run on the tiny fixture:
// 24 prompts per step (every training prompt), arms 2…6 at n̄ = 3,
// mini-batches of 5 prompts (the last one 4), micro-batches of 7 rows, two
// PPO epochs, and a learning rate so small that the ratio stays 1 to ~1e−7.
// Prompt-GDRO is on but not applied, so its per-class signal is logged;
// the arms are scored by the variance utility, whose state the test reads.
func rolloutTrainer(t *testing.T, extra ...string) *Trainer {
	t.Helper()
	task := testfix.TinyTask(t)
	sets := append(task.Sets(), "run.name=rollout", "train.method=rollout_gdro", "train.steps=3",
		"train.prompts_per_step=24", "train.mini_batch_prompts=5", "train.micro_batch_rows=7", "train.ppo_epochs=2",
		"optim.lr=1e-9", "sampling.max_new_tokens=6", "gdro.rollout.n_min=2", "gdro.rollout.n_max=6", "gdro.rollout.n_mean=3",
		"gdro.classifier.edges=[0.5]", "gdro.classifier.history_len=4", "gdro.classifier.hysteresis=0",
		"gdro.prompt.apply=false", "gdro.prompt.share_norm=false", "gdro.rollout.utility=variance")
	cfg, err := LoadBytes(nil, "", append(sets, extra...))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(cfg, io.Discard, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	for src := range tr.scorers {
		tr.scorers[src] = testfix.Parity{}
	}
	// One earlier appearance per prompt, solved for every other prompt:
	// step 1 then sees two classes of 12 prompts (acc 0 and 1), whose
	// flat arm probabilities tie, and the DP's lexicographic tie-break
	// gives them different arms (2 and 4) from the first step on.
	var uids []string
	var solved []bool
	for i, p := range tr.train.ds.Prompts {
		uids, solved = append(uids, p.UID), append(solved, i%2 == 0)
	}
	if err := tr.Ctrl.Classifier().Observe(uids, solved); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestRolloutGDROEndToEnd runs three Rollout-GDRO steps and checks each
// step's record: the budget is met exactly, every prompt of a class got
// that class's arm, the arms differ between classes, rewards are mixed, the
// optimizer took one step per mini-batch per epoch, and — the alignment
// check — every class's mean per-row signal is 0. At ρ = 1 a row's signal is
// −A_r, and GRPO advantages sum to 0 within each prompt, so any row whose
// signal landed on another prompt's class or position would leave a
// non-zero class mean (docs/algorithm.md §6.2).
func TestRolloutGDROEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	tr := rolloutTrainer(t)
	const N, nbar, mb = 24, 3, 5
	varied := false
	for step := 1; step <= 3; step++ {
		met, err := tr.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec, rr, pr := met.StepRecord, met.RolloutRecord, met.PromptRecord
		if rr == nil || pr == nil || rr.RolloutMode != gdro.ModePaper {
			t.Fatalf("step %d: record without the Rollout-GDRO (paper) and Prompt-GDRO parts: %+v", step, rec)
		}
		if rec.NumPrompts != N || rec.NumRows != N*nbar || !rr.BudgetExact || rr.BudgetTotal != N*nbar {
			t.Errorf("step %d: %d prompts, %d rows, budget %d (exact %v); want %d, %d", step, rec.NumPrompts, rec.NumRows, rr.BudgetTotal, rr.BudgetExact, N, N*nbar)
		}
		rows, arms := 0, map[int]bool{}
		for b, c := range rec.BinCount {
			if c == 0 {
				continue
			}
			// paper mode: every prompt of class b got the class's arm
			if rec.BinNMean[b] != float64(rr.BinN[b]) {
				t.Errorf("step %d class %d: prompts got %v rollouts on average, the class's arm is %d", step, b, rec.BinNMean[b], rr.BinN[b])
			}
			rows += c * rr.BinN[b]
			arms[rr.BinN[b]] = true
			if math.Abs(pr.BinSignal[b]) > 1e-4 {
				t.Errorf("step %d class %d: mean signal %.3g at ρ ≈ 1, want 0: rows and classes are misaligned", step, b, pr.BinSignal[b])
			}
		}
		if rows != rec.NumRows {
			t.Errorf("step %d: Σ_b count·arm = %d, rows %d", step, rows, rec.NumRows)
		}
		varied = varied || len(arms) > 1
		t.Logf("step %d: classes %v arms %v acc %.3f μ %.3f", step, rec.BinCount, rr.BinN, met.AccMean, rr.Mu)
		if !(met.AccMean > 0.2 && met.AccMean < 0.8) {
			t.Errorf("step %d: accuracy %v, want mixed rewards", step, met.AccMean)
		}
		if want := step * 2 * ((N + mb - 1) / mb); met.Updates != want {
			t.Errorf("step %d: %d optimizer updates, want %d (2 epochs × %d mini-batches per step)", step, met.Updates, want, (N+mb-1)/mb)
		}
		if met.PPOKL > 1e-5 || met.PPOKL < -1e-5 {
			t.Errorf("step %d: ppo_kl %v, want ≈ 0 (the ratio must stay 1 for the alignment check)", step, met.PPOKL)
		}
	}
	if !varied {
		t.Error("every step gave every prompt the same rollout count; the test needs varying n_i")
	}
	if st := tr.Ctrl.State().Rollout; st == nil || st.Var[0] <= 0 {
		t.Errorf("Rollout-GDRO state after 3 steps: %+v", st)
	}
}

// TestUpdateRowAlignment drives one step's generation and update with
// chosen rollout counts and a distinct advantage per row (not summing to 0,
// so a row whose signal is credited to another row is caught by value). The
// rows come back prompt-contiguous in plan order with their prompt's n_i as
// group size, and after micro-batches that split prompts, mini-batches of
// unequal row counts and two PPO epochs, row r's signal is −A_r (ρ ≈ 1).
func TestUpdateRowAlignment(t *testing.T) {
	tr := rolloutTrainer(t)
	n := []int{2, 6, 3, 5, 2, 4, 6, 2} // prompts' rollout counts (arms 2…6)
	prompts := tr.train.ds.Prompts[:len(n)]
	met := &StepMetrics{}
	rows, _, err := tr.generate(context.Background(), prompts, n, 0, len(n), 0)
	if err != nil {
		t.Fatal(err)
	}
	tr.score(prompts, rows)
	var want []int // prompt index of each row: prompt-contiguous, in plan order
	for i, k := range n {
		want = append(want, slices.Repeat([]int{i}, k)...)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for r := range rows {
		if rows[r].prompt != want[r] || rows[r].group != n[want[r]] {
			t.Fatalf("row %d: prompt %d group %d, want prompt %d group %d", r, rows[r].prompt, rows[r].group, want[r], n[want[r]])
		}
	}
	spans := microBatches(n, tr.Cfg.Train.MiniBatchPrompts, tr.Cfg.Train.MicroBatchRows)
	if err := tr.logProbs(rows, spans); err != nil {
		t.Fatal(err)
	}
	for r := range rows {
		rows[r].adv = 0.1 * float64(r+1) * float64(1-2*(r%2)) // 0.1, −0.2, 0.3, …
		rows[r].weight = 1
	}
	before := tr.updates
	signal, _, _, err := tr.update(spans, rows, met)
	if err != nil {
		t.Fatal(err)
	}
	// mini-batches of 5 prompts: [2 6 3 5 2] = 18 rows, [4 6 2] = 12 rows
	if got := tr.updates - before; got != 4 {
		t.Errorf("%d optimizer updates, want 4 (2 epochs × 2 mini-batches)", got)
	}
	for r, s := range signal {
		if a := rows[r].adv; math.Abs(s+a) > 1e-5*math.Abs(a) {
			t.Errorf("row %d (prompt %d): signal %.9f, want −A = %.9f", r, rows[r].prompt, s, -a)
		}
	}
}
