#!/usr/bin/env bash
# HarborJob status probe: read-only, run at program time on every `pulumi up`/`preview`, before
# any code is copied to the host. Whether the job is absent, running, finished or interrupted,
# and the launch token the launch's trigger must hold (components/harbor_job.py). The reading is
# contracts/jobdir.py (the one owner of Harbor's job layout), inlined below and run
# with this host's python3. Never fails: an unreadable state is "unknown".
#
# Inputs (environment): JOB_NAME, JOBS_DIR, LOG_DIR. Outputs (last stdout line, JSON): state,
# token, pid.
set -uo pipefail

program=$(cat <<'BENCHSTACK_PY'
# benchstack:include contracts/jobdir.py
BENCHSTACK_PY
)
python3 - status "${JOBS_DIR:-}" "${LOG_DIR:-}" "${JOB_NAME:-}" <<<"$program" \
  || echo '{"state": "unknown", "token": "start", "pid": null}'
