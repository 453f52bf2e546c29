#!/usr/bin/env bash
# The two hosts of the a100 rehearsal (Pulumi.a100-rehearsal.yaml): the seed's worker-a and
# worker-b, each a real separate host on this machine, reached only over SSH at the seed's own
# addresses (10.0.0.11, 10.0.0.12) on a private network this script creates and removes.
#
#   hosts.sh start        build the image (cached: build.sh), record this machine, start both
#                         hosts and their forwards; a second start only checks (idempotent)
#   hosts.sh stop         stop and remove everything start made, then compare this machine with
#                         the record: exit 1 (naming it) when anything is left
#   hosts.sh status       one JSON line: each host's address, container, whether sshd, its Docker
#                         engine and its forwards answer; the keys; exit 1 unless all answer
#   hosts.sh cut NAME     host NAME lost at once: its link down (its forwards die with it)
#   hosts.sh mend NAME    host NAME back on the network, its forwards again
#
# Each host is a container of this machine's Docker engine (not a bare network namespace: a host
# needs its own process table, root filesystem, init scripts and hostname, so that its own
# dockerd is restarted by its own `service docker restart` and a `ps` there shows only its own
# processes), run with the capabilities a Docker engine inside needs (all but CAP_SYS_RESOURCE,
# which this machine does not have; ../shared DESIGN.md "A host in a container"). In each: the
# image of build.sh (debootstrap bookworm, sshd, Docker, sudo, the user `bench`, Python 3.13), its
# own SSH host keys, its own Docker engine with its data root on a volume of its own (overlay2
# cannot stack on the container's overlay), its own daemon.json (none on worker-a; on worker-b
# one its owner wrote) and docker0, its cgroups under benchstack-host-<name>.
#
# The network: a bridge of this machine's engine, internal (no route out of it), so the hosts
# reach the world the way servers behind a proxy do: the registry mirror and the upstream proxy
# of this machine (127.0.0.1:5000, 127.0.0.1:27890) are put on each host's own loopback by an SSH
# reverse forward, the seed's way of giving Worker B a proxy ("expose an existing proxy from
# another machine through SSH reverse forwarding"). The forwards log in as root with a key of
# their own; the stack logs in as `bench` with the user's key (keys/bench_ed25519), which is the
# only thing the stack knows about these hosts besides their addresses.
#
# State (BENCHSTACK_TEST_STATE/hosts): the image's build cache, keys/, the forwards' pid files and
# logs, machine-before.json (this machine before the hosts, tests/env/hosts/machine.py).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=setup/lib.sh
source "$HERE/../../../setup/lib.sh"
load_defaults "$ROOT/tests/env/defaults.env"

STATE=$BENCHSTACK_TEST_STATE/hosts
KEYS=$STATE/keys
RUN=$STATE/run
PREFIX=benchstack-host
NETWORK=benchstack-hosts
export BENCHSTACK_HOSTS_PREFIX=$PREFIX
export BENCHSTACK_HOSTS_BRIDGE=bshosts0
export BENCHSTACK_HOSTS_SUBNET=10.0.0.0/24
GATEWAY=10.0.0.1
# name address daemon.json-as-found: the seed's two servers.
HOSTS=(worker-a worker-b)
declare -A ADDRESS=([worker-a]=10.0.0.11 [worker-b]=10.0.0.12)
declare -A DAEMON_JSON=([worker-a]="" [worker-b]='{"log-driver": "json-file", "log-opts": {"max-size": "10m", "max-file": "3"}}')
# What each host finds on its own loopback: this machine's registry mirror and upstream proxy.
FORWARDED=("$BENCHSTACK_REGISTRY" "$BENCHSTACK_PROXY")
SNAPSHOT=$STATE/machine-before.json
MACHINE=(python3 "$HERE/machine.py")

log() { printf '[hosts] %s\n' "$*" >&2; }
die() { printf 'hosts: %s\n' "$*" >&2; exit 1; }

container() { echo "$PREFIX-$1"; }
running() { [[ "$(docker inspect -f '{{.State.Running}}' "$(container "$1")" 2>/dev/null)" == true ]]; }
on() { local name=$1; shift; docker exec "$(container "$name")" "$@"; }
# on_stdin NAME CMD...: CMD on host NAME, reading this script's standard input.
on_stdin() { local name=$1; shift; docker exec -i "$(container "$name")" "$@"; }

keys() {
  mkdir -p "$KEYS"
  chmod 700 "$KEYS"
  local key
  for key in bench admin; do
    [[ -s "$KEYS/${key}_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -C "benchstack-rehearsal-$key" -f "$KEYS/${key}_ed25519"
  done
}

# The host's own keys and users: the user's key for bench, the forwards' key for root.
authorize() {
  local name=$1
  on_stdin "$name" sh -c 'install -d -m 700 -o bench -g bench /home/bench/.ssh && cat >/home/bench/.ssh/authorized_keys && chown bench:bench /home/bench/.ssh/authorized_keys && chmod 600 /home/bench/.ssh/authorized_keys' \
    <"$KEYS/bench_ed25519.pub"
  on_stdin "$name" sh -c 'install -d -m 700 /root/.ssh && cat >/root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys' \
    <"$KEYS/admin_ed25519.pub"
}

wait_up() {
  local name=$1
  for _ in $(seq 1 120); do
    on "$name" test -f /run/benchstack-host-up 2>/dev/null && return 0
    running "$name" || break
    sleep 0.5
  done
  docker logs "$(container "$name")" 2>&1 | tail -5 >&2
  die "host $name did not boot"
}

start_host() {
  local name=$1 image=$2
  if running "$name"; then return 0; fi
  docker rm -f "$(container "$name")" >/dev/null 2>&1 || true
  docker volume create "$(container "$name")-docker" >/dev/null
  # --init: a real init as PID 1 reaps what the host's services leave (as a host's init does).
  docker run -d --name "$(container "$name")" --hostname "$name" --init \
    --network "$NETWORK" --ip "${ADDRESS[$name]}" \
    --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined \
    --security-opt apparmor=unconfined --security-opt systempaths=unconfined \
    -v /sys/fs/cgroup:/sys/fs/cgroup:rw -v "$(container "$name")-docker:/var/lib/docker" \
    -e "BENCHSTACK_HOST=$name" -e "BENCHSTACK_DAEMON_JSON=${DAEMON_JSON[$name]}" \
    --label benchstack.rehearsal-host="$name" "$image" >/dev/null
  wait_up "$name"
  authorize "$name"
}

forward_alive() {
  local pid
  pid=$(cat "$RUN/forward-$1.pid" 2>/dev/null) || return 1
  [[ "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" == benchstack-host-forward-"$1"* ]]
}

# Every forwarded address answers on the host's own loopback.
forwards_answer() {
  local name=$1 addr
  for addr in "${FORWARDED[@]}"; do
    on "$name" bash -c "exec 3<>/dev/tcp/${addr%:*}/${addr#*:}" 2>/dev/null || return 1
  done
}

# start_forward NAME: the host's forwards, tried for a while (a host just put back on the network
# is unreachable until this machine's neighbour entry for it expires).
start_forward() {
  local name=$1 attempt
  mkdir -p "$RUN"
  for attempt in $(seq 1 15); do
    if forward_alive "$name" && forwards_answer "$name"; then return 0; fi
    try_forward "$name" && return 0
    sleep 2
  done
  tail -3 "$RUN/forward-$name.log" >&2
  die "the forwards of ${FORWARDED[*]} to host $name did not come up after $attempt attempts; see $RUN/forward-$name.log"
}

try_forward() {
  local name=$1 address=${ADDRESS[$1]} addr
  stop_forward "$name"
  # The host key the forward trusts is the one the host holds, read from the host itself.
  printf '%s %s\n' "$address" "$(on "$name" cut -d' ' -f1,2 /etc/ssh/ssh_host_ed25519_key.pub)" \
    >"$RUN/known_hosts-$name"
  local -a remote=()
  for addr in "${FORWARDED[@]}"; do remote+=(-R "$addr:$addr"); done
  # From / (it may outlive the checkout that started it).
  # shellcheck disable=SC2016  # the inner bash expands them: argv[0] becomes the forward's mark
  (cd / && exec setsid bash -c 'exec -a "$0" "$@"' "benchstack-host-forward-$name" ssh -N -i "$KEYS/admin_ed25519" \
    -o IdentitiesOnly=yes -o BatchMode=yes -o ExitOnForwardFailure=yes \
    -o ServerAliveInterval=5 -o ServerAliveCountMax=3 -o StrictHostKeyChecking=yes \
    -o HostKeyAlgorithms=ssh-ed25519 -o UserKnownHostsFile="$RUN/known_hosts-$name" \
    "${remote[@]}" "root@$address" </dev/null >>"$RUN/forward-$name.log" 2>&1) &
  echo $! >"$RUN/forward-$name.pid"
  for _ in $(seq 1 60); do
    forwards_answer "$name" && return 0
    forward_alive "$name" || return 1
    sleep 0.25
  done
  return 1
}

stop_forward() {
  local pid
  pid=$(cat "$RUN/forward-$1.pid" 2>/dev/null) || return 0
  if forward_alive "$1"; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$RUN/forward-$1.pid"
}

start() {
  local image name
  image=$(bash "$HERE/build.sh")
  keys
  "${MACHINE[@]}" snapshot "$SNAPSHOT"
  if ! docker network inspect "$NETWORK" >/dev/null 2>&1; then
    docker network create --driver bridge --internal --subnet "$BENCHSTACK_HOSTS_SUBNET" \
      --gateway "$GATEWAY" -o "com.docker.network.bridge.name=$BENCHSTACK_HOSTS_BRIDGE" \
      "$NETWORK" >/dev/null
  fi
  for name in "${HOSTS[@]}"; do start_host "$name" "$image"; done
  for name in "${HOSTS[@]}"; do start_forward "$name"; done
  status
}

# Remove every cgroup a host's engine made here (depth first: a cgroup goes once it is empty).
remove_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/"$PREFIX"-*; do
    [[ -d "$dir" ]] || continue
    find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

stop() {
  local name found
  for name in "${HOSTS[@]}"; do stop_forward "$name"; done
  for name in "${HOSTS[@]}"; do
    docker rm -f "$(container "$name")" >/dev/null 2>&1 || true
    docker volume rm "$(container "$name")-docker" >/dev/null 2>&1 || true
  done
  docker network rm "$NETWORK" >/dev/null 2>&1 || true
  remove_cgroups
  rm -rf "$RUN"
  [[ -f "$SNAPSHOT" ]] || return 0
  if ! found=$("${MACHINE[@]}" diff "$SNAPSHOT"); then
    die "the machine is not as the hosts found it: $found"
  fi
  rm -f "$SNAPSHOT"
}

status() {
  local name all=0 entries=() sshd engine fwd
  for name in "${HOSTS[@]}"; do
    sshd=false engine=false fwd=false
    if running "$name"; then
      (exec 3<>"/dev/tcp/${ADDRESS[$name]}/22") 2>/dev/null && sshd=true
      on "$name" docker info >/dev/null 2>&1 && engine=true
      forward_alive "$name" && forwards_answer "$name" && fwd=true
    fi
    [[ $sshd == true && $engine == true && $fwd == true ]] || all=1
    entries+=("$(jq -cn --arg name "$name" --arg address "${ADDRESS[$name]}" \
      --arg container "$(container "$name")" --argjson sshd "$sshd" --argjson engine "$engine" \
      --argjson forwards "$fwd" --arg link "$(running "$name" && link "$name")" \
      '{name: $name, address: $address, container: $container, link: $link, sshd: $sshd, docker: $engine, forwards: $forwards}')")
  done
  jq -cn --argjson hosts "$(printf '%s\n' "${entries[@]}" | jq -cs .)" --arg key "$KEYS/bench_ed25519" \
    --arg network "$NETWORK" --arg subnet "$BENCHSTACK_HOSTS_SUBNET" \
    '{hosts: $hosts, user: "bench", key: $key, network: $network, subnet: $subnet}'
  return $all
}

host_name() {
  [[ -n "${ADDRESS[${1:-}]:-}" ]] || die "no host ${1:-} (hosts: ${HOSTS[*]})"
  running "$1" || die "host $1 is not running: hosts.sh start"
}

# The host's end of its cable: the veth on this machine's side of the bridge whose peer is the
# host's eth0.
link() {
  local index
  index=$(on "$1" cat /sys/class/net/eth0/iflink) || return 1
  ip -o link show | awk -F': ' -v i="$index" '$1 == i { sub(/@.*/, "", $2); print $2 }'
}

# Lost at once, as a host whose cable is pulled or that hangs: its link down (nothing reaches it,
# a connection already open gets no answer), its forwards dying with it.
cut() {
  host_name "$1"
  ip link set dev "$(link "$1")" down
  stop_forward "$1"
}

mend() {
  host_name "$1"
  ip link set dev "$(link "$1")" up
  # This machine's failed neighbour entry for the address would refuse it for a while.
  ip neigh flush to "${ADDRESS[$1]}" dev "$BENCHSTACK_HOSTS_BRIDGE" 2>/dev/null || true
  start_forward "$1"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  cut) cut "${2:-}" ;;
  mend) mend "${2:-}" ;;
  *) die "usage: hosts.sh start|stop|status|cut NAME|mend NAME" ;;
esac
