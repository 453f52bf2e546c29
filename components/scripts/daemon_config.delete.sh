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
#   DOCKER_HOST, RESTART_CMD, ALLOW_RESTART_WITH_RUNNING (0), READY_TIMEOUT (90),
#   BENCHSTACK_CODE (required): as for create
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
RESTART_CMD=${RESTART_CMD:-}

log() { printf '[daemon_config.delete] %s\n' "$*" >&2; }
priv() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
STATE="" PYTHON="" ANSWER="" pinned=false
die() {
  # A docker0 pin is temporary: the restored config goes back even when a restart fails.
  if $pinned; then priv "$PYTHON" "$BENCHSTACK_CODE/daemon_json.py" "$STATE" put-back >/dev/null || true; fi
  printf 'daemon_config.delete: %s\n' "$*" >&2
  exit 1
}
trap 'if [[ -n "$STATE" ]]; then rm -rf "$STATE"; fi' EXIT
# One step of daemon_json.py, as root: ANSWER is its answer, or the reason it failed.
step() {
  ANSWER=$(priv "$PYTHON" "$BENCHSTACK_CODE/daemon_json.py" "$STATE" "$@") \
    || die "${ANSWER:-daemon_json.py $1 failed (see above)}"
}
if [[ $EUID -ne 0 ]] && ! sudo -n true 2>/dev/null; then
  die "this needs root for DAEMON_JSON and the restart: run as root or allow passwordless sudo"
fi
: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
PYTHON=$(command -v python3) || die "python3 not found on this host: install python3 (3.7 or later)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 7))' \
  || die "$("$PYTHON" -V 2>&1) on this host is too old: install python3 3.7 or later"
STATE=$(mktemp -d)

# What the record (or ORIGINAL) says, and whether daemon.json still holds these pools.
step unplan --daemon-json "$DAEMON_JSON" --record "$RECORD_FILE" --backup-dir "$BACKUP_DIR" \
  --pools "$ADDRESS_POOLS_JSON" --original "$ORIGINAL" --backup "$BACKUP" --docker0 "$DOCKER0"
read -r action DOCKER0 <<<"$ANSWER"
if [[ "$action" == none ]]; then
  step report --restored false --restarted false
  printf '%s\n' "$ANSWER"
  exit 0
fi

docker info >/dev/null 2>&1 || die "Docker engine not answering at ${DOCKER_HOST:-the default socket}: start it or fix DOCKER_HOST"
if [[ -z "$RESTART_CMD" ]]; then
  how=$(priv python3 "$BENCHSTACK_CODE/dockerd_restart.py" plan 2>&1) || die "no way to restart the engine here: ${how#dockerd_restart: }"
fi
running=$(docker ps --format '{{.Names}}' | sort | paste -sd, -)
if [[ -n "$running" && "$ALLOW_RESTART_WITH_RUNNING" != 1 ]]; then
  die "containers are running ($running): a restart would stop them; stop them or set ALLOW_RESTART_WITH_RUNNING=1"
fi

# The backup put back (or benchstack's keys dropped); the record is spent.
step undo
log "restarting the engine (${RESTART_CMD:-$how})"
restart_engine() {
  local out
  if [[ -n "$RESTART_CMD" ]]; then
    out=$(priv bash -c "$RESTART_CMD" 2>&1) || die "'$RESTART_CMD' failed after restoring $DAEMON_JSON ($(tail -n1 <<<"$out")): restart the engine by hand"
  else
    out=$(priv python3 "$BENCHSTACK_CODE/dockerd_restart.py" restart 2>&1) \
      || die "${out##*dockerd_restart: } after restoring $DAEMON_JSON: restart the engine by hand"
    log "$out"
  fi
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
  pinned=true
  step pin
  restart_engine
  pinned=false
  step put-back
  restart_engine
  [[ "$(docker0_now)" == "$DOCKER0" ]] \
    || die "docker0 is at $(docker0_now) after restoring $DAEMON_JSON, not $DOCKER0: set \"bip\": \"$DOCKER0\" by hand"
fi
step report --restored true --restarted true
printf '%s\n' "$ANSWER"
