#!/usr/bin/env bash
# HarborRerun history probe: read-only, run at program time. Lists the dirs of the main job's
# rerun jobs already on the host, oldest first, so that the stack outputs (and the audit's
# merge) keep the earlier rounds after `harbor.reruns` changed. Never fails: unreadable is [].
#
# The reading is components/jobdir.py, inlined below by the host seam and run with python3.
#
# Inputs (environment, with defaults):
#   JOB_NAME   the main job's name      (required)
#   JOBS_DIR   Harbor's jobs dir        (required)
# Outputs (last stdout line, JSON): job_dirs
set -uo pipefail

none='{"job_dirs": []}'
if [[ -z "${JOB_NAME:-}" || -z "${JOBS_DIR:-}" ]]; then
  echo "$none"
  exit 0
fi
program=$(cat <<'BENCHSTACK_PY'
# benchstack:include ../jobdir.py
BENCHSTACK_PY
)
python3 - reruns "$JOBS_DIR" "$JOB_NAME" <<<"$program" || echo "$none"
