#!/usr/bin/env bash
# Runs a serving readiness probe (components/readiness.py) on this host, with httpx.
#
# Inputs (environment):
#   PROBE_SPEC       JSON object: what to probe, see readiness.py `run_spec` (required)
#   BENCHSTACK_CODE  the host code the seam copied; its readiness.py is the probe (required)
#   PROBE_PYTHON     a python3 that already imports httpx; skips the probe venv (default: unset)
#   PROBE_VENV       the cached probe venv (default: $HOME/.cache/benchstack/probe-httpx-$HTTPX_VERSION)
#   HTTPX_VERSION    httpx pinned in the probe venv (default: 0.28.1)
#   PROBE_PIP_ARGS   extra `pip install` arguments, e.g. an index mirror (default: unset)
#   PROBE_HARD_TIMEOUT_S  kill the probe after this long, whatever its own bounds (default: 7200)
# Output: the probe's JSON result as the last stdout line.
# Idempotent: the venv is built once (into a temporary directory, then renamed) and reused.
set -euo pipefail

die() { printf 'serving_probe: %s\n' "$*" >&2; exit 1; }
# shellcheck disable=SC2317  # called by lib/pinned_venv.sh, sourced below
log() { printf '[serving_probe] %s\n' "$*" >&2; }
: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
# shellcheck source=lib/pinned_venv.sh
source "$BENCHSTACK_CODE/scripts/lib/pinned_venv.sh"

[[ -n "${PROBE_SPEC:-}" ]] || die "PROBE_SPEC is empty: pass the probe's JSON spec"
HTTPX_VERSION=${HTTPX_VERSION:-0.28.1}
PROBE_VENV=${PROBE_VENV:-$HOME/.cache/benchstack/probe-httpx-$HTTPX_VERSION}

if [[ -n "${PROBE_PYTHON:-}" ]]; then
  "$PROBE_PYTHON" -c 'import httpx' 2>/dev/null \
    || die "PROBE_PYTHON=$PROBE_PYTHON cannot import httpx: unset it to use the probe venv"
  python=$PROBE_PYTHON
else
  python=$(pinned_venv "$PROBE_VENV" httpx "httpx==$HTTPX_VERSION" 300 PROBE_PIP_ARGS \
    "${PROBE_PIP_ARGS:-}")
fi

# The probe bounds its own waits; this is the backstop should a connection hang past them.
hard=${PROBE_HARD_TIMEOUT_S:-7200}
rc=0
timeout "$hard" "$python" "$BENCHSTACK_CODE/readiness.py" spec "$PROBE_SPEC" || rc=$?
if ((rc == 124)); then
  die "probe still running after PROBE_HARD_TIMEOUT_S=${hard}s: killed; check the endpoint by hand"
fi
exit "$rc"
