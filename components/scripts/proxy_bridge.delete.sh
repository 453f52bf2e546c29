#!/usr/bin/env bash
# ProxyBridge delete: stop the supervised socat that proxy_bridge.sh started. Tolerates a bridge
# that is already gone; never touches a process that is not ours (PIDs are checked, not trusted).
#
# Inputs (environment, with defaults; the same as proxy_bridge.sh):
#   NAME        name of the unit / state files                 (benchstack-proxy-bridge)
#   STATE_DIR   where the loop's pidfiles live                 ($HOME/.local/state/benchstack)
#   SUPERVISOR  auto | systemd | loop                          (auto)
# Outputs (last stdout line, JSON): stopped (bool: something was running), supervisor
set -euo pipefail

NAME=${NAME:-benchstack-proxy-bridge}
STATE_DIR=${STATE_DIR:-$HOME/.local/state/benchstack}
SUPERVISOR=${SUPERVISOR:-auto}

log() { printf '[proxy_bridge.delete] %s\n' "$*" >&2; }
die() { printf 'proxy_bridge.delete: %s\n' "$*" >&2; exit 1; }
as_root() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }

[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] || die "NAME='$NAME' may hold only letters, digits, '.', '_' and '-'"
case "$SUPERVISOR" in
  auto) if [[ -d /run/systemd/system ]]; then SUPERVISOR=systemd; else SUPERVISOR=loop; fi ;;
  systemd | loop) ;;
  *) die "SUPERVISOR='$SUPERVISOR' must be auto, systemd or loop" ;;
esac
PID_FILE="$STATE_DIR/$NAME.pid"
UNIT="$NAME.service"
stopped=false

cmdline_has() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF -- "$2"; }

if [[ "$SUPERVISOR" == systemd ]]; then
  if [[ -f "/etc/systemd/system/$UNIT" ]]; then
    systemctl is-active --quiet "$UNIT" && stopped=true
    as_root systemctl disable --now "$UNIT" >/dev/null 2>&1 || true
    as_root rm -f "/etc/systemd/system/$UNIT"
    as_root systemctl daemon-reload
  fi
else
  loop=$(cat "$PID_FILE" 2>/dev/null || true)
  if [[ "$loop" =~ ^[0-9]+$ ]] && cmdline_has "$loop" "benchstack-proxy-bridge-loop $NAME $NAME $PID_FILE "; then
    log "stopping loop $loop"
    kill -TERM "$loop" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$loop" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$loop" 2>/dev/null && kill -KILL "$loop" 2>/dev/null
    stopped=true
  fi
  # A socat orphaned by a SIGKILLed loop is still ours if its argv is ours.
  child=$(cat "$PID_FILE.socat" 2>/dev/null || true)
  if [[ "$child" =~ ^[0-9]+$ ]] && cmdline_has "$child" "socat" && [[ -d "/proc/$child" ]]; then
    settings=$(cat "$STATE_DIR/$NAME.settings" 2>/dev/null || true)
    listen=${settings%% ->*}
    if [[ -n "$listen" ]] && cmdline_has "$child" "TCP-LISTEN:${listen##*:},bind=${listen%:*}"; then
      kill -TERM "$child" 2>/dev/null || true
      stopped=true
    fi
  fi
  rm -f "$PID_FILE" "$PID_FILE.socat" "$STATE_DIR/$NAME.settings" "$STATE_DIR/$NAME.token"
fi
log "bridge $NAME $([[ $stopped == true ]] && echo stopped || echo was not running)"
jq -cn --argjson stopped "$stopped" --arg sup "$SUPERVISOR" '{stopped: $stopped, supervisor: $sup}'
