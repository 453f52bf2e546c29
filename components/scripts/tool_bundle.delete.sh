#!/usr/bin/env bash
# ToolBundle delete: remove the bundle directory that tool_bundle.sh built. Only a directory that
# carries the bundle's stamp is removed (a mistyped TOOLS_DIR never deletes anything else), and a
# bundle that is already gone is fine. Containers still running keep their mounts until they stop.
#
# Inputs (environment, with defaults):
#   TOOLS_DIR   the bundle directory        ($HOME/benchstack/harbor-tools-amd64)
# Outputs (last stdout line, JSON): removed (bool), tools_dir
set -euo pipefail

TOOLS_DIR=${TOOLS_DIR:-$HOME/benchstack/harbor-tools-amd64}

log() { printf '[tool_bundle.delete] %s\n' "$*" >&2; }
die() { printf 'tool_bundle.delete: %s\n' "$*" >&2; exit 1; }

[[ "$TOOLS_DIR" == /* && "$TOOLS_DIR" != / ]] || die "TOOLS_DIR must be an absolute path other than /, got '$TOOLS_DIR'"
removed=false
if [[ -f "$TOOLS_DIR/.benchstack-stamp" ]]; then
  rm -rf "$TOOLS_DIR"
  removed=true
  log "removed $TOOLS_DIR"
elif [[ -e "$TOOLS_DIR" ]]; then
  die "TOOLS_DIR=$TOOLS_DIR is not a benchstack tool bundle (no .benchstack-stamp): left alone, remove it by hand if intended"
else
  log "$TOOLS_DIR is already gone"
fi
# Leftovers of an interrupted build (staging dirs) are ours too.
rm -rf "$TOOLS_DIR".stage.* "$TOOLS_DIR".old.* 2>/dev/null || true
jq -cn --argjson removed "$removed" --arg d "$TOOLS_DIR" '{removed: $removed, tools_dir: $d}'
