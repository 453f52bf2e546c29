#!/usr/bin/env bash
# HarborJob launch (seed: "Launch the 89-task 6x full run"): start Harbor detached in its own
# session with its output appended to a log file (never a pipe: see the seed's `harbor | tee`
# pitfall), record its PID next to the log, and return once Harbor has started its first trial.
# A job dir that already exists is resumed (`harbor job resume`, same config) instead.
# Idempotent: a live Harbor process for this job, or a finished job, is left alone.
#
# Inputs (environment, with defaults):
#   HARBOR_BIN       the harbor executable in its venv              (required)
#   JOB_CONFIG       rendered job config file                       (required)
#   COMPOSE_PATH     rendered compose override file                 (required)
#   JOB_NAME         unique job name                                (required)
#   JOBS_DIR         Harbor's jobs dir (results)                    (required)
#   LOG_DIR          where the log, PID file and launch token go    (JOBS_DIR/../logs)
#   OPENAI_API_KEY   key for the OpenAI-compatible endpoint (a secret)  (EMPTY)
#   LAUNCH_TOKEN     recorded beside the PID; the status probe compares it (see harbor_job.py)  (start)
#   START_TIMEOUT_S  bound on the wait for the first trial          (600)
#   NOFILE           open-files limit for Harbor                    (65536)
#   RESOLVED_SHA256  the preflight's result (only ties this run to it)  ("")
# Outputs (last stdout line, JSON): job_name, job_dir, job_log, pid_file, pid, mode
#   (mode: run | resume | running | finished)
set -euo pipefail

OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY}
LAUNCH_TOKEN=${LAUNCH_TOKEN:-start}
START_TIMEOUT_S=${START_TIMEOUT_S:-600}
NOFILE=${NOFILE:-65536}
log() { printf '[harbor_launch] %s\n' "$*" >&2; }
die() { printf 'harbor_launch: %s\n' "$*" >&2; exit 1; }

for key in HARBOR_BIN JOB_CONFIG COMPOSE_PATH JOB_NAME JOBS_DIR; do
  [[ -n "${!key:-}" ]] || die "$key is empty: the component must pass it"
done
LOG_DIR=${LOG_DIR:-$(dirname "$JOBS_DIR")/logs}
[[ -x "$HARBOR_BIN" ]] || die "HARBOR_BIN=$HARBOR_BIN is not executable: run the install step first"
[[ -f "$JOB_CONFIG" && -f "$COMPOSE_PATH" ]] || die "config files missing ($JOB_CONFIG, $COMPOSE_PATH): run the configs step first"
job_dir="$JOBS_DIR/$JOB_NAME"
job_log="$LOG_DIR/$JOB_NAME.log"
pid_file="$LOG_DIR/$JOB_NAME.pid"
token_file="$LOG_DIR/$JOB_NAME.launch-token"
mkdir -p "$JOBS_DIR" "$LOG_DIR"

harbor_pid() {  # the recorded PID, if that process is alive and is Harbor running this job
  local pid
  pid=$(cat "$pid_file" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$JOB_NAME" || return 1
  echo "$pid"
}
finished() { [[ -f "$job_dir/result.json" ]] && ! grep -Eq '"finished_at": *null' "$job_dir/result.json"; }
started() {  # a trial has started (or the job is done), per a result.json written since launch
  [[ -f "$job_dir/result.json" ]] || return 1
  # A resumed job has an old result.json: only Harbor's rewrite after this launch counts.
  (( $(stat -c %Y "$job_dir/result.json") >= launched_at )) || return 1
  finished && return 0
  grep -Eq '"n_(running|completed)_trials": *[1-9]' "$job_dir/result.json"
}
emit() {
  printf '{"job_name": "%s", "job_dir": "%s", "job_log": "%s", "pid_file": "%s", "pid": %s, "mode": "%s"}\n' \
    "$JOB_NAME" "$job_dir" "$job_log" "$pid_file" "${1:-null}" "$2"
}

if pid=$(harbor_pid); then
  log "Harbor is already running job $JOB_NAME (PID $pid)"
  echo "$LAUNCH_TOKEN" >"$token_file"
  emit "$pid" running
  exit 0
fi
if finished; then
  log "job $JOB_NAME is finished; results in $job_dir"
  echo "$LAUNCH_TOKEN" >"$token_file"
  emit "" finished
  exit 0
fi

# Harbor 0.21 writes a trial that a SIGTERM cancels during its setup as a result.json with no
# exception, no agent run and no verifier result, and `job resume` counts it as done: a silent
# 0. Such trials are set aside (kept beside the job, never deleted) so the resume runs them.
set_aside_cancelled_setups() {
  local aside="$JOBS_DIR/.benchstack-interrupted/$JOB_NAME" trial
  while IFS= read -r trial; do
    [[ -n "$trial" ]] || continue
    mkdir -p "$aside"
    mv "$job_dir/$trial" "$aside/$trial.$(date -u +%Y%m%dT%H%M%SZ)"
    log "set aside trial $trial (cancelled during setup, never run): the resume runs it again"
  done < <("$(dirname "$HARBOR_BIN")/python" "$BENCHSTACK_CODE/jobdir.py" never-ran "$job_dir")
}

if [[ -f "$job_dir/config.json" ]]; then
  mode=resume
  # Resume re-reads config.json (same config) and re-runs cancelled and half-written trials.
  set_aside_cancelled_setups
  cmd=("$HARBOR_BIN" job resume -p "$job_dir")
else
  mode=run
  cmd=("$HARBOR_BIN" run --config "$JOB_CONFIG" --extra-docker-compose "$COMPOSE_PATH"
    --job-name "$JOB_NAME" --jobs-dir "$JOBS_DIR" --yes)
fi
if ! (ulimit -n "$NOFILE") 2>/dev/null; then
  die "cannot raise the open-files limit to $NOFILE (hard limit $(ulimit -Hn)): raise the hard limit for this user or set NOFILE"
fi

log "starting Harbor ($mode) for job $JOB_NAME; log: $job_log"
printf '\n=== %s: harbor %s (benchstack launch) ===\n' "$(date -u +%FT%TZ)" "$mode" >>"$job_log"
rm -f "$pid_file"
launched_at=$(date +%s)
# setsid: Harbor gets its own session, so neither this shell's exit nor a terminal hang-up
# reaches it; `exec` makes the recorded PID Harbor itself, the one SIGTERM must go to.
# shellcheck disable=SC2016  # expanded by the inner bash: $$ must be Harbor's own PID
HARBOR_TELEMETRY=0 LITELLM_LOCAL_MODEL_COST_MAP=True OPENAI_API_KEY="$OPENAI_API_KEY" \
  PID_FILE="$pid_file" NOFILE="$NOFILE" JOBS_PARENT="$(dirname "$JOBS_DIR")" \
  setsid bash -c 'echo $$ >"$PID_FILE"; ulimit -n "$NOFILE"; cd "$JOBS_PARENT"; exec "$@"' \
  harbor "${cmd[@]}" >>"$job_log" 2>&1 </dev/null &
echo "$LAUNCH_TOKEN" >"$token_file"

for _ in $(seq 1 50); do [[ -s "$pid_file" ]] && break; sleep 0.1; done
pid=$(cat "$pid_file" 2>/dev/null) || die "Harbor did not record its PID in $pid_file: see $job_log"
deadline=$((SECONDS + START_TIMEOUT_S))
while ! started; do
  if ! kill -0 "$pid" 2>/dev/null; then
    reason=$(grep -v '^\s*$' "$job_log" | tail -n 1 | cut -c1-300)
    die "Harbor exited before starting a trial (last log line: $reason): see $job_log"
  fi
  if ((SECONDS >= deadline)); then
    die "no trial started within ${START_TIMEOUT_S}s (Harbor PID $pid still running): see $job_log; raise start_timeout_s if images are slow to start"
  fi
  sleep 1
done
log "Harbor PID $pid has started job $JOB_NAME"
emit "$pid" "$mode"
