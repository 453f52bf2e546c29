#!/usr/bin/env bash
# The project's venv for the tests (.venv: the project with its test extras), the one bootstrap
# of it: `make unit` and tests/env/setup.sh both call this. Rebuilt only when pyproject.toml
# changes (its hash is the stamp). `make up` leaves .venv to the Pulumi language host, which
# makes it from requirements.txt (the same pins) on a fresh clone.
#
# Installed by uv (CI's fresh clone makes it every run: pip took two minutes of two cores, uv
# takes seconds), as Harbor's install step installs (tests/env/uv_install.py), its uv kept in the
# state dir beside the other builds.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../setup/lib.sh"
load_defaults
mkdir -p "$BENCHSTACK_STATE"

VENV=${BENCHSTACK_VENV:-$ROOT/.venv}
stamp="$VENV/.benchstack-stamp"
want=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
if [[ ! -x "$VENV/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  log "creating $VENV"
  "$BENCHSTACK_PYTHON" -m venv "$VENV"
  PYTHONPATH=$ROOT "$BENCHSTACK_PYTHON" -m tests.env.uv_install "$VENV" "$BENCHSTACK_STATE" \
    -e "${ROOT}[test]" >>"$BENCHSTACK_STATE/pip.log" 2>&1 \
    || die "installing the project with uv failed; see $BENCHSTACK_STATE/pip.log"
  echo "$want" >"$stamp"
fi
