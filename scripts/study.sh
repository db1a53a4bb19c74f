#!/usr/bin/env bash
# Small-scale study: GRPO vs Prompt-GDRO vs Rollout-GDRO (paper mode) on the
# demo's synthetic arithmetic task, at equal rollout compute (n̄ = 4 rollouts
# per prompt for every method; Rollout-GDRO redistributes the same budget over
# arms 2…12 with the exact-budget DP). See docs/study.md
# for the design and the pre-registered criteria.
#
#   make build && bash scripts/study.sh           # SEEDS="1 2 3 4 5 6 7 8" OUT=runs/study
#   PILOT=1 SEEDS=1 bash scripts/study.sh         # the pilot: warm-up + GRPO only
#
# Per seed: `gdrotrain demo` writes the seed's disjoint warm-up / RL-pool /
# held-out sets and warms the model up ONCE (its own 1-step GRPO run, with
# n = 1 validations, is thrown away); scripts/study/rl_mix.py takes the
# RL prompts (heavy hard tail) from the pool; then each method trains from
# the same warmed-up model with scripts/study/study.yaml (`gdrotrain train`).
# Runs one training process at a time. The summary (paired differences vs
# GRPO per seed, 95% t-intervals over seeds, mechanism gates) is printed by
# scripts/study_summary.py.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gdrotrain}
OUT=${OUT:-runs/study}
SEEDS=${SEEDS:-"1 2 3 4 5 6 7 8"}
METHODS=${METHODS:-"grpo prompt_gdro rollout_gdro"}
[ "${PILOT:-0}" = 1 ] && METHODS=grpo
CFG=scripts/study/study.yaml
WARMUP_EPOCHS=${WARMUP_EPOCHS:-16}         # pilots: 24–40 epochs on 400 per group under-fit, 32 on 600 over-shoot (README)
WARMUP_PER_GROUP=${WARMUP_PER_GROUP:-600}
HELDOUT_PER_GROUP=${HELDOUT_PER_GROUP:-100} # mul-2x1 has 900 distinct problems: 600 + 200 + 100
for s in $SEEDS; do
  d="$OUT/seed$s"
  mkdir -p "$d"
  if [ ! -f "$d/model-warm/demo-warmup.json" ]; then
    echo "seed $s: warm-up → $d" >&2
    # WARMUP_PER_GROUP warm-up problems per group for WARMUP_EPOCHS epochs, a
    # 200-per-group RL pool, HELDOUT_PER_GROUP held-out problems per group;
    # the demo's own GRPO run (1 step, n = 1 validations) is thrown away.
    "$BIN" demo --out "$d" --seed "$s" \
      --set demo.warmup.epochs="$WARMUP_EPOCHS" --set demo.task.warmup_per_group="$WARMUP_PER_GROUP" --set demo.task.rl_per_group=200 \
      --set demo.task.heldout_per_group="$HELDOUT_PER_GROUP" \
      --set run.name=warmup-check --set train.steps=1 --set validation.n=1 \
      --set validation.every=1 --set checkpoint.every=1000 >"$d/warmup.report" 2>"$d/warmup.log"
  fi
  python3 scripts/study/rl_mix.py "$d/train.jsonl" "$d/rl.jsonl"
  for m in $METHODS; do
    if [ -f "$d/$m/validation.jsonl" ] && [ "$(grep -c . "$d/$m/validation.jsonl")" -ge 2 ]; then
      echo "seed $s: $m done already" >&2
      continue
    fi
    echo "seed $s: $m" >&2
    start=$(date +%s)
    "$BIN" train --config "$CFG" --overwrite \
      --set model.path="$d/model-warm" --set "data.train=[$d/rl.jsonl]" \
      --set "validation.files=[$d/heldout.jsonl]" --set run.out_dir="$d" \
      --set run.name="$m" --set run.seed="$s" --set train.method="$m" >"$d/$m.log" 2>&1
    echo "seed $s: $m took $(( $(date +%s) - start ))s" >&2
  done
done
python3 scripts/study_summary.py "$OUT"
