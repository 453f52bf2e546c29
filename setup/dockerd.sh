#!/usr/bin/env bash
# Start or restart the test machine's Docker engine (no systemd here): the `local` stack's
# restart command in tests, so DockerDaemonConfig restarts the real engine it configured.
# Usage: dockerd.sh start|restart. Inputs: DOCKERD_LOG, DOCKERD_PIDFILE, DOCKERD_WAIT (s).
set -euo pipefail

LOG=${DOCKERD_LOG:-/var/log/benchstack-dockerd.log}
PIDFILE=${DOCKERD_PIDFILE:-/var/run/docker.pid}
WAIT=${DOCKERD_WAIT:-60}

answering() { docker info >/dev/null 2>&1; }

start() {
  answering && return 0
  setsid nohup dockerd --pidfile "$PIDFILE" >>"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 "$WAIT"); do answering && return 0; sleep 1; done
  echo "dockerd.sh: dockerd did not answer within ${WAIT} s; see $LOG" >&2
  exit 1
}

stop() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null || true)
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid"
  for _ in $(seq 1 "$WAIT"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
  echo "dockerd.sh: dockerd (pid $pid) did not stop within ${WAIT} s" >&2
  exit 1
}

case "${1:-start}" in
  start) start ;;
  restart) stop; start ;;
  *) echo "dockerd.sh: usage: dockerd.sh start|restart" >&2; exit 2 ;;
esac
