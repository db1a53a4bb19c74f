#!/usr/bin/env bash
# A fake srun for the batch scripts' tests (test_sbatch.sh and
# cmd/gdrotrain's TestSrunScriptTwoRanks): SLURM_NTASKS copies of the
# command over SLURM_JOB_NUM_NODES nodes (default 1), each with its
# SLURM_PROCID and SLURM_LOCALID and its output in --output (%t: the
# task's rank; default: this script's stdout); SIGUSR1 and SIGTERM are
# forwarded to every task, and the exit status is the highest task's, as
# srun's. The command line is appended to $FAKE_LOG when it is set.
[ -n "${FAKE_LOG:-}" ] && echo "srun $*" >> "$FAKE_LOG"
out=
while [ "${1#--}" != "$1" ]; do
  case "$1" in --output=*) out=${1#--output=} ;; esac
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
for p in "${pids[@]}"; do
  while :; do wait "$p"; s=$?; kill -0 "$p" 2>/dev/null || break; done
  [ "$s" -gt "$status" ] && status=$s
done
exit "$status"
