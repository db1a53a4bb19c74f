#!/usr/bin/env bash
# The body of the multi-GPU batch scripts (gdrotrain-8gpu.sbatch,
# gdrotrain-2node.sbatch): one srun step, one gdrotrain process per GPU,
# pre-emption forwarded, requeue when the ranks exit 3 together.
#
# Each task reads its place from Slurm's variables (SLURM_PROCID = rank,
# SLURM_NTASKS = world size, SLURM_LOCALID = its GPU on the node; rank 0
# listens on the first node of the step's node list, on a port derived from
# SLURM_JOB_ID unless MASTER_PORT is set). The tasks see every GPU of their
# node and each takes the one of its local rank, as torchrun does.
#
# The job's secret: a random GDROTRAIN_DIST_TOKEN made here, on every start
# of the job, and passed to every task through srun's environment; the ranks
# prove to each other that they hold it, so no other process reaching rank
# 0's port joins the job. It is written nowhere (not to the job's output,
# nor the run folder).
#
# Pre-emption: Slurm signals this batch shell (--signal=B:USR1@300); the
# trap sends SIGUSR1 to srun, which forwards it to every task. Any rank that
# gets it makes all ranks finish the step, write one checkpoint and exit 3
# together; srun then exits 3 and the job requeues itself.
#
# Environment: CONFIG (required), GDROTRAIN (binary, default bin/gdrotrain),
# DEVICE (default cuda: each rank takes GPU cuda:SLURM_LOCALID), SRUN
# (default srun), LOG_DIR (default logs). Arguments go to gdrotrain train.
set -uo pipefail

: "${CONFIG:?set CONFIG to a gdrotrain YAML config}"
GDROTRAIN=${GDROTRAIN:-bin/gdrotrain}
DEVICE=${DEVICE:-cuda}
SRUN=${SRUN:-srun}
LOG_DIR=${LOG_DIR:-logs}
EXIT_REQUEUE=3
mkdir -p "$LOG_DIR"

# 32 random bytes as 64 hex digits, straight into the environment (no echo,
# no file, no command line: nothing prints it).
GDROTRAIN_DIST_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
[ ${#GDROTRAIN_DIST_TOKEN} -eq 64 ] || { echo "could not read 32 random bytes from /dev/urandom" >&2; exit 1; }
export GDROTRAIN_DIST_TOKEN

name=${SLURM_JOB_NAME:-gdrotrain}
job=${SLURM_JOB_ID:-0}
echo "gdrotrain job $job start $(date -u +%FT%TZ) (restart ${SLURM_RESTART_COUNT:-0}):" \
  "${SLURM_NTASKS:-?} tasks on ${SLURM_JOB_NUM_NODES:-?} node(s) ${SLURM_JOB_NODELIST:-}"

# One log per rank (%t is the task's rank), appended across requeues.
"$SRUN" --ntasks="${SLURM_NTASKS:?not inside an sbatch allocation}" --kill-on-bad-exit=0 \
  --open-mode=append --output="$LOG_DIR/$name-$job-rank%t.out" \
  "$GDROTRAIN" train --config "$CONFIG" --device "$DEVICE" --resume auto "$@" &
pid=$!
trap 'echo "signal: asking the ranks (srun pid $pid) to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' USR1 TERM INT

status=0
while :; do
  wait "$pid"
  status=$?
  # wait returns early (status > 128) when a trapped signal arrives; keep
  # waiting while the ranks are still writing their checkpoint.
  kill -0 "$pid" 2>/dev/null || break
done

echo "gdrotrain ranks exited with status $status at $(date -u +%FT%TZ)"
if [ "$status" -eq "$EXIT_REQUEUE" ]; then
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "checkpoint written; requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
  fi
  exit 0
fi
exit "$status"
