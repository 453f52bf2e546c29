#!/usr/bin/env bash
# HarborJob status probe: read-only, run at program time on every `pulumi up`/`preview`. It says
# whether the job is absent, running, finished or interrupted, and gives the launch token the
# launch command's trigger must hold (see components/harbor_job.py): the recorded token while
# Harbor runs or has finished (no change, no re-run), a new one when the job was interrupted
# (the launch is replaced, which resumes the job). Never fails: an unreadable state is "unknown".
#
# Inputs (environment, with defaults):
#   JOB_NAME         the job name                                   (required)
#   JOBS_DIR         Harbor's jobs dir                              (required)
#   LOG_DIR          where the launch keeps the PID and token       (JOBS_DIR/../logs)
# Outputs (last stdout line, JSON): state, token, pid
set -uo pipefail

LOG_DIR=${LOG_DIR:-$(dirname "${JOBS_DIR:-.}")/logs}
if [[ -z "${JOB_NAME:-}" || -z "${JOBS_DIR:-}" ]]; then
  echo '{"state": "unknown", "token": "start", "pid": null}'
  exit 0
fi
job_dir="$JOBS_DIR/$JOB_NAME"
pid_file="$LOG_DIR/$JOB_NAME.pid"
token=$(cat "$LOG_DIR/$JOB_NAME.launch-token" 2>/dev/null || true)
pid=$(cat "$pid_file" 2>/dev/null || true)
[[ "$pid" =~ ^[0-9]+$ ]] || pid=""

state=interrupted
if [[ ! -f "$job_dir/config.json" && -z "$token" ]]; then
  state=absent
  token=start
elif [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
  && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$JOB_NAME"; then
  state=running
elif [[ -f "$job_dir/result.json" ]] && ! grep -Eq '"finished_at": *null' "$job_dir/result.json"; then
  state=finished
fi
if [[ "$state" == interrupted ]]; then
  # New for each interruption (the dead PID differs), so each one gets exactly one resume.
  token="resume-$(printf '%s|%s' "$token" "$pid" | sha256sum | cut -c1-12)"
fi
printf '{"state": "%s", "token": "%s", "pid": %s}\n' "$state" "$token" "${pid:-null}"
