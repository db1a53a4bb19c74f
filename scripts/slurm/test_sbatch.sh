#!/usr/bin/env bash
# Tests scripts/slurm/gdrotrain.sbatch without Slurm: syntax (bash -n), and
# a run under a fake SLURM_* environment with a fake gdrotrain that waits
# for SIGUSR1 and exits 3, and a fake scontrol that records the requeue.
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
