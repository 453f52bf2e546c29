#!/usr/bin/env bash
# Start the machine's Docker engine where no systemd runs it (setup/lib.sh's ensure_dockerd).
# Usage: dockerd.sh start. Inputs: DOCKERD_LOG, DOCKERD_PIDFILE (absolute paths outside this
# checkout), DOCKERD_WAIT (s).
#
# Started where nothing moves: from /, its log and pidfile outside any checkout. The engine
# outlives the checkout that started it (a CI clone is deleted after its run); one started from
# there could not be started again from its own command line once that folder is gone (what
# DockerDaemonConfig's restart does, hostside/dockerd_restart.py).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

LOG=${DOCKERD_LOG:-/var/log/benchstack-dockerd.log}
PIDFILE=${DOCKERD_PIDFILE:-/var/run/docker.pid}
WAIT=${DOCKERD_WAIT:-60}

answering() { docker info >/dev/null 2>&1; }

# outside NAME PATH: PATH is absolute and not inside this checkout, or the start is refused.
outside() {
  [[ "$2" == /* ]] || { echo "dockerd.sh: $1=$2 is not an absolute path" >&2; exit 2; }
  [[ "$2/" != "$ROOT/"* ]] || { echo "dockerd.sh: $1=$2 is inside the checkout $ROOT: give a path outside it" >&2; exit 2; }
}

start() {
  answering && return 0
  outside DOCKERD_LOG "$LOG"
  outside DOCKERD_PIDFILE "$PIDFILE"
  (cd / && exec setsid nohup dockerd --pidfile "$PIDFILE" >>"$LOG" 2>&1 </dev/null) &
  for _ in $(seq 1 "$WAIT"); do answering && return 0; sleep 1; done
  echo "dockerd.sh: dockerd did not answer within ${WAIT} s; see $LOG" >&2
  exit 1
}

case "${1:-start}" in
  start) start ;;
  *) echo "dockerd.sh: usage: dockerd.sh start" >&2; exit 2 ;;
esac
