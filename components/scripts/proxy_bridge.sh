#!/usr/bin/env bash
# ProxyBridge create: expose the host's loopback HTTP proxy on the Docker bridge gateway with a
# supervised socat, so task containers reach it as host.docker.internal:BRIDGE_PORT (seed:
# "Prepare task-container networking"). Supervision survives the SSH session and restarts socat
# when it dies: a systemd unit where systemd is PID 1, otherwise a detached restart loop.
#
# Inputs (environment, with defaults):
#   UPSTREAM        host:port of the upstream HTTP proxy                      (127.0.0.1:27890)
#   BRIDGE_PORT     port to listen on at the gateway                          (27891)
#   DOCKER_NETWORK  network whose gateway is the bind address; keep `bridge`: containers reach
#                   it as host.docker.internal via host-gateway, which is docker0's address (bridge)
#   BIND_ADDRESS    listen address; empty = gateway of DOCKER_NETWORK         ("")
#   NAME            name of the unit / state files                            (benchstack-proxy-bridge)
#   STATE_DIR       pidfiles, log and settings of the loop  ($HOME/.local/state/benchstack)
#   SUPERVISOR      auto | systemd | loop                                      (auto)
#   UPSTREAM_CHECK_URL  URL fetched through UPSTREAM before starting; empty = only check that
#                   UPSTREAM answers HTTP                                      ("")
#   CHECK_IMAGE     image (with bash) that fetches CHECK_URL through the bridge; empty = skip ("")
#   CHECK_URL       URL the CHECK_IMAGE container fetches; needs a 2xx/3xx     ("")
#   DOCKER_HOST     Docker socket (docker's own default)
#   PROXY_TOKEN     recorded once the bridge is up; proxy_status.sh returns it while the bridge
#                   stays healthy (see components/proxy_bridge.py)               (start)
# Outputs (last stdout line, JSON):
#   proxy_url (http://host.docker.internal:PORT), bind_address, port, upstream, supervisor
#   (systemd|loop), pid_file (loop pidfile, "" under systemd), log_file, unit ("" for the loop),
#   started (bool: false when an identical bridge was already running), container_check (bool)
# Delete: proxy_bridge.delete.sh with the same NAME / STATE_DIR.
set -euo pipefail

UPSTREAM=${UPSTREAM:-127.0.0.1:27890}
BRIDGE_PORT=${BRIDGE_PORT:-27891}
DOCKER_NETWORK=${DOCKER_NETWORK:-bridge}
BIND_ADDRESS=${BIND_ADDRESS:-}
NAME=${NAME:-benchstack-proxy-bridge}
STATE_DIR=${STATE_DIR:-$HOME/.local/state/benchstack}
SUPERVISOR=${SUPERVISOR:-auto}
UPSTREAM_CHECK_URL=${UPSTREAM_CHECK_URL:-}
CHECK_IMAGE=${CHECK_IMAGE:-}
CHECK_URL=${CHECK_URL:-}

log() { printf '[proxy_bridge] %s\n' "$*" >&2; }
die() { printf 'proxy_bridge: %s\n' "$*" >&2; exit 1; }
as_root() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }

[[ "$NAME" =~ ^[A-Za-z0-9_.-]+$ ]] || die "NAME='$NAME' may hold only letters, digits, '.', '_' and '-'"
if ! [[ "$BRIDGE_PORT" =~ ^[0-9]+$ ]] || ((BRIDGE_PORT < 1 || BRIDGE_PORT > 65535)); then
  die "BRIDGE_PORT='$BRIDGE_PORT' is not a TCP port"
fi
[[ "$UPSTREAM" =~ ^([^:]+):([0-9]+)$ ]] || die "UPSTREAM='$UPSTREAM' must be host:port"
UP_HOST=${BASH_REMATCH[1]}
UP_PORT=${BASH_REMATCH[2]}
command -v socat >/dev/null || die "socat not found on this host: install socat"
command -v ss >/dev/null || die "ss not found on this host: install iproute2"
command -v jq >/dev/null || die "jq not found on this host: install jq"
if [[ -n "$CHECK_IMAGE" && -z "$CHECK_URL" ]]; then die "CHECK_IMAGE is set but CHECK_URL is empty: give the URL the container must fetch"; fi

case "$SUPERVISOR" in
  auto) if [[ -d /run/systemd/system ]]; then SUPERVISOR=systemd; else SUPERVISOR=loop; fi ;;
  systemd | loop) ;;
  *) die "SUPERVISOR='$SUPERVISOR' must be auto, systemd or loop" ;;
esac

if [[ -z "$BIND_ADDRESS" ]]; then
  info=$(docker network inspect "$DOCKER_NETWORK" 2>/dev/null | jq -r '.[0] | [
      ([.IPAM.Config[]?.Gateway // empty | select(test("^[0-9.]+$"))] | first // "-"),
      (.Options["com.docker.network.bridge.name"] // ("br-" + .Id[0:12]))] | join(" ")') \
    || die "cannot inspect Docker network '$DOCKER_NETWORK': is the engine up? (or set BIND_ADDRESS)"
  read -r BIND_ADDRESS ifname <<<"$info"
  # Engines often leave the default bridge's IPAM gateway empty: then the bridge interface's own
  # address is the gateway (docker0, or br-<id> for user networks).
  if [[ ! "$BIND_ADDRESS" =~ ^[0-9.]+$ ]]; then
    BIND_ADDRESS=$(ip -4 -o addr show dev "$ifname" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n1)
    [[ -n "$BIND_ADDRESS" ]] || die "no gateway address found for Docker network '$DOCKER_NETWORK' (interface $ifname): set BIND_ADDRESS"
  fi
fi
[[ "$BIND_ADDRESS" =~ ^[0-9]+(\.[0-9]+){3}$ ]] || die "BIND_ADDRESS='$BIND_ADDRESS' is not an IPv4 address"
[[ "$BIND_ADDRESS" != 0.0.0.0 ]] || die "BIND_ADDRESS=0.0.0.0 would expose the proxy on every interface: use the bridge gateway"
ip -4 -o addr show | awk '{print $4}' | cut -d/ -f1 | grep -qxF "$BIND_ADDRESS" \
  || die "BIND_ADDRESS=$BIND_ADDRESS is not an address of this host: check DOCKER_NETWORK or BIND_ADDRESS"

PROXY_URL="http://host.docker.internal:$BRIDGE_PORT"
LOG_FILE="$STATE_DIR/$NAME.log"
PID_FILE="$STATE_DIR/$NAME.pid"
SETTINGS_FILE="$STATE_DIR/$NAME.settings"
UNIT="$NAME.service"
SETTINGS="$BIND_ADDRESS:$BRIDGE_PORT -> $UPSTREAM ($SUPERVISOR)"
SOCAT_ARGS=(-d -d "TCP-LISTEN:$BRIDGE_PORT,bind=$BIND_ADDRESS,reuseaddr,fork" "TCP:$UPSTREAM")

http_status() {
  # First status code of a proxy request; $1 host, $2 port, $3 request target. Bash only, so it
  # needs no HTTP client on the host (or in a container).
  local line
  exec 3<>"/dev/tcp/$1/$2" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n' "$3" "${4:-localhost}" >&3
  IFS= read -r -t 15 line <&3 || { exec 3<&-; return 1; }
  exec 3<&-
  [[ "$line" =~ ^HTTP/1\.[01]\ ([0-9]{3}) ]] || return 1
  echo "${BASH_REMATCH[1]}"
}

listeners() { ss -ltnH "sport = :$BRIDGE_PORT" | awk '{print $4}'; }

loop_pid() {
  # The loop's PID if it is alive and really ours (a recycled PID is not).
  local pid
  pid=$(cat "$PID_FILE" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "benchstack-proxy-bridge-loop $NAME $NAME $PID_FILE " \
    && echo "$pid"
}

running_same() {
  if [[ "$SUPERVISOR" == systemd ]]; then
    systemctl is-active --quiet "$UNIT" || return 1
  else
    loop_pid >/dev/null || return 1
  fi
  [[ "$(cat "$SETTINGS_FILE" 2>/dev/null)" == "$SETTINGS" ]]
}

wait_listener() {
  for _ in $(seq 1 50); do
    [[ -n "$(listeners)" ]] && return 0
    sleep 0.1
  done
  return 1
}

CONTAINER_CHECK=false
PROBLEM=""
verify() {
  # The listener is bound to the gateway address only, and (optionally) a container gets through.
  # Sets PROBLEM and returns 1 when not.
  local bound
  CONTAINER_CHECK=false
  wait_listener || { PROBLEM="socat is not listening on port $BRIDGE_PORT"; return 1; }
  bound=$(listeners | sort -u | tr '\n' ' ')
  [[ "$bound" == "$BIND_ADDRESS:$BRIDGE_PORT " ]] \
    || { PROBLEM="listener on port $BRIDGE_PORT is bound to '$bound', expected only $BIND_ADDRESS:$BRIDGE_PORT"; return 1; }
  if [[ -n "$CHECK_IMAGE" ]]; then
    local out host_port
    # The canary has no HTTP client: bash's /dev/tcp speaks HTTP/1.0 to the proxy, which is
    # exactly what http_proxy users do (absolute-form request line).
    host_port=${CHECK_URL#*://}; host_port=${host_port%%/*}
    # shellcheck disable=SC2016  # expanded inside the container
    out=$(timeout 60 docker run --rm --network "$DOCKER_NETWORK" --add-host host.docker.internal:host-gateway \
      -e "http_proxy=$PROXY_URL" -e "HTTP_PROXY=$PROXY_URL" -e "https_proxy=$PROXY_URL" -e "HTTPS_PROXY=$PROXY_URL" \
      -e "CHECK_URL=$CHECK_URL" -e "CHECK_HOST=$host_port" --entrypoint bash "$CHECK_IMAGE" -c '
        p=${http_proxy#http://}; exec 3<>"/dev/tcp/${p%:*}/${p##*:}"
        printf "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n" "$CHECK_URL" "$CHECK_HOST" >&3
        IFS= read -r -t 20 line <&3; echo "$line"' 2>&1) || true
    [[ "$out" =~ HTTP/1\.[01]\ [23][0-9][0-9] ]] \
      || { PROBLEM="a container of $CHECK_IMAGE could not fetch $CHECK_URL through $PROXY_URL (got: $(tail -n1 <<<"$out" | tr -d '\r'))"; return 1; }
    CONTAINER_CHECK=true
  fi
}

json_out() {
  local pidf=$PID_FILE unit=""
  [[ "$SUPERVISOR" == systemd ]] && { pidf=""; unit=$UNIT; }
  jq -cn --arg url "$PROXY_URL" --arg bind "$BIND_ADDRESS" --argjson port "$BRIDGE_PORT" \
    --arg up "$UPSTREAM" --arg sup "$SUPERVISOR" --arg pidf "$pidf" --arg logf "$LOG_FILE" \
    --arg unit "$unit" --argjson started "$1" --argjson cc "$CONTAINER_CHECK" \
    '{proxy_url: $url, bind_address: $bind, port: $port, upstream: $up, supervisor: $sup,
      pid_file: $pidf, log_file: $logf, unit: $unit, started: $started, container_check: $cc}'
}

stop_ours() {
  if [[ "$SUPERVISOR" == systemd ]]; then
    as_root systemctl disable --now "$UNIT" >/dev/null 2>&1 || true
    as_root rm -f "/etc/systemd/system/$UNIT"
    as_root systemctl daemon-reload || true
  else
    local pid
    if pid=$(loop_pid); then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  fi
  rm -f "$PID_FILE" "$PID_FILE.socat" "$SETTINGS_FILE"
}

# Idempotent: an identical, healthy bridge is only re-verified.
if running_same; then
  if verify; then
    log "bridge $SETTINGS already running: nothing started"
    echo "${PROXY_TOKEN:-start}" >"$STATE_DIR/$NAME.token"
    json_out false
    exit 0
  fi
  # A healthy listener that cannot carry a request points past the bridge (upstream, target):
  # restarting socat would not help, so the running bridge is left as it was found.
  [[ "$PROBLEM" != "a container of "* ]] || die "$PROBLEM (the running bridge was left as it was)"
  log "running bridge fails its check ($PROBLEM): restarting it"
fi

# Upstream first: nothing is started when the proxy behind the bridge is dead.
status=$(http_status "$UP_HOST" "$UP_PORT" "${UPSTREAM_CHECK_URL:-/}" 2>/dev/null) \
  || die "upstream proxy $UPSTREAM does not answer HTTP: start it (or fix UPSTREAM) before the bridge"
if [[ -n "$UPSTREAM_CHECK_URL" && ! "$status" =~ ^[23] ]]; then
  die "upstream proxy $UPSTREAM answered $status for $UPSTREAM_CHECK_URL: fix the proxy or UPSTREAM_CHECK_URL"
fi
log "upstream $UPSTREAM answers (HTTP $status)"

# A bridge of ours with other settings is replaced; anybody else's listener is an error.
if [[ "$SUPERVISOR" == systemd ]] && systemctl is-active --quiet "$UNIT"; then stop_ours
elif loop_pid >/dev/null; then stop_ours; fi
if taken=$(ss -ltnpH "sport = :$BRIDGE_PORT" | grep .); then
  die "port $BRIDGE_PORT is already taken ($(awk '{print $4, $6}' <<<"$taken" | head -n1)): stop that listener or choose another BRIDGE_PORT"
fi

mkdir -p "$STATE_DIR" || die "cannot create STATE_DIR=$STATE_DIR: choose a writable STATE_DIR"
if [[ "$SUPERVISOR" == systemd ]]; then
  unit_text="[Unit]
Description=benchstack proxy bridge $SETTINGS
After=network-online.target docker.service

[Service]
ExecStart=$(command -v socat) ${SOCAT_ARGS[*]}
Restart=always
RestartSec=1
StandardOutput=append:$LOG_FILE
StandardError=append:$LOG_FILE

[Install]
WantedBy=multi-user.target
"
  printf '%s' "$unit_text" | as_root tee "/etc/systemd/system/$UNIT" >/dev/null \
    || die "cannot write /etc/systemd/system/$UNIT: run as root or allow sudo -n"
  as_root systemctl daemon-reload
  as_root systemctl enable --now "$UNIT" >/dev/null 2>&1 || { stop_ours; die "systemctl could not start $UNIT: see journalctl -u $UNIT"; }
else
  # setsid + all descriptors redirected: the loop outlives this (SSH) session and does not hold
  # the caller's stdout open. The loop's argv carries a marker so a recycled PID is never ours.
  # shellcheck disable=SC2016  # expanded by the loop's own bash
  setsid bash -c '
    name=$1 pid_file=$2; shift 2
    child=""
    trap '\''[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; exit 0'\'' TERM INT HUP
    echo $$ >"$pid_file"
    while :; do
      socat "$@" & child=$!
      echo "$child" >"$pid_file.socat"
      wait "$child" && rc=0 || rc=$?
      echo "$(date -u +%FT%TZ) socat exited ($rc); restarting in 1 s" >&2
      sleep 1
    done' "benchstack-proxy-bridge-loop $NAME" "$NAME" "$PID_FILE" "${SOCAT_ARGS[@]}" \
    </dev/null >>"$LOG_FILE" 2>&1 &
  for _ in $(seq 1 50); do loop_pid >/dev/null && break; sleep 0.1; done
fi
echo "$SETTINGS" >"$SETTINGS_FILE"

if ! verify; then
  stop_ours
  die "$PROBLEM; bridge stopped (log: $LOG_FILE)"
fi
log "bridge $SETTINGS up (log: $LOG_FILE)"
echo "${PROXY_TOKEN:-start}" >"$STATE_DIR/$NAME.token"
json_out true
