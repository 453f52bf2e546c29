#!/usr/bin/env bash
# What `make up` (and preview, refresh, destroy) needs on the operator's machine, for one stack:
#
#   setup.sh --stack local      the Pulumi engine (unless a `pulumi` is on PATH), a Docker engine
#                               with Compose, the registry mirror holding the demo tasks' image
#                               and the CPU stand-in serving image, the HTTP proxy on loopback
#   setup.sh --stack local-k8s  the engine, the registry holding the demo tasks' image, and the
#                               one-node Kubernetes of setup/k8s (built once, started on loopback)
#   setup.sh --stack NAME       a GPU stack: only the engine; its hosts are reached over SSH
#
# Defaults: setup/defaults.env (an environment variable of the same name wins). Idempotent: a
# second run only checks that each peer answers (a few seconds). The tests' peers are
# tests/env/setup.sh's, which runs these same functions (setup/lib.sh) and adds its own.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ "${1:-}" == --stack && -n "${2:-}" && -z "${3:-}" ]] || die "usage: setup.sh --stack NAME"
STACK=$2
load_defaults
mkdir -p "$BENCHSTACK_STATE"

case "$STACK" in
  local) install_packages docker.io debootstrap docker-registry tinyproxy skopeo socat jq tmux \
    iproute2 curl procps psmisc python3-venv ;;
  # The cluster: etcd, a containerd of its own with runc, the CNI bridge plugin, iptables and
  # conntrack for the kubelet, openssl for its certificates, gcc for the pause binary.
  local-k8s) install_packages docker.io debootstrap docker-registry skopeo jq iproute2 curl procps \
    psmisc python3-venv etcd-server containerd runc containernetworking-plugins iptables conntrack \
    openssl gcc libc6-dev ;;
  *) install_packages jq openssh-client ;;
esac

command -v pulumi >/dev/null || ensure_engine  # the whole engine (no --core)
case "$STACK" in
  local)
    check_harbor_python
    ensure_compose
    ensure_dockerd
    ensure_canary
    ensure_registry
    ensure_serving_image
    ensure_proxy
    log "ready for the local stack: docker $(docker version -f '{{.Server.Version}}'), registry $BENCHSTACK_REGISTRY, proxy $BENCHSTACK_PROXY"
    ;;
  local-k8s)
    check_harbor_python
    ensure_dockerd
    ensure_canary
    ensure_registry
    ensure_k8s_cluster
    log "ready for the local-k8s stack: registry $BENCHSTACK_REGISTRY, cluster $BENCHSTACK_K8S_DIR/admin.kubeconfig"
    ;;
  *) log "ready for a GPU stack: the engine; its hosts are reached over SSH (see the README)" ;;
esac
