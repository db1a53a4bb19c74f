// Package gdro implements the curriculum controllers of gdrotrain: the online
// difficulty classifier, Prompt-GDRO and Rollout-GDRO (docs/algorithm.md
// §4, §6, §7), a model-free simulator (gdro-sim) and a trace replayer
// (gdro-replay). Everything here is pure, deterministic Go: no model, no GPU,
// no hidden randomness, and every piece of state is a JSON-marshalable struct
// that a checkpoint saves and restores exactly.
//
// # Files
//
//	config.go      Config (yaml+json tags), DefaultConfig, presets, Validate
//	classifier.go  Classifier: per-UID any-correct window → bin, hysteresis
//	prompt.go      Prompt: EMA bin scores → bin weights → advantage multipliers
//	rollout.go     Rollout: per-bin arm bandits, shadow price μ (paper /
//	               reference_compat)
//	dp.go          MatchBudget: budget-exact arm selection (docs/algorithm.md §7.3)
//	controller.go  Controller (the trainer's entry point), StepRecord, State
//	sim.go         Simulate (gdro-sim), drawing from internal/rng
//	replay.go      Replay (gdro-replay) and the trace format
//
// # Contract with the trainer
//
// Build one Controller per run, then per step (docs/architecture.md, one
// training step):
//
//	ctrl, err := gdro.New(cfg)                 // cfg: gdro.Config from the run config
//	plan, err := ctrl.Plan(uids)               // (N) stable prompt UIDs
//	//   plan.Classes (N): class per prompt, from history of earlier steps only
//	//   plan.N       (N): rollouts to generate per prompt (Σ = N·n̄ exactly)
//	//   generate plan.N[i] rollouts of prompt i, prompt-contiguous; score them;
//	//   GRPO advantages grouped per prompt
//	w, err := ctrl.Weights(plan)
//	//   w.Row (R): multiply row r's advantage by w.Row[r] (ones when
//	//   Prompt-GDRO is off or prompt.apply is false)
//	//   actor update; record ℓ_r per row with the UNWEIGHTED advantage (docs/algorithm.md §6.2)
//	rec, err := ctrl.Observe(plan, gdro.Rows{Loss: ℓ, KL: kl, Correct: ok})
//	//   updates Prompt-GDRO scores, Rollout-GDRO arms and μ, then the
//	//   classifier history; rec is the step's metrics record (below)
//	state := ctrl.State()                      // into the checkpoint (JSON)
//	err = ctrl.Restore(state)                  // on resume, same config
//
// Rows are prompt-contiguous in plan order: prompt 0's N[0] rows, then prompt
// 1's, …; R = plan.Rows(). Correct (reward > 0.5, docs/algorithm.md §3.5) is always
// required; Loss when the configuration reads it (the surrogate signals, the
// loss utilities); KL for the surrogate_kl signal. Plans are observed once, in
// step order; Observe validates its input before changing anything. Weights
// changes nothing and may be called any number of times. The components
// (Classifier, Prompt, Rollout, MatchBudget) can also be used on their own.
//
// # Classes and per-bin arrays
//
// A class is an int: 0 … B−1 are the accuracy bins (0 = accbin_0 = lowest
// estimated solve rate = hardest, docs/algorithm.md §11 item 22), and B is accbin_excl when
// classifier.exclude_extremes is on. Every per-class array, in Go and in the
// JSONL, has length C = B (+1 with accbin_excl) and this order; labels come
// from Controller.Labels.
//
// # Per-step JSONL (gdro-sim --out, gdro-replay, trainer metrics)
//
// One JSON object per line (StepRecord; ReplayRecord adds per-prompt arrays).
// Dimension legend for the whole package: N prompts in a step, R = Σ_i n_i
// rows, B accuracy bins, C classes (B, +1 with accbin_excl), K arms.
//
//	step                int        1-based step
//	method              string     grpo | prompt | rollout | prompt+rollout
//	num_prompts, num_rows int      N, R = Σ n_i
//	bin_labels          [C]string  accbin_0 … accbin_{B−1} [, accbin_excl]
//	bin_count           [C]int     prompts per class (this step's labels)
//	bin_share           [C]float   prompt share q̂_b
//	bin_acc             [C]float   mean row correctness (0 if absent)
//	bin_n_mean          [C]float   mean rollouts actually given per prompt
//	mean_bin            float      mean bin index over prompts (excl not counted)
//	acc                 float      mean row correctness
//	wse, wse_uniform    float      WSE proxy of this allocation / of n_i = n̄
//	wse_ratio           float      wse / wse_uniform (< 1: better than uniform)
//	Prompt-GDRO (present when enabled):
//	bin_weight          [C]float   p_b used this step (0 absent)
//	bin_mult            [C]float   computed advantage multiplier (0 absent)
//	bin_signal          [C]float   raw mean signal before share normalization
//	bin_score           [C]float   EMA score S_b after this step
//	weight_entropy      float      H(p) over present classes, nats
//	mult_min/mean/max   float      over rows; weights_applied bool
//	Rollout-GDRO (present when enabled):
//	rollout_mode        string     paper | reference_compat
//	arms                [K]int     n_min … n_max
//	bin_n               [C]int     arm chosen per class by the DP (0 absent)
//	bin_n_unconstrained [C]float   unconstrained choice n_b^u (paper)
//	arm_prob            [C][K]float arm probabilities at decision time
//	arm_entropy         float      mean H(p_b) over the DP's classes, nats
//	mu, dmu             float      μ used; μ_{t+1} − μ_t (report's dyn_lead_lag_corr)
//	violation           float      Σ_b q̂_b·n_b^u − n̄
//	budget_target/total int        N·n̄, Σ n_i;  budget_exact bool
//	using_prev_labels   bool       reference_compat: stale labels drove the DP
//	gdro-sim only: sim_solve_mean, sim_batch_solve_mean, sim_wse_estimated,
//	sim_wse_best_ratio (the best ratio any per-class allocation could reach)
//	gdro-replay only: uids [N]string, prompt_bin [N]int, prompt_n [N]int,
//	prompt_mult [N]float
//
// WSE is the weighted standard-error proxy sqrt((1/N)·Σ_i σ_i²/n_i), σ_i² the
// within-prompt variance of correctness — the variance of the stratified
// estimate of mean reward, whose minimizer under Σ_i n_i = N·n̄ is the
// square-root law n_b ∝ σ_b. Outside the simulator σ_i² is the class's pooled
// unbiased sample variance from the step's rows; the simulator uses the true
// p_i(1 − p_i) and keeps the estimate in sim_wse_estimated.
//
// # Choices where the reference leaves room (docs/algorithm.md §11)
//
//   - Rollout-GDRO mode paper (default) is the intended controller, fixed
//     (items 1–5): current prompts classified before generation, each prompt
//     gets its own class's arm; utilities credited only to the rows that
//     used the arm and pooled per class (EMA β = 0.4, first observation
//     initializes), so one stale draw cannot pin an arm; the default utility
//     is the variance reduction 4·σ̂²·(1 − n̄/n) from the class's pooled
//     within-prompt variance, neg_loss the paper's −mean loss (see
//     rollout.go); μ moves by projected dual ascent on the argmax best
//     responses (μ ∈ [0, mu_max]) and is a price in the arm scores
//     û_b(n) − μ·(n − n̄), i.e. the paper's arm loss −Ĵ_b(n) + μ·n. The DP
//     picks the exact-budget configuration of highest joint probability
//     Π_b p_b(n_b) (dp_weight bin, the paper's), which μ shapes; dp_weight
//     prompt weighs each class by its prompt count, so μ cancels and the DP
//     maximizes Σ_b c_b·û_b(n_b). The reference_compat DP is unweighted.
//   - reference_compat is bug for bug (docs/algorithm.md §7.4, §7.7): stale positional labels
//     with stride n̄, no arm or μ updates, lexicographic tie-break. Not
//     reproduced: the docs/algorithm.md §7.9 proportional fallback (unreachable with
//     contiguous arms; an inexact DP result is used as is and reported), the
//     doubled Prompt-GDRO EMA of the reference's Rollout-GDRO runs (item 20;
//     those scores are never applied, so no allocation changes), the
//     Prompt-GDRO object sharing (η, γ
//     are the rollout section's; probabilities are uniform either way).
//   - Prompt-GDRO follows the reference (item 7): softmax + γ over present
//     classes, mean-1 over rows, cap after the renormalization; the signal is
//     configurable (item 6): surrogate (default), surrogate_kl, reward.
//     share_norm defaults to on for the surrogate signals (reference) and off
//     for the reward signal, whose per-bin value 1 − acc is already a mean:
//     dividing it by the share lets every rare bin reach the cap (gdro-sim
//     shows it). score_clip C and share_floor default off. Focus zeroing
//     every present class falls back to all-ones multipliers and sets
//     focus_fallback (item 27). The first observation initializes the EMA and
//     never-observed classes score 0 (item 28): this "EMA debiasing" is what
//     lets a rarely present bin reach its full score as fast as a common one.
//   - Classifier: bins by edges only; without edges, num_bins gives edges j/B
//     through the same hysteresis rule (item 10). accbin_excl as in the
//     reference (item 9). Any-of-n_i indicators and windows over appearances
//     (item 8). An empty UID is an error (items 21, 23: use Classifier.Acc
//     for read-only lookups such as validation prompts).
//   - Arms may be given as an explicit list (rollout.arms, e.g. 2,4,8,16);
//     then an exact budget may not exist and the DP returns the nearest
//     total with budget_exact false.
package gdro
