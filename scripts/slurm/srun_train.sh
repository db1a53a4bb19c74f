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
# together; srun then exits 3 and the job requeues itself. A failed requeue
# ends the job with status 3 (FAILED).
#
# Cancellation: SIGTERM alone (scancel, scontrol requeue, a time limit or
# pre-emption without the warning) reaches every rank from Slurm itself, so
# the ranks checkpoint and exit 3, but the job is not requeued: a cancelled
# job stays CANCELLED. (The trap does not pass SIGTERM on inside a job: a
# second signal would end a rank before its checkpoint.)
#
# A rank that fails (any non-zero exit, at start-up or later) ends the step
# at once (srun --kill-on-bad-exit=1: Slurm sends SIGTERM to the other
# ranks, then SIGKILL after KillWait) rather than leaving the others waiting
# for it until dist.timeout_s. When the ranks stop together after a
# warning, the first to exit 3 ends the step the same way: a rank still on
# its way out then dies by that SIGTERM (srun exits 143), which, after the
# warning, requeues the job as status 3 does, the checkpoint being written
# before any rank exits.
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
"$SRUN" --ntasks="${SLURM_NTASKS:?not inside an sbatch allocation}" --kill-on-bad-exit=1 \
  --open-mode=append --output="$LOG_DIR/$name-$job-rank%t.out" \
  "$GDROTRAIN" train --config "$CONFIG" --device "$DEVICE" --resume auto "$@" &
pid=$!
# srun forwards SIGUSR1 to every task; a SIGTERM would make it tear the step
# down instead, so what is passed on goes as SIGUSR1. Only the warning
# (SIGUSR1) asks for a requeue. Inside a job SIGTERM is not passed on: Slurm
# sends it to every rank itself.
warned=0
trap 'warned=1; echo "signal USR1 (pre-emption warning): asking the ranks (srun pid $pid) to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' USR1
trap 'echo "signal INT: asking the ranks (srun pid $pid) to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' INT
if [ -n "${SLURM_JOB_ID:-}" ]; then
  trap 'echo "signal TERM: the ranks have it too; they checkpoint and stop"' TERM
else
  trap 'echo "signal TERM: asking the ranks (srun pid $pid) to checkpoint and stop"; kill -USR1 "$pid" 2>/dev/null' TERM
fi

status=0
while :; do
  wait "$pid"
  status=$?
  # wait returns early (status > 128) when a trapped signal arrives; keep
  # waiting while the ranks are still writing their checkpoint.
  kill -0 "$pid" 2>/dev/null && continue
  # It ended just as the signal came: that wait's status may be the
  # signal's; one more wait may return its own (bash answers 127 or -1 when
  # the first was its own, or when it no longer knows).
  if [ "$status" -gt 128 ]; then
    wait "$pid" 2>/dev/null
    s=$?
    if [ "$s" -ge 0 ] && [ "$s" -ne 127 ]; then status=$s; fi
  fi
  break
done

echo "gdrotrain ranks exited with status $status at $(date -u +%FT%TZ)"
# After the warning: status 3 (every rank checkpointed and stopped), or a
# status above 128 (a rank ended by a signal: the step's teardown after the
# first rank's exit, or the time limit) continue in a requeued job from the
# newest complete checkpoint. Any other status ends the job with it.
if [ "$warned" -eq 1 ] && { [ "$status" -eq "$EXIT_REQUEUE" ] || [ "$status" -gt 128 ]; }; then
  if [ -n "${SLURM_JOB_ID:-}" ]; then
    echo "pre-empted (status $status); requeueing job $SLURM_JOB_ID"
    if ! scontrol requeue "$SLURM_JOB_ID"; then
      echo "scontrol requeue $SLURM_JOB_ID failed: the job ends here; submit it again to continue (--resume auto)" >&2
      exit "$EXIT_REQUEUE"
    fi
  fi
  exit 0
fi
if [ "$status" -eq "$EXIT_REQUEUE" ]; then
  echo "checkpoint written; stopped by SIGTERM/SIGINT without a pre-emption warning: not requeueing (scancel: the job ends; scontrol requeue: Slurm requeues it; either way --resume auto continues)"
fi
exit "$status"
