#!/usr/bin/env bash
# A fake srun for the batch scripts' tests (test_sbatch.sh and
# cmd/gdrotrain's TestSrunScriptTwoRanks): SLURM_NTASKS copies of the
# command over SLURM_JOB_NUM_NODES nodes (default 1), each with its
# SLURM_PROCID and SLURM_LOCALID and its output in --output (%t: the
# task's rank; default: this script's stdout); SIGUSR1 and SIGTERM are
# forwarded to every task, and the exit status is the highest task's, or
# 128 + the signal of a task ended by one, as srun's. With
# --kill-on-bad-exit=1, the first task to exit non-zero ends the others
# with SIGTERM, as srun does. The command line is appended to $FAKE_LOG
# when it is set.
[ -n "${FAKE_LOG:-}" ] && echo "srun $*" >> "$FAKE_LOG"
out=
kill_bad=0
while [ "${1#--}" != "$1" ]; do
  case "$1" in
    --output=*) out=${1#--output=} ;;
    --kill-on-bad-exit=1) kill_bad=1 ;;
  esac
  shift
done
per=$(( SLURM_NTASKS / ${SLURM_JOB_NUM_NODES:-1} ))
pids=()
for ((r = 0; r < SLURM_NTASKS; r++)); do
  if [ -n "$out" ]; then
    SLURM_PROCID=$r SLURM_LOCALID=$(( r % per )) "$@" >> "${out//%t/$r}" 2>&1 &
  else
    SLURM_PROCID=$r SLURM_LOCALID=$(( r % per )) "$@" &
  fi
  pids+=($!)
done
trap 'kill -USR1 "${pids[@]}" 2>/dev/null' USR1
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM
status=0
running=("${pids[@]}")
killed=0
# Poll: `wait PID` of a task that has ended returns its status at once.
while [ "${#running[@]}" -gt 0 ]; do
  rest=()
  for p in "${running[@]}"; do
    if kill -0 "$p" 2>/dev/null; then rest+=("$p"); continue; fi
    while :; do wait "$p"; s=$?; kill -0 "$p" 2>/dev/null || break; done
    [ "$s" -gt "$status" ] && status=$s
    if [ "$s" -ne 0 ] && [ "$kill_bad" = 1 ] && [ "$killed" = 0 ]; then
      killed=1
      echo "srun: error: a task exited with status $s: terminating the step" >&2
      kill -TERM "${pids[@]}" 2>/dev/null
    fi
  done
  running=("${rest[@]}")
  [ "${#running[@]}" -gt 0 ] && sleep 0.05
done
exit "$status"
