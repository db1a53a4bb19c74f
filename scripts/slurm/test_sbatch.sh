#!/usr/bin/env bash
# Tests the batch scripts without Slurm: syntax (bash -n), and runs under a
# fake SLURM_* environment with a fake gdrotrain that waits for SIGUSR1 or
# SIGTERM and exits 3, and a fake scontrol that records the requeue (and
# fails it when FAKE_SCONTROL_FAIL is set). The multi-GPU scripts run under
# fake_srun.sh, which starts SLURM_NTASKS copies of the task with their
# SLURM_PROCID/SLURM_LOCALID, forwards SIGUSR1 to them, ends the step when a
# task fails (--kill-on-bad-exit=1) and exits with the highest task status,
# as srun does. Each script runs in a process group of its own, so that a
# cancellation signals every process of the "job", as Slurm does:
#   - the pre-emption warning (SIGUSR1 to the batch shell) requeues;
#   - SIGTERM to every process (scancel) checkpoints but never requeues, and
#     reaches the 1-task script's gdrotrain once, not twice;
#   - a failed `scontrol requeue` makes the script exit non-zero;
#   - a rank that fails at start-up ends the step at once.
# scripts/slurm/test_real_slurm.sh runs them on a real Slurm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script="$here/gdrotrain.sbatch"
bash -n "$script"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/gdrotrain" <<'FAKE'
#!/usr/bin/env bash
# A signal: "write a checkpoint" (0.3 s), exit 3. The traps are set before
# the line the test waits for.
trap 'echo "fake gdrotrain: got USR1" >> "$FAKE_LOG"; sleep 0.3; exit 3' USR1
trap 'echo "fake gdrotrain: got TERM" >> "$FAKE_LOG"; sleep 0.3; exit 3' TERM
echo "fake gdrotrain $*" >> "$FAKE_LOG"
sleep 10 &
wait $!
exit 0
FAKE
cat > "$tmp/scontrol" <<'FAKE'
#!/usr/bin/env bash
echo "scontrol $*" >> "$FAKE_LOG"
[ -z "${FAKE_SCONTROL_FAIL:-}" ] || { echo "scontrol: error: Requested operation is presently disabled" >&2; exit 1; }
FAKE
chmod +x "$tmp/gdrotrain" "$tmp/scontrol"
export FAKE_LOG="$tmp/log" PATH="$tmp:$PATH" SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1

expect() { grep -qF -- "$1" "$tmp/log" || { echo "missing: $1"; cat "$tmp/log" "$tmp/out"; exit 1; }; }
refute() { if grep -qF -- "$1" "$tmp/log"; then echo "unexpected: $1"; cat "$tmp/log" "$tmp/out"; exit 1; fi; }
# start CMD...: runs CMD in a process group of its own (its pid is the
# group's id), output in $tmp/out; job is its pid.
start() {
  : > "$tmp/log"
  setsid "$@" > "$tmp/out" 2>&1 &
  job=$!
}
# running: until the fake gdrotrain has started (its traps set).
running() { for _ in $(seq 100); do grep -q "^fake gdrotrain train" "$tmp/log" && return; sleep 0.1; done; echo "gdrotrain never started"; cat "$tmp/out"; exit 1; }
# finish WANT: waits for the job; its exit status must be WANT (nonzero:
# any but 0).
finish() {
  local s=0
  wait "$job" || s=$?
  if [ "$1" = nonzero ]; then [ "$s" -ne 0 ]; else [ "$s" -eq "$1" ]; fi ||
    { echo "batch script exited $s, want $1"; cat "$tmp/out" "$tmp/log"; exit 1; }
}

# The pre-emption warning: SIGUSR1 to the batch shell alone.
start env CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" bash "$script" --set optim.lr=1e-6
running
kill -USR1 "$job"          # what --signal=B:USR1@300 does
finish 0
expect "fake gdrotrain train --config my.yaml --resume auto --set optim.lr=1e-6"
expect "fake gdrotrain: got USR1"
expect "scontrol requeue 4242"

# scancel: SIGTERM to every process of the job. gdrotrain gets it once
# (from Slurm; the script does not forward it again), checkpoints, and the
# job is not requeued: the script exits 3.
start env CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" bash "$script"
running
kill -TERM -- "-$job"
finish 3
expect "fake gdrotrain: got TERM"
[ "$(grep -c 'got TERM' "$tmp/log")" -eq 1 ] || { echo "gdrotrain got SIGTERM twice"; cat "$tmp/log"; exit 1; }
refute "scontrol requeue"
grep -q "not requeueing" "$tmp/out" || { echo "no word that the job is not requeued"; cat "$tmp/out"; exit 1; }

# Outside a job (no SLURM_JOB_ID), a SIGTERM to the shell alone is forwarded.
start env -u SLURM_JOB_ID CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" bash "$script"
running
kill -TERM "$job"
finish 3
expect "fake gdrotrain: got TERM"
refute "scontrol requeue"

# The warning, but the requeue fails: the script exits non-zero.
start env FAKE_SCONTROL_FAIL=1 CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" bash "$script"
running
kill -USR1 "$job"
finish 3
expect "scontrol requeue 4242"
grep -q "scontrol requeue 4242 failed" "$tmp/out" || { echo "the failed requeue is not reported"; cat "$tmp/out"; exit 1; }

# Without CONFIG the script refuses to start.
if CONFIG= bash "$script" > /dev/null 2>&1; then echo "ran without CONFIG"; exit 1; fi
echo "slurm script: ok"

# The multi-GPU scripts.
cat > "$tmp/gdrotrain" <<'FAKE'
#!/usr/bin/env bash
trap 'echo "rank $SLURM_PROCID: got USR1" >> "$FAKE_LOG"; sleep 0.3; exit 3' USR1
trap 'echo "rank $SLURM_PROCID: got TERM" >> "$FAKE_LOG"; sleep 0.3; exit 3' TERM
echo "$GDROTRAIN_DIST_TOKEN" >> "$FAKE_LOG.tokens"  # the job token each task received
echo "rank $SLURM_PROCID local $SLURM_LOCALID of $SLURM_NTASKS: gdrotrain $*" >> "$FAKE_LOG"
[ "${FAKE_FAIL_RANK:-}" = "$SLURM_PROCID" ] && { echo "rank $SLURM_PROCID: failing at start-up" >> "$FAKE_LOG"; exit 1; }
sleep 10 &
wait $!
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
  ( cd "$tmp/submit" && exec setsid env SLURM_SUBMIT_DIR="$tmp/submit" SLURM_JOB_ID=77 SLURM_JOB_NAME=gt \
      SLURM_NTASKS=$2 SLURM_JOB_NUM_NODES=$3 CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" \
      GDROTRAIN_DIST_TOKEN=submit-shell-token \
      bash "$multi" --set optim.lr=1e-6 ) > "$tmp/out" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ "$(grep -c '^rank .* of' "$tmp/log")" -ge "$2" ] && break; sleep 0.1; done
  kill -USR1 "$job"
  wait "$job" || { echo "$1: batch script failed"; cat "$tmp/out" "$tmp/log"; exit 1; }
  expect "srun --ntasks=$2 --kill-on-bad-exit=1 --open-mode=append --output=logs/gt-77-rank%t.out"
  for ((r = 0; r < $2; r++)); do
    expect "rank $r local $(( r % 8 )) of $2: gdrotrain train --config my.yaml --device cuda --resume auto ${pre}--set optim.lr=1e-6"
    # USR1 from srun, or the TERM of the step's end after the first rank's
    # exit 3 (--kill-on-bad-exit=1), as on a real Slurm.
    expect "rank $r: got"
  done
  expect ": got USR1"
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

# The 8-GPU script (the 2-node one shares its body): scancel, a failed
# requeue, a rank failing at start-up.
multi="$here/gdrotrain-8gpu.sbatch"
run_multi() {
  : > "$tmp/log"
  : > "$tmp/log.tokens"
  ( cd "$tmp/submit" && exec setsid env SLURM_SUBMIT_DIR="$tmp/submit" SLURM_JOB_ID=77 SLURM_JOB_NAME=gt \
      SLURM_NTASKS=8 SLURM_JOB_NUM_NODES=1 CONFIG=my.yaml GDROTRAIN="$tmp/gdrotrain" "$@" \
      bash "$multi" ) > "$tmp/out" 2>&1 &
  job=$!
}
started() { for _ in $(seq 300); do [ "$(grep -c '^rank .* of' "$tmp/log")" -ge 8 ] && break; sleep 0.1; done; }
# scancel: SIGTERM to every process; the ranks checkpoint, no requeue.
run_multi
started
kill -TERM -- "-$job"
finish 3
for ((r = 0; r < 8; r++)); do expect "rank $r: got"; done
refute "scontrol requeue"
# The warning, but the requeue fails: the script exits non-zero.
run_multi FAKE_SCONTROL_FAIL=1
started
kill -USR1 "$job"
finish 3
expect "scontrol requeue 77"
# Rank 3 fails at start-up: the step ends at once (the others get SIGTERM,
# or die of it before they set their traps), long before the fake ranks'
# 10 s, and the job is not requeued.
run_multi FAKE_FAIL_RANK=3
started
finish nonzero
expect "rank 3: failing at start-up"
refute "scontrol requeue"
[ "$(grep -c ': got USR1\|: got TERM\|failing' "$tmp/log")" -ge 2 ] || { echo "no rank but 3 was stopped"; cat "$tmp/log"; exit 1; }
echo "multi-GPU slurm scripts: ok"
