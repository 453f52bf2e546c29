#!/usr/bin/env bash
# `make test` (and CI's .ci/run): the peers, lint, every real test and the fast loop, each once,
# in stages ordered by what they wait for, and each stage's time at the end.
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
#   real      the real tests that need neither the engine nor the cluster (two at a time),
#   engine    then those that need the engine's core (the CLI with the command and Docker
#             providers) and bring up no local stack, beside
#   two-hosts the two-host rehearsal (its hosts are containers of this machine's engine: nothing
#             beside it restarts that engine), then
#   k8s       those that need the Kubernetes provider (the whole engine) and reach the Docker
#             engine (the local Kubernetes stack), there where its build is already done
#             (`early`: a warm machine), else after the restarts (`late`: the lanes wait for no
#             build the restarts do not need)
#   restarts  the local stacks, whose Docker daemon config restarts this machine's engine, with
#             no test that reaches that engine beside them, but
#   unit      every test with no peer, one worker, on the core the local stacks leave idle (they
#             wait on their jobs half the time), then
#   cluster   those that need the one-node cluster but not the engine (`early`, as k8s), then
#   provider  the Kubernetes provider's tests that reach no Docker engine (`early`), then
#   nodocker  the real tests marked no_docker (stand-in servers, sshd, S3, pip): all with a
#             Docker endpoint that nothing serves, so that a test that talks to an engine
#             fails there, whatever the restarts do
#   alone     the tests that compare the whole Docker engine before and after, beside lint
#             alone (`early`: a warm machine, its builds done), else last, alone
#
# Which tests each stage runs, and which run side by side: tests/stages.py.
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
# Each stage's time and outcome, a line each, the stages that failed and the lanes' logs: files,
# not variables, as the stages of a lane run in a background shell of their own; this run's own,
# as an interrupted earlier run on this machine may still be ending and writing to its own.
RUN=$(mktemp -d "$BUILDS/run.XXXXXX") || exit 1
trap 'rm -rf "$RUN"' EXIT
# Python's bytecode, cached once for every process of the run: where the machine sets
# PYTHONDONTWRITEBYTECODE (CI's does), each Pulumi program, pytest worker and host step compiled
# every module it imported from source again (uv installs no bytecode): about 1.8 s of CPU per
# `pulumi` operation (benchmarks/bench_bytecode.py). The cache is the run's own, not beside the
# sources, so it adds no __pycache__ to a clone, workspace or host code dir (a host is left as it
# was found), and it goes with the run: its tests' temporary venvs and workspaces fill 1.5 GB.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=$RUN/pycache
TIMES=$RUN/times
FAILED=$RUN/failed
RAN=$RUN/ran
: >"$TIMES"
: >"$FAILED"
: >"$RAN"

# stage NAME COMMAND...: run it, record its time and whether it passed.
stage() {
  local name=$1 start=$SECONDS status
  shift
  printf '\n=== %s ===\n' "$name" >&2
  "$@"
  status=$?
  printf '%-9s %5d s  %s\n' "$name" $((SECONDS - start)) \
    "$([[ $status == 0 ]] && echo ok || echo "FAILED ($status)")" >>"$TIMES"
  ((status == 0)) || echo "$name" >>"$FAILED"
  return 0
}

failed() { grep -qx "$1" "$FAILED"; }

# wait_for BUILD: until the background build BUILD ended (none: at once); fails if it failed.
wait_for() {
  local build=$1
  [[ $build == none ]] && return 0
  while [[ ! -f "$BUILDS/$build.status" ]]; do sleep 5; done
  [[ "$(cat "$BUILDS/$build.status")" == 0 ]] || { echo "the $build build failed: see $BUILDS/builds.log" >&2; return 1; }
}

# after BUILD PYTEST_ARGS...: the tests of a stage, once BUILD is ready; its five slowest steps
# printed, where a stage's time goes.
after() {
  local build=$1
  shift
  wait_for "$build" || return 1
  "$PY" -m pytest -q --durations=5 "$@"
}

# test_stage NAME: the stage NAME of tests/stages.py (its build, its Docker endpoint, then its
# pytest arguments).
test_stage() {
  local spec=()
  echo "$1" >>"$RAN"
  mapfile -t spec < <("$PY" -m tests.stages "$1")
  if ((${#spec[@]} < 3)); then
    echo "$1" >>"$FAILED"
    return 0
  fi
  if [[ ${spec[1]} == default ]]; then
    stage "$1" after "${spec[0]}" "${spec[@]:2}"
  else
    DOCKER_HOST=${spec[1]} stage "$1" after "${spec[0]}" "${spec[@]:2}"
  fi
}

# early NAME: the stage now if its build has already ended (a warm machine), else nothing: `late`
# runs it after the restarts (a fresh machine, its build still running).
early() {
  local build
  # sed, not head: head exits after one line and breaks the pipe of the still-printing python.
  build=$("$PY" -m tests.stages "$1" | sed -n 1p)
  if [[ $build == none || -f "$BUILDS/$build.status" ]]; then
    test_stage "$1"
  else
    printf '\n=== %s: its build (%s) still running, after the restarts ===\n' "$1" "$build" >&2
  fi
}

# late NAME: the stage, unless `early` ran it.
late() { grep -qx "$1" "$RAN" || test_stage "$1"; }

# beside LANE...: the lanes (functions running stages one after another) at once, each into a log
# of its own, printed whole once that lane ended; returns when all ended.
beside() {
  local lane pids=() start=$SECONDS
  for lane in "$@"; do
    "$lane" >"$RUN/$lane.log" 2>&1 &
    pids+=($!)
  done
  for lane in "$@"; do
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
    printf '\n=== lane %s (side by side, %d s from the start of the lanes) ===\n' \
      "$lane" $((SECONDS - start)) >&2
    cat "$RUN/$lane.log" >&2
  done
  printf '%-9s %5d s  (the lanes, side by side: %s)\n' beside $((SECONDS - start)) "$*" >>"$TIMES"
}

lane_tests() { test_stage real; test_stage engine; }
lane_hosts() { test_stage two-hosts; early k8s; }
lane_restarts() { test_stage restarts; }
lane_fast() { stage unit fast_tests; early cluster; early provider; test_stage nodocker; }
lane_lint() { stage lint make --no-print-directory lint; }
# Beside lint (which reaches no engine), once nothing builds on the engine (the two-host image's
# build ended: seconds on a warm machine), else last.
lane_quiet() { ended_within hosts 30 && early alone; }

# ended_within BUILD SECONDS: whether the background build BUILD ends within SECONDS.
ended_within() {
  local waited
  for ((waited = 0; waited < $2; waited++)); do
    [[ -f "$BUILDS/$1.status" ]] && return 0
    sleep 1
  done
  return 1
}

# The tests with no peer, in one worker, their Docker endpoint a socket nothing serves (the
# cluster's stage gets the same from tests/stages.py).
fast_tests() {
  DOCKER_HOST=unix:///run/benchstack-no-engine.sock \
    "$PY" -m pytest -q --durations=5 -m "not real" -n 1
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
if failed packages || failed peers; then
  printf '\n' >&2
  cat "$TIMES" >&2
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
beside lane_lint lane_quiet
beside lane_tests lane_hosts
# No test that reaches this machine's engine beside a stage that restarts it: the fast tests, then
# the cluster's, the provider's and the no_docker ones, with a Docker endpoint nothing serves
# (about half the restarts' time on a warm machine). One worker: the other core stays the
# local stacks', whose steps wait on clocks of their own (the fast tests' waits are ten seconds
# and more).
beside lane_restarts lane_fast
late cluster
late provider
late k8s
late alone
wait "$builds_pid" "$hosts_build_pid"
build_times=$(jq -r '.parts[] | "\(.name) \(.seconds) s\(if .built_now then "" else " (cached)" end)"' \
  "$BENCHSTACK_ENGINE_DIR/current/status.json" 2>/dev/null | paste -sd ',' | sed 's/,/, /g')

printf '\n=== stage times (whole run %d s) ===\n' $((SECONDS - run_start)) >&2
cat "$TIMES" >&2
printf 'builds    (background) engine: %s\n' "${build_times:-unknown}" >&2
printf 'builds    (background) two-host image: %s\n' \
  "$(grep -o 'built .* in [0-9]* s' "$BUILDS/hosts.log" 2>/dev/null || echo cached)" >&2
printf 'builds    (background) cluster binaries: %s\n' \
  "$(jq -r '"\(.seconds // "?") s"' "$BENCHSTACK_K8S_DIR/current/status.json" 2>/dev/null || echo unknown)" >&2
[[ ! -s "$FAILED" ]] || { echo "failed stages: $(paste -sd ' ' "$FAILED")" >&2; exit 1; }
