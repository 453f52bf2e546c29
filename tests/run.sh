#!/usr/bin/env bash
# `make test` (and CI's .ci/run): the peers, lint, the fast loop, then every real test, each
# once, in stages ordered by what they wait for, and each stage's time at the end.
#
# On a fresh machine the Go builds (the Pulumi engine, the cluster's binaries: about 35 minutes
# on 2 cores) are most of the run, and most real tests need neither: the builds start in the
# background (niced) as soon as the Debian packages are in, and the stages that need them wait:
#
#   packages  the Debian packages (setup/dev.sh --packages)
#   builds    in the background from here: the engine's CLI, command and Docker providers ("core"),
#             then the cluster's binaries, then the Kubernetes provider (the whole engine)
#   peers     setup/dev.sh --peers (no Go build)
#   lint      ruff, mypy, shellcheck
#   unit      every test with no peer
#   real      the real tests that need neither the engine nor the cluster (two at a time)
#   engine    those that need the engine's core (the CLI with the command and Docker providers)
#   cluster   those that need the one-node cluster but not the engine
#   k8s       those that need the Kubernetes provider (the whole engine), with or without the
#             cluster
#
# A failed stage fails the run after the others ran (each stage is independent); a failed build
# fails the stages that wait for it at once.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=setup/lib.sh
source setup/lib.sh
load_defaults "$ROOT/tests/env/defaults.env"

PY=${PY:-.venv/bin/python}
BUILDS=$BENCHSTACK_TEST_STATE/builds
mkdir -p "$BUILDS"
rm -f "$BUILDS"/*.status
declare -a TIMES=()
failed=()

# stage NAME COMMAND...: run it, record its time and whether it passed.
stage() {
  local name=$1 start=$SECONDS status
  shift
  printf '\n=== %s ===\n' "$name" >&2
  "$@"
  status=$?
  TIMES+=("$(printf '%-8s %5d s  %s' "$name" $((SECONDS - start)) "$([[ $status == 0 ]] && echo ok || echo "FAILED ($status)")")")
  ((status == 0)) || failed+=("$name")
  return 0
}

# wait_for BUILD: until the background build BUILD ended; fails if it failed.
wait_for() {
  local build=$1
  while [[ ! -f "$BUILDS/$build.status" ]]; do sleep 5; done
  [[ "$(cat "$BUILDS/$build.status")" == 0 ]] || { echo "the $build build failed: see $BUILDS/builds.log" >&2; return 1; }
}

# after BUILD PYTEST_ARGS...: the tests of a stage, once BUILD is ready.
after() {
  local build=$1
  shift
  wait_for "$build" || return 1
  "$PY" -m pytest -q "$@"
}

# The builds, in the order the stages need them; each writes its exit status when it ends.
builds() {
  local status
  nice -n 19 bash setup/engine/build.sh --core >/dev/null; status=$?
  echo "$status" >"$BUILDS/core.status"
  nice -n 19 bash setup/k8s/build.sh >/dev/null; status=$?
  echo "$status" >"$BUILDS/cluster.status"
  nice -n 19 bash setup/engine/build.sh >/dev/null; status=$?
  echo "$status" >"$BUILDS/engine.status"
}

run_start=$SECONDS
# The Debian packages first (the builds need some), then the builds start beside the rest.
stage packages bash setup/dev.sh --packages
builds >"$BUILDS/builds.log" 2>&1 &
builds_pid=$!
stage peers bash setup/dev.sh --peers
if [[ " ${failed[*]} " == *" packages "* || " ${failed[*]} " == *" peers "* ]]; then
  printf '\n%s\n' "${TIMES[@]}" >&2
  kill "$builds_pid" 2>/dev/null
  exit 1
fi
# The two-host rehearsal's image (tests/env/hosts: mostly downloads and disk, beside the Go
# builds' CPU) once the peers it copies from (Compose, Harbor's Python) are in; the test that
# starts the hosts waits for it (build.sh holds a lock).
{ nice -n 19 bash tests/env/hosts/build.sh >"$BUILDS/hosts.log" 2>&1; echo $? >"$BUILDS/hosts.status"; } &
hosts_build_pid=$!
# What an interrupted earlier run left (a stack's container of the same name fails the next `up`
# and hides the tests' own failures): listed, and removed on CI, a machine that runs only tests.
stage leftovers "$PY" -m tests.env.leftovers ${CI:+--remove}
stage lint make --no-print-directory lint
stage unit "$PY" -m pytest -q -m "not real" -n auto --dist loadfile
# Two workers, each taking whole files: these tests share the Docker engine but never restart
# it (the host-plane tests restart an engine of their own), and most of their time is waiting.
stage real "$PY" -m pytest -q -m "real and not engine and not cluster and not k8s_provider" \
  -n 2 --dist loadfile
stage engine after core -m "engine and not cluster and not k8s_provider"
stage cluster after cluster -m "cluster and not engine and not k8s_provider"
stage k8s after engine -m "k8s_provider or (engine and cluster)"
wait "$builds_pid" "$hosts_build_pid"
build_times=$(jq -r '.parts[] | "\(.name) \(.seconds) s\(if .built_now then "" else " (cached)" end)"' \
  "$BENCHSTACK_ENGINE_DIR/current/status.json" 2>/dev/null | paste -sd ',' | sed 's/,/, /g')

printf '\n=== stage times (whole run %d s) ===\n' $((SECONDS - run_start)) >&2
printf '%s\n' "${TIMES[@]}" >&2
printf 'builds   (background) engine: %s\n' "${build_times:-unknown}" >&2
printf 'builds   (background) two-host image: %s\n' \
  "$(grep -o 'built .* in [0-9]* s' "$BUILDS/hosts.log" 2>/dev/null || echo cached)" >&2
printf 'builds   (background) cluster binaries: %s\n' \
  "$(jq -r '"\(.seconds // "?") s"' "$BENCHSTACK_K8S_DIR/current/status.json" 2>/dev/null || echo unknown)" >&2
((${#failed[@]} == 0)) || { echo "failed stages: ${failed[*]}" >&2; exit 1; }
