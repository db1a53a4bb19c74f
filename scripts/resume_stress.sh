#!/usr/bin/env bash
# The longer exact-resume check: a run killed with SIGKILL at KILLS random
# moments (default 20) and resumed each time must end bitwise identical to
# the uninterrupted run (trainer/resume_test.go). The test logs the seed of
# its kill delays; SEED=N replays them (the scheduler still decides the
# exact moment each kill lands).
set -euo pipefail
cd "$(dirname "$0")/.."
export GDROTRAIN_RESUME_KILLS=${KILLS:-20}
if [ -n "${SEED:-}" ]; then export GDROTRAIN_RESUME_SEED=$SEED; fi
go test -count=1 -run '^TestExactResumeAfterKills$' -v ./trainer/
