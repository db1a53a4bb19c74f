#!/usr/bin/env bash
# Tests the batch scripts without Slurm: syntax (bash -n), and runs under a
# fake SLURM_* environment with a fake gdrotrain that waits for SIGUSR1 and
# exits 3, and a fake scontrol that records the requeue. The multi-GPU
# scripts run under fake_srun.sh, which starts SLURM_NTASKS copies of the
# task with their SLURM_PROCID/SLURM_LOCALID, forwards SIGUSR1 to them and
# exits with the highest task status, as srun does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script="$here/gdrotrain.sbatch"
bash -n "$script"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/gdrotrain" <<'FAKE'
#!/usr/bin/env bash
echo "fake gdrotrain $*" >> "$FAKE_LOG"
trap 'echo "fake gdrotrain: got USR1" >> "$FAKE_LOG"; exit 3' USR1
for _ in $(seq 100); do sleep 0.1; done
exit 0
FAKE
cat > "$tmp/scontrol" <<'FAKE'
#!/usr/bin/env bash
echo "scontrol $*" >> "$FAKE_LOG"
FAKE
chmod +x "$tmp/gdrotrain" "$tmp/scontrol"
export FAKE_LOG="$tmp/log" PATH="$tmp:$PATH" SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1
CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" bash "$script" --set optim.lr=1e-6 > "$tmp/out" 2>&1 &
job=$!
sleep 1
kill -USR1 "$job"          # what --signal=B:USR1@300 does
wait "$job" || { echo "batch script failed"; cat "$tmp/out"; exit 1; }

expect() { grep -qF -- "$1" "$tmp/log" || { echo "missing: $1"; cat "$tmp/log" "$tmp/out"; exit 1; }; }
expect "fake gdrotrain train --config my.yaml --resume auto --set optim.lr=1e-6"
expect "fake gdrotrain: got USR1"
expect "scontrol requeue 4242"

# Without CONFIG the script refuses to start.
if CONFIG= bash "$script" > /dev/null 2>&1; then echo "ran without CONFIG"; exit 1; fi
echo "slurm script: ok"

# The multi-GPU scripts.
cat > "$tmp/gdrotrain" <<'FAKE'
#!/usr/bin/env bash
echo "rank $SLURM_PROCID local $SLURM_LOCALID of $SLURM_NTASKS: gdrotrain $*" >> "$FAKE_LOG"
echo "$GDROTRAIN_DIST_TOKEN" >> "$FAKE_LOG.tokens"  # the job token each task received
trap 'echo "rank $SLURM_PROCID: got USR1" >> "$FAKE_LOG"; exit 3' USR1
for _ in $(seq 100); do sleep 0.1; done
exit 0
FAKE
cp "$here/fake_srun.sh" "$tmp/srun"
chmod +x "$tmp/gdrotrain" "$tmp/srun"
# The asynchronous script (generation ranks) passes its settings first.
async_sets="--set dist.rollout_ranks=2 --set train.max_off_policy_steps=1 --set loss.rollout_correction.mode=token_tis "
for case in "gdrotrain-8gpu.sbatch 8 1" "gdrotrain-2node.sbatch 16 2" "gdrotrain-async-8gpu.sbatch 8 1 async"; do
  set -- $case
  pre=""
  [ "${4:-}" = async ] && pre=$async_sets
  multi="$here/$1"
  bash -n "$multi"
  bash -n "$here/srun_train.sh"
  # The #SBATCH lines ask for one task per GPU, and the tasks we fake.
  grep -q "^#SBATCH --ntasks-per-node=8" "$multi" || { echo "$1: not 8 tasks per node"; exit 1; }
  grep -q "^#SBATCH --gpus-per-node=8" "$multi" || { echo "$1: not 8 GPUs per node"; exit 1; }
  grep -q "^#SBATCH --nodes=$3\$" "$multi" || { echo "$1: not $3 node(s)"; exit 1; }
  : > "$tmp/log"
  : > "$tmp/log.tokens"
  mkdir -p "$tmp/submit/scripts"
  ln -sfn "$here" "$tmp/submit/scripts/slurm"
  ( cd "$tmp/submit" && exec env SLURM_SUBMIT_DIR="$tmp/submit" SLURM_JOB_ID=77 SLURM_JOB_NAME=gt \
      SLURM_NTASKS=$2 SLURM_JOB_NUM_NODES=$3 CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" \
      GDROTRAIN_DIST_TOKEN=submit-shell-token \
      bash "$multi" --set optim.lr=1e-6 ) > "$tmp/out" 2>&1 &
  job=$!
  for _ in $(seq 50); do [ "$(grep -c '^rank .* of' "$tmp/log")" -ge "$2" ] && break; sleep 0.1; done
  kill -USR1 "$job"
  wait "$job" || { echo "$1: batch script failed"; cat "$tmp/out" "$tmp/log"; exit 1; }
  expect "srun --ntasks=$2 --kill-on-bad-exit=0 --open-mode=append --output=logs/gt-77-rank%t.out"
  for ((r = 0; r < $2; r++)); do
    expect "rank $r local $(( r % 8 )) of $2: gdrotrain train --config my.yaml --device cuda --resume auto ${pre}--set optim.lr=1e-6"
    expect "rank $r: got USR1"
  done
  expect "scontrol requeue 77"
  [ -d "$tmp/submit/logs" ] || { echo "$1: no logs folder"; exit 1; }
  # Every task got the same job token: 64 hex digits, a fresh one (not the
  # submitting shell's), printed nowhere.
  [ "$(sort -u "$tmp/log.tokens" | wc -l)" -eq 1 ] && [ "$(wc -l < "$tmp/log.tokens")" -eq "$2" ] ||
    { echo "$1: the tasks' tokens differ or are missing"; cat "$tmp/log.tokens"; exit 1; }
  token=$(head -1 "$tmp/log.tokens")
  [[ $token =~ ^[0-9a-f]{64}$ ]] || { echo "$1: the job token is not 64 hex digits"; exit 1; }
  [ "$token" != "submit-shell-token" ] || { echo "$1: the job token is the submitting shell's"; exit 1; }
  if grep -rqF -- "$token" "$tmp/out" "$tmp/log" "$tmp/submit/logs"; then
    echo "$1: the job token was printed"; exit 1
  fi
done
echo "multi-GPU slurm scripts: ok"
