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
#                       not root). Empty: dockerd_restart.py decides (systemd, init.d, or the
#                       running dockerd restarted with its own command line)
#   ALLOW_RESTART_WITH_RUNNING  1 = restart even while containers run (they stop)       (0)
#   PROOF_NETWORKS      networks created (then removed) to prove the pools; 0 = skip   (64)
#   PROOF_PREFIX        name prefix of those networks                  (benchstack-pool-proof)
#   BACKUP_DIR          where the timestamped backups go               (directory of DAEMON_JSON)
#   RECORD_FILE         what destroy must restore, kept on the host so the delete script needs
#                       no create outputs         (BACKUP_DIR/<basename of DAEMON_JSON>.benchstack.json)
#   READY_TIMEOUT       seconds to wait for the engine after a restart (90)
#   DOCKERD             dockerd binary, for `dockerd --validate` where it exists  (command -v dockerd)
#   BENCHSTACK_CODE     the host code the seam copied: its daemon_json.py is the merge, the
#                       record, the backups and the checks, run with the host's python3 (required)
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
RESTART_CMD=${RESTART_CMD:-}

log() { printf '[daemon_config] %s\n' "$*" >&2; }
die() {
  # Undo first, so the reason stays the last line on stderr.
  trap - EXIT
  cleanup 1
  printf 'daemon_config: %s\n' "$*" >&2
  exit 1
}
priv() { if [[ $EUID -eq 0 ]]; then "$@"; else sudo -n "$@"; fi; }
STATE="" PYTHON="" ANSWER="" installed=false proving=false
# One step of daemon_json.py, as root: ANSWER is its answer, or the reason it failed.
step() {
  ANSWER=$(priv "$PYTHON" "$BENCHSTACK_CODE/daemon_json.py" "$STATE" "$@") \
    || die "${ANSWER:-daemon_json.py $1 failed (see above)}"
}
wait_engine() {
  local deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
  return 1
}
restart_how() { if [[ -n "$RESTART_CMD" ]]; then echo "'$RESTART_CMD'"; else priv python3 "$BENCHSTACK_CODE/dockerd_restart.py" plan; fi; }
# Sets RESTART_FAILED to why the restart failed: the command itself, or no answer after it.
RESTART_FAILED=""
restart_engine() {
  local out rc=0
  if [[ -n "$RESTART_CMD" ]]; then
    out=$(priv bash -c "$RESTART_CMD" 2>&1) || rc=$?
    ((rc == 0)) || { RESTART_FAILED="'$RESTART_CMD' failed (exit $rc): $(tail -n1 <<<"$out")"; return 1; }
  else
    out=$(priv python3 "$BENCHSTACK_CODE/dockerd_restart.py" restart 2>&1) || { RESTART_FAILED=$(tail -n1 <<<"$out"); return 1; }
    log "$out"
  fi
  wait_engine || { RESTART_FAILED="the engine did not answer within ${READY_TIMEOUT}s after the restart"; return 1; }
}
PROOF_TAG="$PROOF_PREFIX-$$-"
remove_proof() {
  docker network ls --filter "name=$PROOF_TAG" --format '{{.Name}}' | grep "^$PROOF_TAG" \
    | xargs -r docker network rm >/dev/null 2>&1 || true
}
rollback() {
  # Puts back what was there when this run started (its backup, or no file) and restarts.
  local answer
  answer=$(priv "$PYTHON" "$BENCHSTACK_CODE/daemon_json.py" "$STATE" put-back) \
    || log "could not put the original back: ${answer:-see above}; copy it from the newest backup in $BACKUP_DIR"
  [[ "$answer" == restored ]] || return 0
  log "restored the original $DAEMON_JSON"
  restart_engine || log "the engine did not come back after restoring $DAEMON_JSON ($RESTART_FAILED): restart it by hand"
}
cleanup() {
  if $proving; then remove_proof; fi
  if (($1 != 0)) && $installed; then installed=false; rollback; fi
  if [[ -n "$STATE" ]]; then rm -rf "$STATE"; fi
}
trap 'cleanup $?' EXIT

if [[ $EUID -ne 0 ]] && ! sudo -n true 2>/dev/null; then
  die "this needs root for DAEMON_JSON and the restart: run as root or allow passwordless sudo"
fi
: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
PYTHON=$(command -v python3) || die "python3 not found on this host: install python3 (3.7 or later)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 7))' \
  || die "$("$PYTHON" -V 2>&1) on this host is too old: install python3 3.7 or later"
command -v docker >/dev/null || die "docker CLI not found on this host: install Docker"
[[ "$ALLOW_RESTART_WITH_RUNNING" =~ ^[01]$ ]] || die "ALLOW_RESTART_WITH_RUNNING must be 0 or 1"
STATE=$(mktemp -d)

# The pools: well-formed IPv4 CIDRs, a size that fits, room for the proof.
step init --daemon-json "$DAEMON_JSON" --record "$RECORD_FILE" --backup-dir "$BACKUP_DIR" \
  --pools "$ADDRESS_POOLS_JSON" --proof-networks "$PROOF_NETWORKS"

docker info >/dev/null 2>&1 || die "Docker engine not answering at ${DOCKER_HOST:-the default socket}: start it or fix DOCKER_HOST"
engine_pools() { docker info --format '{{json .DefaultAddressPools}}'; }
# docker0's own address, for the `bip` pin (only the engine's own docker0: an engine started
# with `--bridge` takes no `bip`). It is the truth: a fresh engine's bridge IPAM has a Subnet
# but no Gateway.
bridge_if=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}' 2>/dev/null || true)
DOCKER0=""
if [[ "$bridge_if" == docker0 ]]; then
  DOCKER0=$(ip -4 -o addr show dev docker0 2>/dev/null | awk '{print $4; exit}')
fi
step plan --engine-pools "$(engine_pools)" --docker0 "$DOCKER0"
read -r need_write need_restart <<<"$ANSWER"

if $need_restart; then
  # Overlap with host routes and Docker networks (only while the pools are not in use yet).
  ip -4 route show table all >"$STATE/routes" 2>/dev/null || true
  # A network removed between the two calls fails the inspect; the others are still listed.
  docker network ls -q | xargs -r docker network inspect >"$STATE/networks" || true
  step conflicts --routes "$STATE/routes" --networks "$STATE/networks"
  how=$(restart_how 2>&1) || die "no way to restart the engine here: ${how#dockerd_restart: }"
  running=$(docker ps --format '{{.Names}}' | sort | paste -sd, -)
  if [[ -n "$running" && "$ALLOW_RESTART_WITH_RUNNING" != 1 ]]; then
    die "containers are running ($running): a restart would stop them; stop them or set ALLOW_RESTART_WITH_RUNNING=1"
  fi
fi

if $need_write; then
  # Validated (dockerd --validate where it exists), backed up, then installed; from here on a
  # failure puts the original back (put-back knows whether the install got that far).
  installed=true
  step install --dockerd "$DOCKERD"
fi

restarted=false
if $need_restart; then
  log "restarting the engine ($how)"
  restart_engine || die "$RESTART_FAILED with the merged config; original restored (see the engine log)"
  restarted=true
  step check-engine --engine-pools "$(engine_pools)"
fi

first="" last=""
if ((PROOF_NETWORKS > 0)); then
  log "proving the pools with $PROOF_NETWORKS networks"
  proving=true
  for i in $(seq 1 "$PROOF_NETWORKS"); do
    err=$(docker network create "$PROOF_TAG$i" 2>&1 >/dev/null) \
      || die "network $i of $PROOF_NETWORKS could not be created ($err): the pools are exhausted or clash; free networks or enlarge ADDRESS_POOLS_JSON"
  done
  first=$(docker network inspect "${PROOF_TAG}1" --format '{{(index .IPAM.Config 0).Subnet}}')
  last=$(docker network inspect "$PROOF_TAG$PROOF_NETWORKS" --format '{{(index .IPAM.Config 0).Subnet}}')
  remove_proof
  proving=false
  log "pools proven: first $first, last $last"
fi

# Checks the proof's subnets, writes the record; the outputs are its answer.
step finish --restarted "$restarted" --first "$first" --last "$last"
installed=false # success: nothing to roll back
printf '%s\n' "$ANSWER"
