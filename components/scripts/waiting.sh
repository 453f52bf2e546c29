#!/usr/bin/env bash
# A step that waits for something on the host the program cannot change, e.g. a rerun that
# waits for its main job to finish (components/harbor_rerun.py). It runs nothing: it says why,
# and a later `up` replaces it with the real step once the reason is gone.
#
# Inputs (environment, with defaults):
#   WAITING   why the step does not run yet    (required)
#   STEP      the step's resource name         (waiting)
# Outputs (last stdout line, JSON): waiting
set -euo pipefail

: "${WAITING:?WAITING is required: the component passes the reason}"
printf '[%s] not run yet: %s\n' "${STEP:-waiting}" "$WAITING" >&2
jq -nc --arg why "$WAITING" '{waiting: $why}'
