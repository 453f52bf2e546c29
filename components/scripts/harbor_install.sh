#!/usr/bin/env bash
# HarborJob install: Harbor in its own venv on the Harbor host, from a sha256-checked wheel
# (seed: "Install Harbor 0.21.0"). Idempotent: a venv whose stamp names the same wheel hash is
# kept as is.
#
# Inputs (environment, with defaults):
#   WORKSPACE        base directory on the host                     ($HOME/benchstack)
#   HARBOR_VERSION   Harbor release                                 (0.21.0)
#   WHEEL_SHA256     expected sha256 of the wheel                   (the seed's 0.21.0 hash)
#   PYTHON           interpreter for the venv, Python >= 3.12       (python3)
#   WHEEL            a local wheel file; empty = `PYTHON -m pip download` it  ("")
# Outputs (last stdout line, JSON): harbor_bin, venv, python, version, wheel_sha256, freeze
set -euo pipefail

WORKSPACE=${WORKSPACE:-$HOME/benchstack}
HARBOR_VERSION=${HARBOR_VERSION:-0.21.0}
WHEEL_SHA256=${WHEEL_SHA256:-c77d779a03f1a9e8ecb3c449e17f39a9728b82238832f1fd28632eb9426c0a21}
PYTHON=${PYTHON:-python3}
WHEEL=${WHEEL:-}
export HARBOR_TELEMETRY=0

log() { printf '[harbor_install] %s\n' "$*" >&2; }
die() { printf 'harbor_install: %s\n' "$*" >&2; exit 1; }

[[ "$WHEEL_SHA256" =~ ^[0-9a-f]{64}$ ]] || die "WHEEL_SHA256 must be 64 lowercase hex digits, got '$WHEEL_SHA256'"
command -v "$PYTHON" >/dev/null || die "PYTHON=$PYTHON not found on this host: point it at a Python >= 3.12"
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
  || die "PYTHON=$PYTHON does not run: point it at a working Python >= 3.12"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))' \
  || die "PYTHON=$PYTHON is Python $pyver; Harbor $HARBOR_VERSION needs >= 3.12: set PYTHON"

venv="$WORKSPACE/harbor-$HARBOR_VERSION"
logs="$WORKSPACE/logs"
freeze="$logs/harbor-$HARBOR_VERSION-freeze.txt"
stamp="$venv/.benchstack-wheel-sha256"
mkdir -p "$WORKSPACE/wheels" "$logs"

emit() {
  printf '{"harbor_bin": "%s", "venv": "%s", "python": "%s", "version": "%s", "wheel_sha256": "%s", "freeze": "%s"}\n' \
    "$venv/bin/harbor" "$venv" "$venv/bin/python" "$HARBOR_VERSION" "$WHEEL_SHA256" "$freeze"
}

if [[ "$(cat "$stamp" 2>/dev/null)" == "$WHEEL_SHA256" && -x "$venv/bin/harbor" ]]; then
  log "Harbor $HARBOR_VERSION already installed in $venv"
  emit
  exit 0
fi

if [[ -z "$WHEEL" ]]; then
  WHEEL="$WORKSPACE/wheels/harbor-$HARBOR_VERSION-py3-none-any.whl"
  if [[ ! -s "$WHEEL" ]]; then
    log "downloading harbor==$HARBOR_VERSION"
    timeout 600 "$PYTHON" -m pip download -q --no-deps --only-binary=:all: \
      -d "$WORKSPACE/wheels" "harbor==$HARBOR_VERSION" >&2 \
      || die "pip could not download harbor==$HARBOR_VERSION: check the host's pip index settings or set WHEEL"
  fi
fi
[[ -s "$WHEEL" ]] || die "WHEEL=$WHEEL does not exist: give the path of the Harbor wheel"
got=$(sha256sum "$WHEEL" | cut -d' ' -f1)
[[ "$got" == "$WHEEL_SHA256" ]] \
  || die "wheel $WHEEL has sha256 $got, expected $WHEEL_SHA256: use the pinned wheel or fix WHEEL_SHA256"

log "installing Harbor $HARBOR_VERSION into $venv (Python $pyver)"
# A venv without the stamp is half-built (interrupted install): start over. On failure the
# partial venv is removed, so the host is left as it was found.
rm -rf "$venv"
trap 'rm -rf "$venv"' EXIT
"$PYTHON" -m venv "$venv" || die "could not create a venv with $PYTHON: install its venv module"
timeout 1200 "$venv/bin/python" -m pip install -q --disable-pip-version-check "$WHEEL" >&2 \
  || die "pip install of $WHEEL failed (see above): check the host's pip index settings"
"$venv/bin/harbor" --version >/dev/null 2>&1 || die "the installed harbor does not run from $venv/bin/harbor"
"$venv/bin/python" -m pip freeze --disable-pip-version-check >"$freeze"
echo "$WHEEL_SHA256" >"$stamp"
trap - EXIT
log "Harbor $HARBOR_VERSION ready; pip freeze saved to $freeze"
emit
