#!/usr/bin/env bash
# CI twice on one machine, as a developer's machine meets CI: CI's script (.ci/run) from a fresh
# clone, that clone deleted, then CI's script again from another fresh clone, while whatever the
# first run started (the Docker engine, the registry, the proxy, sshd, the cluster) still runs.
# Both runs must pass: nothing the first run left may fail the second (tests/run.sh's leftovers
# stage, an engine restarted from a folder that is gone: hostside/dockerd_restart.py).
#
#   tests/env/ci_twice.sh [COMMIT]     default: this checkout's HEAD
#
# The clones sit beside the project's `shared/` folder (the engine build reads ../shared/vendor):
# CI_TWICE_DIR (default: this checkout's parent folder)/ci-a and /ci-b, which must not exist.
# CI is set as CI sets it (leftovers are removed). Each run's log goes to CI_TWICE_LOGS
# (default /var/log/benchstack-ci-twice), outside the clones; the end prints each run's time and
# the stage times tests/run.sh printed. Takes about twice a CI run (50 minutes each, warm).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PARENT=${CI_TWICE_DIR:-$(dirname "$ROOT")}
LOGS=${CI_TWICE_LOGS:-/var/log/benchstack-ci-twice}

die() { printf 'ci_twice: %s\n' "$*" >&2; exit 1; }

commit=$(git -C "$ROOT" rev-parse --verify "${1:-HEAD}^{commit}") || die "no commit ${1:-HEAD} in $ROOT"
[[ -d "$PARENT/shared/vendor" ]] \
  || die "$PARENT/shared/vendor is missing: the engine build reads ../shared/vendor; set CI_TWICE_DIR to the folder that holds shared/"
for name in ci-a ci-b; do
  [[ ! -e "$PARENT/$name" ]] || die "$PARENT/$name exists: remove it first (an earlier ci_twice.sh that was interrupted?)"
done
mkdir -p "$LOGS"
export CI=${CI:-true}

# run NAME: CI's script from a fresh clone PARENT/NAME at the commit, the clone deleted after,
# whatever happened; its log in LOGS/NAME.log.
run() {
  local name=$1 clone=$PARENT/$1 log=$LOGS/$1.log start=$SECONDS status=0
  git clone -q --no-checkout "$ROOT" "$clone"
  git -C "$clone" checkout -q --detach "$commit"
  printf '[ci_twice] %s: .ci/run from %s (%s), log %s\n' "$name" "$clone" "${commit:0:12}" "$log" >&2
  (cd "$clone" && exec .ci/run) >"$log" 2>&1 || status=$?
  rm -rf "$clone"
  printf '[ci_twice] %s: %s in %d s (clone deleted)\n' "$name" \
    "$([[ $status == 0 ]] && echo passed || echo "FAILED ($status)")" $((SECONDS - start)) >&2
  sed -n '/=== stage times/,$p' "$log" >&2
  return "$status"
}

run ci-a || die "the first run failed: see $LOGS/ci-a.log"
run ci-b || die "the second run, after the first one's clone was deleted, failed: see $LOGS/ci-b.log"
printf '[ci_twice] both runs passed at %s\n' "${commit:0:12}" >&2
