#!/usr/bin/env bash
# A developer's machine (`make setup`, and `make test` through tests/run.sh): what every local
# stack needs (setup/lib.sh, the functions setup/setup.sh runs for an operator), then the tests'
# own peers and builds beyond it (tests/env/setup.sh: the project's venv with its test extras, an
# SSH server on loopback, the tests' Harbor venvs, the two hosts' image). An operator never runs
# it: `make up` gets what its stack needs by itself (setup/setup.sh --stack NAME).
#
#   dev.sh              everything, without running a test
#   dev.sh --packages   only the Debian packages (what the builds need too)
#   dev.sh --peers      everything but the Go builds: what the tests without the Pulumi engine or
#                       the cluster need (tests/run.sh starts the builds beside those tests)
#   dev.sh --builds     only the builds: the Pulumi engine, the cluster's binaries, the two hosts'
#                       image
#
# Defaults: setup/defaults.env, then tests/env/defaults.env. Idempotent: a second run only checks
# that each peer answers.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

packages=true peers=true builds=true
case "${1:-}" in
  "") ;;
  --packages) peers=false builds=false ;;
  --peers) builds=false ;;
  --builds) packages=false peers=false ;;
  *) die "usage: setup/dev.sh [--packages | --peers | --builds]" ;;
esac
load_defaults
mkdir -p "$BENCHSTACK_STATE"
TESTS_SETUP=$ROOT/tests/env/setup.sh

if $packages; then
  # Both local stacks' packages (each stack's from setup/setup.sh), then the tests' own.
  install_packages "${LOCAL_PACKAGES[@]}" "${LOCAL_K8S_PACKAGES[@]}"
  bash "$TESTS_SETUP" --packages
fi
if $peers; then
  # The local stack's peers, as `make up` starts them (the cluster is started by the tests that
  # use it), then the tests' own.
  check_harbor_python
  ensure_compose
  ensure_dockerd
  docker compose version >/dev/null || die "the docker compose plugin does not run"
  ensure_canary
  ensure_registry
  ensure_serving_image
  ensure_proxy
  bash "$TESTS_SETUP" --peers
fi
if $builds; then
  # The engine first: more tests wait for it than for the cluster.
  ensure_engine  # the whole engine (no --core)
  ensure_k8s_build
  bash "$TESTS_SETUP" --builds
  log "builds ready: pulumi $("$BENCHSTACK_ENGINE_DIR/current/bin/pulumi" version) ($BENCHSTACK_ENGINE_DIR/current), kubernetes $(jq -r .kubernetes "$BENCHSTACK_K8S_DIR/current/status.json") ($BENCHSTACK_K8S_DIR/current)"
fi
