#!/usr/bin/env bash
# Small-scale study: GRPO vs Prompt-GDRO vs Rollout-GDRO (paper mode) on the
# demo's synthetic arithmetic task, at equal rollout compute (every method
# spends 8 rollouts per prompt on average; Rollout-GDRO redistributes them
# over arms 2..12 with the exact-budget DP), for several seeds. Each seed
# warms one model up once and trains the three methods from it.
#
#   make build && bash scripts/study.sh            # SEEDS="1 2 3" OUT=runs/study
#
# It prints a table of final held-out mean@4, pooled pass@4 and worst-group
# accuracy, mean ± std over seeds (scripts/study_summary.py).
set -euo pipefail
BIN=${BIN:-bin/gdrotrain}
OUT=${OUT:-runs/study}
SEEDS=${SEEDS:-"1 2 3"}
for s in $SEEDS; do
  d="$OUT/seed$s"
  "$BIN" demo --out "$d" --seed "$s" --set run.name=prompt_gdro --set train.method=prompt_gdro
  "$BIN" demo --out "$d" --seed "$s" --reuse-warmup --set run.name=grpo --set train.method=grpo
  "$BIN" demo --out "$d" --seed "$s" --reuse-warmup --set run.name=rollout_gdro --set train.method=rollout_gdro
done
python3 "$(dirname "$0")/study_summary.py" "$OUT"
