# shellcheck shell=bash
# Sourced by host scripts from the host code (scripts/lib/): a cached venv on the
# host holding one pinned package, for host-side Python that needs more than the stdlib.
# Needs the including script's `die` and `log`.
#
# Usage: python=$(pinned_venv VENV MODULE REQUIREMENT PIP_TIMEOUT PIP_ARGS_NAME [PIP_ARGS])
# Prints the venv's python; builds the venv first when MODULE does not import from it.
pinned_venv() {
  local venv=$1 module=$2 requirement=$3 limit=$4 args_name=$5 pip_args=${6:-} staging
  if "$venv/bin/python" -c "import $module" >/dev/null 2>&1; then
    printf '%s\n' "$venv/bin/python"
    return 0
  fi
  command -v python3 >/dev/null || die "python3 not found on this host: install python3 and python3-venv"
  log "building the venv $venv ($requirement)"
  mkdir -p "$(dirname "$venv")"
  # A half-built venv must never be left where the next run would trust it.
  staging=$(mktemp -d "$venv.tmp.XXXXXX")
  if ! python3 -m venv "$staging" >&2; then
    rm -rf "$staging"
    die "python3 -m venv failed: install the python3-venv package on this host"
  fi
  # shellcheck disable=SC2086  # the pip arguments are a list of words on purpose
  if ! timeout "$limit" "$staging/bin/pip" install -q --disable-pip-version-check $pip_args \
    "$requirement" >&2; then
    rm -rf "$staging"
    die "pip could not install $requirement: check the host's pip index/proxy or set $args_name"
  fi
  # A renamed venv keeps a working bin/python (only its scripts' shebangs go stale, and
  # nothing here runs them).
  rm -rf "$venv"
  mv "$staging" "$venv"
  "$venv/bin/python" -c "import $module" >&2 || die "venv $venv is broken: remove it and re-run"
  printf '%s\n' "$venv/bin/python"
}
