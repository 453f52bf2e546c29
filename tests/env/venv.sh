#!/usr/bin/env bash
# The project's venv for the tests (.venv: the project with its test extras), the one bootstrap
# of it: `make unit` and tests/env/setup.sh both call this. Rebuilt only when pyproject.toml
# changes (its hash is the stamp). `make up` leaves .venv to the Pulumi language host, which
# makes it from requirements.txt (the same pins) on a fresh clone.
#
# Installed by uv (CI's fresh clone makes it every run: pip took two minutes of two cores, uv
# takes seconds), the uv Harbor's install uses (hostside/uv_installer.py pins it), kept in the
# state dir beside the other builds.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../setup/lib.sh"
load_defaults
mkdir -p "$BENCHSTACK_STATE"

VENV=${BENCHSTACK_VENV:-$ROOT/.venv}
stamp="$VENV/.benchstack-stamp"
want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
uv_version=$(sed -n 's/^UV_VERSION = "\(.*\)"$/\1/p' "$ROOT/hostside/uv_installer.py")
[[ -n $uv_version ]] || die "no UV_VERSION in hostside/uv_installer.py"
UV_VENV=$BENCHSTACK_STATE/uv-$uv_version

# ensure_uv: uv in a venv of its own, made once by pip (which knows this machine's index).
ensure_uv() {
  [[ -x "$UV_VENV/bin/uv" ]] && return 0
  rm -rf "$UV_VENV.tmp"
  "$BENCHSTACK_PYTHON" -m venv "$UV_VENV.tmp"
  "$UV_VENV.tmp/bin/pip" install -q "uv==$uv_version" >>"$BENCHSTACK_STATE/pip.log" 2>&1 \
    || die "pip install uv==$uv_version failed; see $BENCHSTACK_STATE/pip.log"
  mv "$UV_VENV.tmp" "$UV_VENV"
}

if [[ ! -x "$VENV/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  log "creating $VENV"
  ensure_uv
  "$BENCHSTACK_PYTHON" -m venv "$VENV"
  "$UV_VENV/bin/python" -m uv pip install --quiet --python "$VENV/bin/python" -e "${ROOT}[test]" \
    >>"$BENCHSTACK_STATE/pip.log" 2>&1 || die "uv pip install failed; see $BENCHSTACK_STATE/pip.log"
  echo "$want" >"$stamp"
fi
