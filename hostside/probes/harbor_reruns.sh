#!/usr/bin/env bash
# HarborRerun history probe: read-only, run at program time, before any code is copied to the
# host. The dirs of the main job's rerun jobs already on the host, oldest first, so that the
# stack outputs (and the audit's merge) keep the earlier rounds after `harbor.reruns` changed.
# The reading is contracts/jobdir.py, inlined below and run with this host's python3.
# Never fails: unreadable is [].
#
# Inputs (environment): JOB_NAME, JOBS_DIR. Outputs (last stdout line, JSON): job_dirs.
set -uo pipefail

program=$(cat <<'BENCHSTACK_PY'
# benchstack:include contracts/jobdir.py
BENCHSTACK_PY
)
python3 - reruns "${JOBS_DIR:-}" "${JOB_NAME:-}" <<<"$program" || echo '{"job_dirs": []}'
