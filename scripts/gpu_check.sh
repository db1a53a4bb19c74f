#!/usr/bin/env bash
# The former name of scripts/gpu_kit.sh (the GPU kit's run.sh; see
# docs/gpu-kit.md), kept so that older instructions still work: OUT names
# the results folder, and every option of gpu_kit.sh is passed on.
exec bash "$(dirname "$0")/gpu_kit.sh" "$@"
