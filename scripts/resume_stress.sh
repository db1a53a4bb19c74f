#!/usr/bin/env bash
# The longer exact-resume check: a run killed with SIGKILL at KILLS random
# moments (default 20) and resumed each time must end bitwise identical to
# the uninterrupted run (trainer/resume_test.go).
set -euo pipefail
cd "$(dirname "$0")/.."
GDROTRAIN_RESUME_KILLS=${KILLS:-20} go test -count=1 -run '^TestExactResumeAfterKills$' -v ./trainer/
