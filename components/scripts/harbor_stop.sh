#!/usr/bin/env bash
# HarborJob stop (the launch's delete; seed: "Stop the experiment correctly"): SIGTERM to the
# recorded Harbor PID, wait with progress while Harbor cancels its trials and tears their
# containers down (bounded: at least 30 s per wave of running trials), then remove what is left
# of THIS job's compose projects (containers, networks), e.g. after a SIGKILL. The results
# (job dir, log) are never deleted. Tolerates everything being gone already.
#
# Inputs (environment, with defaults):
#   JOB_NAME         the job name                                   (required)
#   JOBS_DIR         Harbor's jobs dir                              (required)
#   LOG_DIR          where the launch keeps the PID file            (JOBS_DIR/../logs)
#   N_CONCURRENT     the job's n_concurrent_trials (size of a wave)  (required)
#   STOP_TIMEOUT_S   minimum wait after SIGTERM before SIGKILL      (120)
# Outputs (last stdout line, JSON): job_dir, signalled_pid, exited, killed, removed_containers,
#   removed_networks
set -euo pipefail

N_CONCURRENT=${N_CONCURRENT:-}
STOP_TIMEOUT_S=${STOP_TIMEOUT_S:-120}
log() { printf '[harbor_stop] %s\n' "$*" >&2; }
die() { printf 'harbor_stop: %s\n' "$*" >&2; exit 1; }

for key in JOB_NAME JOBS_DIR; do
  [[ -n "${!key:-}" ]] || die "$key is empty: the component must pass it"
done
[[ "$N_CONCURRENT" =~ ^[1-9][0-9]*$ ]] || die "N_CONCURRENT (the job's harbor.n_concurrent_trials) must be a positive number, got '$N_CONCURRENT'"
[[ "$STOP_TIMEOUT_S" =~ ^[0-9]+$ ]] || die "STOP_TIMEOUT_S must be a number of seconds, got '$STOP_TIMEOUT_S'"
LOG_DIR=${LOG_DIR:-$(dirname "$JOBS_DIR")/logs}
job_dir="$JOBS_DIR/$JOB_NAME"
pid_file="$LOG_DIR/$JOB_NAME.pid"

ours() {  # alive and still Harbor on this job (a recycled PID must not be signalled)
  kill -0 "$1" 2>/dev/null && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$JOB_NAME"
}

signalled=null exited=true killed=false
pid=$(cat "$pid_file" 2>/dev/null || true)
if [[ "$pid" =~ ^[0-9]+$ ]] && ours "$pid"; then
  running=$(grep -Eo '"n_running_trials": *[0-9]+' "$job_dir/result.json" 2>/dev/null | grep -Eo '[0-9]+$' || echo 0)
  waves=$(( (running > 0 ? running : 1) + N_CONCURRENT - 1 ))
  waves=$(( waves / N_CONCURRENT ))
  bound=$(( 30 * waves > STOP_TIMEOUT_S ? 30 * waves : STOP_TIMEOUT_S ))
  log "SIGTERM to Harbor PID $pid ($running trials running); waiting up to ${bound}s for its shutdown"
  kill -TERM "$pid"
  signalled=$pid
  start=$SECONDS
  while ours "$pid"; do
    if (( SECONDS - start >= bound )); then
      log "Harbor PID $pid still running after ${bound}s: SIGKILL, then removing its containers"
      kill -KILL "$pid" 2>/dev/null || true
      killed=true exited=false
      break
    fi
    sleep 1
    if (( (SECONDS - start) % 5 == 0 )); then
      log "waiting for Harbor PID $pid to cancel its trials: $((SECONDS - start))s of ${bound}s"
    fi
  done
  [[ "$killed" == true ]] || log "Harbor PID $pid exited after $((SECONDS - start))s"
else
  log "no running Harbor process for job $JOB_NAME"
fi

# Compose project names are `<trial dir name, lowercased>__env` (Harbor 0.21.0): derive them
# from this job's trial dirs, so nothing of another job is touched.
containers=0 networks=0
if [[ -d "$job_dir" ]]; then
  for trial in "$job_dir"/*/; do
    [[ -d "$trial" ]] || continue
    project="$(basename "$trial" | tr '[:upper:]' '[:lower:]')__env"
    mapfile -t ids < <(docker ps -aq --filter "label=com.docker.compose.project=$project")
    if ((${#ids[@]})); then
      docker rm -f "${ids[@]}" >/dev/null
      containers=$((containers + ${#ids[@]}))
      log "removed the containers of compose project $project"
    fi
    mapfile -t nets < <(docker network ls -q --filter "label=com.docker.compose.project=$project")
    if ((${#nets[@]})); then
      docker network rm "${nets[@]}" >/dev/null
      networks=$((networks + ${#nets[@]}))
      log "removed the network of compose project $project"
    fi
  done
fi
printf '{"job_dir": "%s", "signalled_pid": %s, "exited": %s, "killed": %s, "removed_containers": %d, "removed_networks": %d}\n' \
  "$job_dir" "$signalled" "$exited" "$killed" "$containers" "$networks"
