#!/usr/bin/env bash
# HarborJob preflight (seed: "Run the full-run preflight"): Harbor resolves the job exactly as
# the launch will (`--print-config`, same flags), and every field the stack decides is compared
# with what the stack asked for; also refused: a missing dataset dir, a missing bind-mount
# source, an existing job dir with another config. Nothing runs.
#
# The work is components/preflight.py, from the host code the seam copied ($BENCHSTACK_CODE),
# run with the Harbor venv's python (it has PyYAML). Its docstring lists the inputs
# (environment: HARBOR_BIN, JOB_CONFIG, COMPOSE_PATH, JOB_NAME, JOBS_DIR, EXPECTED,
# RESOLVED_OUT) and the output (last stdout line, JSON: resolved_config, resolved_sha256,
# checked_fields).
set -euo pipefail

die() { printf 'harbor_preflight: %s\n' "$*" >&2; exit 1; }

: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
[[ -n "${HARBOR_BIN:-}" ]] || die "HARBOR_BIN is empty: the component must pass it"
[[ -x "$HARBOR_BIN" ]] || die "HARBOR_BIN=$HARBOR_BIN is not executable: run the install step first"
[[ -f "${JOB_CONFIG:-}" ]] || die "job config ${JOB_CONFIG:-} does not exist: run the configs step first"
[[ -f "${COMPOSE_PATH:-}" ]] || die "compose override ${COMPOSE_PATH:-} does not exist: run the configs step first"
python="$(dirname "$HARBOR_BIN")/python"
[[ -x "$python" ]] || die "$python is not executable: HARBOR_BIN must be the harbor of its venv"
exec "$python" "$BENCHSTACK_CODE/preflight.py"
