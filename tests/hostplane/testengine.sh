#!/usr/bin/env bash
# A throwaway second dockerd for the daemon-config tests, in its own network namespace, with its
# own config file, data root, exec root, pidfile, socket and bridges, so the main engine (which
# other tests use at the same time) is never touched. Usage: testengine.sh start|stop|restart
#
# Inputs (environment, all required): TE_NS (network namespace, created by the caller),
# TE_DIR (config file daemon.json, data root, log), TE_RUN (short path: exec root, pidfile,
# socket; unix socket paths are limited to ~108 bytes).
# How an operator might have started it (the restart fault tests), optional: TE_CWD (its working
# directory, default /: never a checkout that may be deleted), TE_BIN (the binary as named on its
# command line, default dockerd), TE_ARGS (more flags, split on spaces), TE_LOG (its log, default
# $TE_DIR/dockerd.log).
set -euo pipefail
: "${TE_NS:?}" "${TE_DIR:?}" "${TE_RUN:?}"
PIDFILE="$TE_RUN/dockerd.pid"

# alive PID: running, not a zombie (an orphan waits for PID 1 to reap it, which can take a while).
alive() { [[ -r /proc/$1/stat ]] && [[ "$(cut -d')' -f2 "/proc/$1/stat" 2>/dev/null)" != " Z"* ]]; }

stop() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do alive "$pid" || return 0; sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
  sleep 0.5
}

start() {
  # dockerd refuses a --config-file that does not exist; "no daemon.json" is an empty config.
  local config="$TE_DIR/daemon.json" extra=()
  if [[ ! -e "$config" ]]; then config="$TE_RUN/no-daemon.json"; echo '{}' >"$config"; fi
  read -r -a extra <<<"${TE_ARGS:-}"
  cd "${TE_CWD:-/}"
  # --iptables/--ip-masq off: the namespace needs no NAT, and the host's tables stay untouched.
  # Detached with every descriptor redirected so the caller's pipes close.
  # nsenter, not `ip netns exec`: the latter remounts /sys, which hides the cgroup mounts.
  nsenter --net="/run/netns/$TE_NS" setsid "${TE_BIN:-dockerd}" \
    --config-file "$config" --data-root "$TE_DIR/data" --exec-root "$TE_RUN/exec" \
    --pidfile "$PIDFILE" -H "unix://$TE_RUN/docker.sock" --iptables=false --ip-masq=false \
    "${extra[@]}" </dev/null >>"${TE_LOG:-$TE_DIR/dockerd.log}" 2>&1 &
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  *) echo "usage: testengine.sh start|stop|restart" >&2; exit 2 ;;
esac
