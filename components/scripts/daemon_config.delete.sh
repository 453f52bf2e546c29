#!/usr/bin/env bash
# DockerDaemonConfig delete: undo what daemon_config.sh did, from the record it left on the host
# (so it needs only the create's inputs), and restart the engine under the same rule (not while
# containers run, unless allowed). What the record (or ORIGINAL) says:
#   file       put BACKUP back (if the backup is gone: drop only our key)
#   absent     drop our key; remove the file when nothing else is left (no file, as found)
#   unchanged  no record: the pools were there before benchstack, nothing to undo
# When daemon.json no longer holds ADDRESS_POOLS_JSON (restored already, changed by someone since)
# or the record names other pools (a later run replaced these), it is left alone: a second
# delete, or the delete of a replaced resource, is a no-op.
#
# Inputs (environment, with defaults):
#   DAEMON_JSON         engine config file                         (/etc/docker/daemon.json)
#   ADDRESS_POOLS_JSON  the pools create installed     ([{"base":"172.18.0.0/15","size":24}])
#   BACKUP_DIR, RECORD_FILE  as for create   (directory of DAEMON_JSON, <DAEMON_JSON>.benchstack.json)
#   ORIGINAL, BACKUP    override the record (file | absent | unchanged, a path) ("": use the record)
#   DOCKER0             docker0's address before benchstack, checked after the restore ("": the record's)
#   DOCKER_HOST, RESTART_CMD, ALLOW_RESTART_WITH_RUNNING (0), READY_TIMEOUT (90): as for create
# Outputs (last stdout line, JSON): restored (bool: daemon.json changed back), restarted (bool),
#   daemon_json, original
set -euo pipefail

DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
DOCKER0=${DOCKER0:-}
ORIGINAL=${ORIGINAL:-}
BACKUP=${BACKUP:-}
BACKUP_DIR=${BACKUP_DIR:-$(dirname "$DAEMON_JSON")}
RECORD_FILE=${RECORD_FILE:-$BACKUP_DIR/$(basename "$DAEMON_JSON").benchstack.json}
ADDRESS_POOLS_JSON=${ADDRESS_POOLS_JSON:-'[{"base":"172.18.0.0/15","size":24}]'}
ALLOW_RESTART_WITH_RUNNING=${ALLOW_RESTART_WITH_RUNNING:-0}
READY_TIMEOUT=${READY_TIMEOUT:-90}
if [[ -z "${RESTART_CMD:-}" ]]; then
  if [[ -d /run/systemd/system ]]; then RESTART_CMD="systemctl restart docker"
  elif [[ -x /etc/init.d/docker ]]; then RESTART_CMD="service docker restart"
  else RESTART_CMD=""; fi
fi

log() { printf '[daemon_config.delete] %s\n' "$*" >&2; }
die() { printf 'daemon_config.delete: %s\n' "$*" >&2; exit 1; }
priv() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
if [[ $EUID -ne 0 ]] && ! sudo -n true 2>/dev/null; then
  die "this needs root for DAEMON_JSON and the restart: run as root or allow passwordless sudo"
fi
out() {
  jq -cn --argjson restored "$1" --argjson restarted "$2" --arg d "$DAEMON_JSON" --arg o "$ORIGINAL" \
    '{restored: $restored, restarted: $restarted, daemon_json: $d, original: $o}'
}

POOLS=$(jq -ce 'map({base, size})' <<<"$ADDRESS_POOLS_JSON" 2>/dev/null) \
  || die "ADDRESS_POOLS_JSON is not a JSON list of {base, size}: $ADDRESS_POOLS_JSON"
if [[ -z "$ORIGINAL" ]]; then
  ORIGINAL=unchanged
  if priv test -f "$RECORD_FILE"; then
    rec=$(priv cat "$RECORD_FILE" | jq -c '{original, backup: (.backup // ""), docker0: (.docker0 // ""), pools: (.pools // [] | map({base, size}))}' 2>/dev/null) \
      || die "RECORD_FILE=$RECORD_FILE is not valid JSON: restore DAEMON_JSON from a backup in $BACKUP_DIR by hand"
    if [[ "$(jq -c .pools <<<"$rec")" != "$POOLS" ]]; then
      log "the record names other pools (a later run replaced these): nothing to undo"
      ORIGINAL=$(jq -r .original <<<"$rec")
      out false false; exit 0
    fi
    ORIGINAL=$(jq -r .original <<<"$rec")
    BACKUP=$(jq -r .backup <<<"$rec")
    DOCKER0=$(jq -r .docker0 <<<"$rec")
  fi
fi
case "$ORIGINAL" in file | absent | unchanged) ;; *) die "ORIGINAL='$ORIGINAL' must be file, absent or unchanged" ;; esac

if [[ "$ORIGINAL" == unchanged ]]; then
  log "the pools predate benchstack: nothing to undo"
  out false false; exit 0
fi
if ! priv test -e "$DAEMON_JSON"; then
  log "$DAEMON_JSON is gone: nothing to undo"
  out false false; exit 0
fi
CURRENT=$(priv cat "$DAEMON_JSON") || die "cannot read DAEMON_JSON=$DAEMON_JSON: run as root or allow sudo -n"
jq -e 'type == "object"' <<<"$CURRENT" >/dev/null 2>&1 \
  || die "DAEMON_JSON=$DAEMON_JSON is not a JSON object any more: fix it by hand (backup: ${BACKUP:-none})"
if [[ "$(jq -c '(.["default-address-pools"] // []) | map({base, size})' <<<"$CURRENT")" != "$POOLS" ]]; then
  log "$DAEMON_JSON does not hold the pools benchstack set: left alone"
  out false false; exit 0
fi

docker info >/dev/null 2>&1 || die "Docker engine not answering at ${DOCKER_HOST:-the default socket}: start it or fix DOCKER_HOST"
[[ -n "$RESTART_CMD" ]] || die "no way to restart the engine here (no systemd, no /etc/init.d/docker): set RESTART_CMD"
running=$(docker ps --format '{{.Names}}' | sort | paste -sd, -)
if [[ -n "$running" && "$ALLOW_RESTART_WITH_RUNNING" != 1 ]]; then
  die "containers are running ($running): a restart would stop them; stop them or set ALLOW_RESTART_WITH_RUNNING=1"
fi

TMP=$(priv mktemp "$DAEMON_JSON.benchstack.XXXXXX") || die "cannot write next to DAEMON_JSON=$DAEMON_JSON"
trap 'priv rm -f "$TMP"' EXIT
if [[ "$ORIGINAL" == file ]] && [[ -n "$BACKUP" ]] && priv test -f "$BACKUP"; then
  priv cp -p "$BACKUP" "$TMP"
  priv mv -f "$TMP" "$DAEMON_JSON"
  log "restored $DAEMON_JSON from $BACKUP"
else
  [[ "$ORIGINAL" == file ]] && log "backup '${BACKUP}' is gone: removing only default-address-pools"
  rest=$(jq 'del(.["default-address-pools"])' <<<"$CURRENT")
  # With no daemon.json before, a `bip` can only be the docker0 pin the create added.
  [[ "$ORIGINAL" == absent ]] && rest=$(jq 'del(.bip)' <<<"$rest")
  if [[ "$ORIGINAL" == absent && "$(jq -c . <<<"$rest")" == "{}" ]]; then
    priv rm -f "$DAEMON_JSON"
    log "removed $DAEMON_JSON (there was none before)"
  else
    printf '%s\n' "$rest" | priv tee "$TMP" >/dev/null
    priv chmod 0644 "$TMP"
    priv mv -f "$TMP" "$DAEMON_JSON"
    log "removed default-address-pools from $DAEMON_JSON"
  fi
fi

# The record is spent once the original is back, even if the restart below fails.
priv rm -f "$RECORD_FILE"
log "restarting the engine: $RESTART_CMD"
restart_engine() {
  priv bash -c "$RESTART_CMD" >&2 || die "'$RESTART_CMD' failed after restoring $DAEMON_JSON: restart the engine by hand"
  local deadline=$((SECONDS + READY_TIMEOUT))
  until docker info >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "the engine did not answer within ${READY_TIMEOUT}s after restoring $DAEMON_JSON: see the engine log"
    sleep 0.5
  done
}
docker0_now() { ip -4 -o addr show dev docker0 2>/dev/null | awk '{print $4; exit}'; }
restart_engine

# docker0 back where it was before benchstack. The engine keeps the bridge subnet it last used,
# so a docker0 that moved (a create from before the bip pin, or a hand restart) stays moved
# unless one restart pins it back; the restored config then keeps it there.
if [[ -n "$DOCKER0" && "$(docker0_now)" != "$DOCKER0" ]]; then
  log "docker0 is at $(docker0_now), not $DOCKER0 as before benchstack: pinning it back"
  restored=$(priv cat "$DAEMON_JSON" 2>/dev/null || echo '{}')
  printf '%s\n' "$(jq --arg bip "$DOCKER0" '.bip = $bip' <<<"$restored")" | priv tee "$TMP" >/dev/null
  priv chmod 0644 "$TMP"
  if priv test -e "$DAEMON_JSON"; then priv cp -p "$DAEMON_JSON" "$TMP.orig"; fi
  priv mv -f "$TMP" "$DAEMON_JSON"
  restart_engine
  if priv test -e "$TMP.orig"; then priv mv -f "$TMP.orig" "$DAEMON_JSON"; else priv rm -f "$DAEMON_JSON"; fi
  restart_engine
  [[ "$(docker0_now)" == "$DOCKER0" ]] \
    || die "docker0 is at $(docker0_now) after restoring $DAEMON_JSON, not $DOCKER0: set \"bip\": \"$DOCKER0\" by hand"
fi
out true true
