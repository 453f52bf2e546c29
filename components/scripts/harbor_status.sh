#!/usr/bin/env bash
# HarborJob status probe: read-only, run at program time on every `pulumi up`/`preview`. It says
# whether the job is absent, running, finished or interrupted, and gives the launch token the
# launch command's trigger must hold (see components/harbor_job.py): the recorded token while
# Harbor runs or has finished (no change, no re-run), a new one when the job was interrupted
# (the launch is replaced, which resumes the job). Never fails: an unreadable state is "unknown".
#
# The reading is components/jobdir.py (the one reader of Harbor's job directory), inlined below
# by the host seam and run with this host's python3.
#
# Inputs (environment, with defaults):
#   JOB_NAME         the job name                                   (required)
#   JOBS_DIR         Harbor's jobs dir                              (required)
#   LOG_DIR          where the launch keeps the PID and token       (JOBS_DIR/../logs)
# Outputs (last stdout line, JSON): state, token, pid
set -uo pipefail

unknown='{"state": "unknown", "token": "start", "pid": null}'
if [[ -z "${JOB_NAME:-}" || -z "${JOBS_DIR:-}" ]]; then
  echo "$unknown"
  exit 0
fi
LOG_DIR=${LOG_DIR:-$(dirname "$JOBS_DIR")/logs}
program=$(cat <<'BENCHSTACK_PY'
# benchstack:include ../jobdir.py
BENCHSTACK_PY
)
python3 - status "$JOBS_DIR" "$LOG_DIR" "$JOB_NAME" <<<"$program" || echo "$unknown"
