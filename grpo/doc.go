// Package grpo is the GRPO loss of docs/algorithm.md §5, a leaf of the
// module (it imports no package of gdrotrain): group-normalised advantages
// (advantage.go), the dual-clip surrogate with the k3 KL penalty and its
// derivative per token (token.go), the aggregations of a micro-batch and
// the per-row loss signal of docs/algorithm.md §6.2 (loss.go), the loss as
// the model's fused head takes it, one entry per token (tokenloss.go), the
// rollout correction's importance weights (correction.go), the overlong
// shaping (overlong.go) and the validation's pass@k (passatk.go). The
// trainer, the GPU self-test, the step profile and gdro-sim all call this
// package, so they compute the same loss. A new loss option goes here,
// with its key in LossConfig.
//
// Departures from the GRPO paper, all following the verl reference the
// published runs used (docs/algorithm.md §5, §11 item 13):
//   - the group standard deviation is the unbiased one (n−1), ε = 1e−6,
//     and a group of one has μ = 0, σ = 1;
//   - the KL term is the k3 ("low_var_kl") estimator in the loss, not in
//     the reward, against the frozen initial policy;
//   - the loss is a token mean per micro-batch, and micro-batch losses are
//     averaged (divided by the accumulation count) over a mini-batch — so
//     longer responses and prompts with more rollouts weigh more. Two
//     variants are options: seq-mean-token-mean (each row's token mean,
//     averaged over rows) and prompt-mean-token-mean (each prompt weighs the
//     same whatever its rollout count n_i, docs/algorithm.md §11 item 14);
//   - advantage clipping is available but off by default (the reference
//     sets ±5 and never reads it; it cannot bind for n ≤ 12).
//
// Gradients: the model's backward consumes ∂loss/∂log π per token; this
// package computes it in closed form. At the ties of max/min (measure zero
// for continuous ratios) the whole gradient goes to the first branch.
package grpo
