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
# second run only checks that each peer answers (a few seconds). Nothing here reads tests/: a
# developer's machine is setup/dev.sh's (`make setup`), which runs these same functions
# (setup/lib.sh) and then the tests' own peers.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ "${1:-}" == --stack && -n "${2:-}" && -z "${3:-}" ]] || die "usage: setup.sh --stack NAME"
STACK=$2
load_defaults
mkdir -p "$BENCHSTACK_STATE"

case "$STACK" in
  local) install_packages "${LOCAL_PACKAGES[@]}" ;;
  local-k8s) install_packages "${LOCAL_K8S_PACKAGES[@]}" ;;
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
