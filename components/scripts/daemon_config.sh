#!/usr/bin/env bash
# DockerDaemonConfig create: merge `default-address-pools` into the engine's daemon.json so one
# host can hold many concurrent /24 trial networks (seed: "Prepare Docker network pools for
# high-concurrency runs", "Docker network address-pool exhaustion").
#
# Steps: check the pools overlap no host route and no Docker network; refuse to restart while
# containers run; back up daemon.json (UTC timestamp); validate the merged file; install it;
# restart; check the engine uses the pools; prove them by creating PROOF_NETWORKS networks.
# Any failure after the install puts the original back (and restarts again): the host is left
# as it was found. A second run with the same pools writes nothing and does not restart.
#
# Inputs (environment, with defaults):
#   DAEMON_JSON         engine config file                         (/etc/docker/daemon.json)
#   ADDRESS_POOLS_JSON  JSON list of IPv4 {base, size}   ([{"base":"172.18.0.0/15","size":24}])
#   DOCKER_HOST         engine socket (docker's own default)
#   RESTART_CMD         command that restarts the engine; run with bash (as root via sudo -n when
#                       not root)  (systemctl restart docker under systemd, else service docker restart)
#   ALLOW_RESTART_WITH_RUNNING  1 = restart even while containers run (they stop)       (0)
#   PROOF_NETWORKS      networks created (then removed) to prove the pools; 0 = skip   (64)
#   PROOF_PREFIX        name prefix of those networks                  (benchstack-pool-proof)
#   BACKUP_DIR          where the timestamped backups go               (directory of DAEMON_JSON)
#   RECORD_FILE         what destroy must restore, kept on the host so the delete script needs
#                       no create outputs         (BACKUP_DIR/<basename of DAEMON_JSON>.benchstack.json)
#   READY_TIMEOUT       seconds to wait for the engine after a restart (90)
#   DOCKERD             dockerd binary, for `dockerd --validate` where it exists  (command -v dockerd)
# Outputs (last stdout line, JSON):
#   changed (bool: daemon.json written), restarted (bool), original ("file" | "absent" |
#   "unchanged": the state before benchstack, which destroy restores), backup (path of that
#   original, "" unless original == "file"), record (RECORD_FILE, "" when original == unchanged),
#   daemon_json, address_pools (list), first_subnet, last_subnet, proof_networks (int)
# The merged file also pins `bip` to docker0's current address when it sets neither `bip` nor
# `bridge`: otherwise the restart moves docker0 into the first pool subnet for good (the engine
# stores the bridge's subnet and reuses it after the pools are gone). The record keeps docker0's
# address from before benchstack, so destroy can check it is back there.
# The record keeps the pre-benchstack original across re-runs and pool changes: a run that
# replaces pools benchstack set keeps the first backup as the one destroy restores.
# Delete: daemon_config.delete.sh with the same DAEMON_JSON, ADDRESS_POOLS_JSON (and RECORD_FILE).
set -euo pipefail

DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
ADDRESS_POOLS_JSON=${ADDRESS_POOLS_JSON:-'[{"base":"172.18.0.0/15","size":24}]'}
ALLOW_RESTART_WITH_RUNNING=${ALLOW_RESTART_WITH_RUNNING:-0}
PROOF_NETWORKS=${PROOF_NETWORKS:-64}
PROOF_PREFIX=${PROOF_PREFIX:-benchstack-pool-proof}
BACKUP_DIR=${BACKUP_DIR:-$(dirname "$DAEMON_JSON")}
RECORD_FILE=${RECORD_FILE:-$BACKUP_DIR/$(basename "$DAEMON_JSON").benchstack.json}
READY_TIMEOUT=${READY_TIMEOUT:-90}
DOCKERD=${DOCKERD:-$(command -v dockerd || true)}
if [[ -z "${RESTART_CMD:-}" ]]; then
  if [[ -d /run/systemd/system ]]; then RESTART_CMD="systemctl restart docker"
  elif [[ -x /etc/init.d/docker ]]; then RESTART_CMD="service docker restart"
  else RESTART_CMD=""; fi
fi

log() { printf '[daemon_config] %s\n' "$*" >&2; }
ON_FAILURE=""
die() {
  # Undo first, so the reason stays the last line on stderr.
  trap - EXIT
  if [[ -n "$ON_FAILURE" ]]; then "$ON_FAILURE" 1; fi
  printf 'daemon_config: %s\n' "$*" >&2
  exit 1
}
priv() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
if [[ $EUID -ne 0 ]] && ! sudo -n true 2>/dev/null; then
  die "this needs root for DAEMON_JSON and the restart: run as root or allow passwordless sudo"
fi

command -v jq >/dev/null || die "jq not found on this host: install jq"
command -v docker >/dev/null || die "docker CLI not found on this host: install Docker"
[[ "$PROOF_NETWORKS" =~ ^[0-9]+$ ]] || die "PROOF_NETWORKS='$PROOF_NETWORKS' is not a number"
[[ "$ALLOW_RESTART_WITH_RUNNING" =~ ^[01]$ ]] || die "ALLOW_RESTART_WITH_RUNNING must be 0 or 1"

# --- the pools: well-formed IPv4 CIDRs, a size that fits, room for the proof ------------------
ip2int() { local IFS=. a b c d; read -r a b c d <<<"$1"; echo $(((a << 24) | (b << 16) | (c << 8) | d)); }
int2ip() { echo "$((($1 >> 24) & 255)).$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }
is_cidr() {
  [[ "$1" =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})(/([0-9]{1,2}))?$ ]] || return 1
  local i; for i in 1 2 3 4; do ((BASH_REMATCH[i] <= 255)) || return 1; done
  [[ -z "${BASH_REMATCH[6]}" ]] || ((BASH_REMATCH[6] <= 32))
}
range() {
  # "start end" (as integers) of a CIDR; a bare address is a /32.
  local ip=${1%/*} len=32 n mask
  [[ "$1" == */* ]] && len=${1#*/}
  n=$(ip2int "$ip")
  mask=$(((0xFFFFFFFF << (32 - len)) & 0xFFFFFFFF))
  ((len == 0)) && mask=0
  echo "$((n & mask)) $(((n & mask) | (~mask & 0xFFFFFFFF)))"
}
overlaps() { local a1 a2 b1 b2; read -r a1 a2 <<<"$(range "$1")"; read -r b1 b2 <<<"$(range "$2")"; ((a1 <= b2 && b1 <= a2)); }

POOLS=$(jq -ce 'if type == "array" and length > 0
    and all(.[]; type == "object" and (keys - ["base", "size"] == []) and (.base | type == "string")
            and (.size | type == "number"))
  then map({base, size}) else error("bad") end' <<<"$ADDRESS_POOLS_JSON" 2>/dev/null) \
  || die "ADDRESS_POOLS_JSON must be a non-empty JSON list of {\"base\": \"a.b.c.d/n\", \"size\": n}, got: $ADDRESS_POOLS_JSON"
mapfile -t POOL_LINES < <(jq -r '.[] | "\(.base) \(.size)"' <<<"$POOLS")
capacity=0
for line in "${POOL_LINES[@]}"; do
  read -r base size <<<"$line"
  if ! is_cidr "$base" || [[ "$base" != */* ]]; then
    die "ADDRESS_POOLS_JSON base '$base' is not an IPv4 CIDR (IPv6 pools are not supported here)"
  fi
  plen=${base#*/}
  ((size >= plen && size <= 30)) || die "ADDRESS_POOLS_JSON size $size does not fit base $base: use a size between /$plen and /30"
  read -r s _ <<<"$(range "$base")"
  [[ "$(int2ip "$s")/$plen" == "$base" ]] || die "ADDRESS_POOLS_JSON base $base has host bits set: use $(int2ip "$s")/$plen"
  capacity=$((capacity + (1 << (size - plen))))
done
((capacity >= PROOF_NETWORKS)) \
  || die "ADDRESS_POOLS_JSON yields only $capacity networks, fewer than PROOF_NETWORKS=$PROOF_NETWORKS: use a larger base or a smaller size"

# --- the engine and the current config -------------------------------------------------------
docker info >/dev/null 2>&1 || die "Docker engine not answering at ${DOCKER_HOST:-the default socket}: start it or fix DOCKER_HOST"
engine_pools() { docker info --format '{{json .DefaultAddressPools}}' | jq -c 'map({base: .Base, size: .Size})? // []'; }

if priv test -e "$DAEMON_JSON"; then
  CURRENT=$(priv cat "$DAEMON_JSON") || die "cannot read DAEMON_JSON=$DAEMON_JSON: run as root or allow sudo -n"
  err=$(jq -e 'type == "object"' <<<"$CURRENT" 2>&1 >/dev/null) \
    || die "DAEMON_JSON=$DAEMON_JSON is not a JSON object (${err:-not an object}): fix or move that file, then re-run"
  FILE_EXISTED=true
else
  CURRENT='{}'
  FILE_EXISTED=false
fi
file_pools=$(jq -c '(.["default-address-pools"] // []) | map({base, size})' <<<"$CURRENT")
# The pre-benchstack original comes from the record while the file still holds the pools the
# record says benchstack set; otherwise the current file is the original.
ORIGINAL=$($FILE_EXISTED && echo file || echo absent)
BACKUP=""
RECORD=""
if priv test -f "$RECORD_FILE"; then
  rec=$(priv cat "$RECORD_FILE" | jq -c 'select(type == "object" and (.original == "file" or .original == "absent"))
    | {original, backup: (.backup // ""), pools: (.pools // [] | map({base, size}))}' 2>/dev/null || true)
  if [[ -n "$rec" && "$(jq -c .pools <<<"$rec")" == "$file_pools" ]]; then
    ORIGINAL=$(jq -r .original <<<"$rec")
    BACKUP=$(jq -r .backup <<<"$rec")
    RECORD=$RECORD_FILE
  fi
fi
MERGED=$(jq --argjson pools "$POOLS" '.["default-address-pools"] = $pools' <<<"$CURRENT")
# Without `bip`, a restart with new pools moves the default bridge (docker0) into the first
# pool subnet, and the engine keeps it there even after the pools are removed: pin docker0
# where it is now, so applying and restoring the pools leaves it alone.
# (Only for the engine's own docker0: an engine started with `--bridge` takes no `bip`.)
bridge_if=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}' 2>/dev/null || true)
# docker0's own address is the truth: a fresh engine's bridge IPAM has a Subnet but no Gateway.
DOCKER0=""
if [[ "$bridge_if" == docker0 ]]; then
  DOCKER0=$(ip -4 -o addr show dev docker0 2>/dev/null | awk '{print $4; exit}')
fi
if [[ -n "$DOCKER0" ]] && jq -e 'has("bip") or has("bridge") | not' <<<"$CURRENT" >/dev/null; then
  MERGED=$(jq --arg bip "$DOCKER0" '.bip = $bip' <<<"$MERGED")
fi
# The record keeps docker0's address from before benchstack, for destroy to check.
if [[ -n "$RECORD" ]]; then
  DOCKER0=$(priv cat "$RECORD_FILE" | jq -r '.docker0 // ""' 2>/dev/null || true)
fi

need_write=true
need_restart=true
if [[ "$file_pools" == "$POOLS" ]]; then
  need_write=false
  [[ -n "$RECORD" ]] || ORIGINAL=unchanged
  [[ "$(engine_pools)" == "$POOLS" ]] && need_restart=false
fi

# --- overlap with host routes and Docker networks (only when the pools are not in use yet) ----
if $need_restart; then
  conflicts=()
  while IFS= read -r route; do
    read -ra f <<<"$route"
    dest=${f[0]}
    case "$dest" in unicast | unreachable | blackhole | prohibit | throw) dest=${f[1]} ;; esac
    [[ "$dest" == default ]] && continue
    is_cidr "$dest" || continue
    for line in "${POOL_LINES[@]}"; do
      read -r base _ <<<"$line"
      overlaps "$base" "$dest" && conflicts+=("pool $base overlaps host route '$route'")
    done
  done < <(ip -4 route show table all 2>/dev/null | grep -vE '^(local|broadcast|multicast|anycast) ')
  while IFS=$'\t' read -r net subnet; do
    is_cidr "$subnet" || continue
    for line in "${POOL_LINES[@]}"; do
      read -r base _ <<<"$line"
      overlaps "$base" "$subnet" && conflicts+=("pool $base overlaps Docker network '$net' ($subnet)")
    done
  done < <(docker network ls -q | xargs -r docker network inspect \
    | jq -r '.[] | .Name as $n | (.IPAM.Config // [])[] | select(.Subnet) | "\($n)\t\(.Subnet)"')
  if ((${#conflicts[@]})); then
    joined=$(printf '%s; ' "${conflicts[@]}")
    die "${joined%; }: choose another base in ADDRESS_POOLS_JSON or remove what overlaps"
  fi

  [[ -n "$RESTART_CMD" ]] || die "no way to restart the engine here (no systemd, no /etc/init.d/docker): set RESTART_CMD"
  running=$(docker ps --format '{{.Names}}' | sort | paste -sd, -)
  if [[ -n "$running" && "$ALLOW_RESTART_WITH_RUNNING" != 1 ]]; then
    die "containers are running ($running): a restart would stop them; stop them or set ALLOW_RESTART_WITH_RUNNING=1"
  fi
fi

wait_engine() {
  local deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
restart_engine() { priv bash -c "$RESTART_CMD" >&2 && wait_engine; }

RUN_BACKUP=""
TMP=""
installed=false
restore_original() {
  # Puts back what was there when this run started (its backup, or no file) and restarts.
  $installed || return 0
  log "restoring the original $DAEMON_JSON"
  if $FILE_EXISTED; then priv cp -p "$RUN_BACKUP" "$DAEMON_JSON"; else priv rm -f "$DAEMON_JSON"; fi
  installed=false
  restart_engine || log "the engine did not come back after restoring $DAEMON_JSON: restart it by hand"
}
PROOF_TAG="$PROOF_PREFIX-$$-"
remove_proof() {
  docker network ls --filter "name=$PROOF_TAG" --format '{{.Name}}' | grep "^$PROOF_TAG" \
    | xargs -r docker network rm >/dev/null 2>&1 || true
}
cleanup() {
  local rc=${1:-$?}
  remove_proof
  if [[ -n "$TMP" ]]; then priv rm -f "$TMP"; fi
  if ((rc != 0)); then restore_original; fi
}
trap cleanup EXIT
ON_FAILURE=cleanup

if $need_write; then
  # Validate before anything on the host changes.
  TMP=$(priv mktemp "$DAEMON_JSON.benchstack.XXXXXX") \
    || die "cannot write next to DAEMON_JSON=$DAEMON_JSON: run as root or allow sudo -n"
  printf '%s\n' "$MERGED" | priv tee "$TMP" >/dev/null
  priv chmod 0644 "$TMP"
  if [[ -n "$DOCKERD" ]] && "$DOCKERD" --help 2>&1 | grep -q -- '--validate'; then
    out=$(priv "$DOCKERD" --validate --config-file "$TMP" 2>&1) \
      || die "dockerd --validate rejects the merged config ($(tail -n1 <<<"$out")): fix DAEMON_JSON=$DAEMON_JSON"
  else
    # This engine has no --validate: check the JSON and the key we own.
    jq -e --argjson pools "$POOLS" 'type == "object" and .["default-address-pools"] == $pools' \
      <(priv cat "$TMP") >/dev/null || die "merged config failed its JSON check: fix DAEMON_JSON=$DAEMON_JSON"
  fi
  priv mkdir -p "$BACKUP_DIR" || die "cannot create BACKUP_DIR=$BACKUP_DIR"
  if $FILE_EXISTED; then
    RUN_BACKUP="$BACKUP_DIR/$(basename "$DAEMON_JSON").backup-$(date -u +%Y%m%dT%H%M%SZ)"
    n=1; while priv test -e "$RUN_BACKUP"; do RUN_BACKUP="${RUN_BACKUP%.[0-9]*}.$n"; n=$((n + 1)); done
    priv cp -p "$DAEMON_JSON" "$RUN_BACKUP" || die "cannot write the backup $RUN_BACKUP: check BACKUP_DIR"
    log "backed up $DAEMON_JSON to $RUN_BACKUP"
  fi
  # First benchstack change: this run's backup is the original destroy restores.
  if [[ -z "$RECORD" && "$ORIGINAL" == file ]]; then BACKUP=$RUN_BACKUP; fi
  priv mv -f "$TMP" "$DAEMON_JSON"
  TMP=""
  installed=true
  log "installed merged $DAEMON_JSON"
fi

restarted=false
if $need_restart; then
  log "restarting the engine: $RESTART_CMD"
  restart_engine || die "the engine did not answer within ${READY_TIMEOUT}s after '$RESTART_CMD' with the merged config; original restored (see the engine log)"
  restarted=true
  got=$(engine_pools)
  [[ "$got" == "$POOLS" ]] \
    || die "after the restart the engine reports default-address-pools $got, not $POOLS: is DAEMON_JSON the file this engine reads? original restored"
fi

first="" last=""
if ((PROOF_NETWORKS > 0)); then
  log "proving the pools with $PROOF_NETWORKS networks"
  for i in $(seq 1 "$PROOF_NETWORKS"); do
    err=$(docker network create "$PROOF_TAG$i" 2>&1 >/dev/null) \
      || die "network $i of $PROOF_NETWORKS could not be created ($err): the pools are exhausted or clash; free networks or enlarge ADDRESS_POOLS_JSON"
  done
  first=$(docker network inspect "${PROOF_TAG}1" --format '{{(index .IPAM.Config 0).Subnet}}')
  last=$(docker network inspect "$PROOF_TAG$PROOF_NETWORKS" --format '{{(index .IPAM.Config 0).Subnet}}')
  for subnet in "$first" "$last"; do
    ok=false
    for line in "${POOL_LINES[@]}"; do
      read -r base size <<<"$line"
      read -r b1 b2 <<<"$(range "$base")"; read -r s1 s2 <<<"$(range "$subnet")"
      [[ "${subnet#*/}" == "$size" ]] && ((s1 >= b1 && s2 <= b2)) && ok=true
    done
    $ok || die "proof network got $subnet, which is not a /size subnet of ADDRESS_POOLS_JSON $POOLS; original restored"
  done
  remove_proof
  log "pools proven: first $first, last $last"
fi

if $need_write; then
  jq -n --arg original "$ORIGINAL" --arg backup "$BACKUP" --arg d "$DAEMON_JSON" --argjson pools "$POOLS" \
    --arg docker0 "$DOCKER0" '{original: $original, backup: $backup, daemon_json: $d, pools: $pools, docker0: $docker0}' \
    | priv tee "$RECORD_FILE.tmp" >/dev/null || die "cannot write RECORD_FILE=$RECORD_FILE; original restored"
  priv mv -f "$RECORD_FILE.tmp" "$RECORD_FILE" || die "cannot write RECORD_FILE=$RECORD_FILE; original restored"
  RECORD=$RECORD_FILE
fi
installed=false # success: nothing to roll back
jq -cn --argjson changed "$need_write" --argjson restarted "$restarted" --arg original "$ORIGINAL" \
  --arg backup "$BACKUP" --arg record "$RECORD" --arg daemon_json "$DAEMON_JSON" --argjson pools "$POOLS" \
  --arg first "$first" --arg last "$last" --argjson n "$PROOF_NETWORKS" \
  '{changed: $changed, restarted: $restarted, original: $original, backup: $backup, record: $record,
    daemon_json: $daemon_json, address_pools: $pools, first_subnet: $first, last_subnet: $last,
    proof_networks: $n}'
