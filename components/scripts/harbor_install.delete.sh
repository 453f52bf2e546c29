#!/usr/bin/env bash
# HarborJob install, on destroy: remove the Harbor venv and its downloaded wheel. The freeze
# list stays with the logs (it says what ran); results are never touched.
#
# Inputs (environment, with defaults):
#   WORKSPACE       base directory on the host                 ($HOME/benchstack)
#   HARBOR_VERSION  the installed version                      (0.21.0)
# Outputs (last stdout line, JSON): removed (list of paths)
set -euo pipefail

WORKSPACE=${WORKSPACE:-$HOME/benchstack}
HARBOR_VERSION=${HARBOR_VERSION:-0.21.0}
venv="$WORKSPACE/harbor-$HARBOR_VERSION"
wheel="$WORKSPACE/wheels/harbor-$HARBOR_VERSION-py3-none-any.whl"

removed=()
# Only a venv is removed: a directory of that name that is not one is someone else's.
if [[ -f "$venv/pyvenv.cfg" ]]; then
  rm -rf -- "$venv"
  removed+=("$venv")
fi
if [[ -f "$wheel" ]]; then
  rm -f -- "$wheel"
  removed+=("$wheel")
fi
rmdir -- "$WORKSPACE/wheels" 2>/dev/null || true
printf '[harbor_install.delete] removed %s\n' "${removed[*]:-nothing}" >&2
printf '%s\n' "${removed[@]}" | jq -Rsc '{removed: (split("\n") | map(select(length > 0)))}'
