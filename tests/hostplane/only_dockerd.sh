#!/usr/bin/env bash
# Issue 38's sequence where the tests' engine is the only dockerd there is, as the machine's own
# engine is on a CI machine: run inside a PID and mount namespace of its own (the caller runs
# `unshare --mount --pid --fork --mount-proc bash only_dockerd.sh ...`), so that the step's
# restart finds this dockerd, and no other, the way it finds a host's.
#
#   only_dockerd.sh CHECKOUT STEP...
#
# starts the engine (testengine.sh: TE_NS, TE_DIR, TE_RUN) from CHECKOUT, deletes CHECKOUT, then
# runs each STEP (a host step's command line) inside the engine's network namespace, and prints
# what each left on stdout as KEY=VALUE lines: step_exit_N, answers_N, pools_N, cwd_N. The steps' own
# output goes to stderr. Everything in the namespace ends with it.
set -euo pipefail
: "${TE_NS:?}" "${TE_DIR:?}" "${TE_RUN:?}"
checkout=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pidfile=$TE_RUN/dockerd.pid
# The PID file names a process of this namespace only: gone with it.
trap 'rm -f "$pidfile"' EXIT

# This machine's init script would start a dockerd on the default socket (the machine's own
# engine's): a stand-in that fails without a word takes its place here, as the package's did on
# the machine of the issue.
mount -t tmpfs benchstack-initd /etc/init.d
printf '#!/bin/sh\nexit 1\n' >/etc/init.d/docker
chmod +x /etc/init.d/docker

export DOCKER_HOST=unix://$TE_RUN/docker.sock
answering() { docker info >/dev/null 2>&1; }
TE_CWD=$checkout bash "$here/testengine.sh" start
for _ in $(seq 1 120); do answering && break; sleep 0.5; done
answering || { echo "only_dockerd.sh: the engine did not answer" >&2; exit 1; }
rm -rf "$checkout"

# report N: what the engine is after step N.
report() {
  local pid
  if answering; then echo "answers_$1=yes"; else echo "answers_$1=no"; fi
  echo "pools_$1=$(docker info --format '{{json .DefaultAddressPools}}' 2>/dev/null)"
  pid=$(cat "$pidfile" 2>/dev/null || true)
  echo "cwd_$1=$(readlink "/proc/${pid:-0}/cwd" 2>/dev/null || true)"
}

n=0
for step in "$@"; do
  n=$((n + 1))
  status=0
  nsenter --net="/run/netns/$TE_NS" sh -c "$step" >&2 </dev/null || status=$?
  echo "step_exit_$n=$status"
  report "$n"
done
bash "$here/testengine.sh" stop
