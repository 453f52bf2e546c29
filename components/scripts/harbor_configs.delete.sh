#!/usr/bin/env bash
# HarborJob configs, on destroy: remove the rendered job config and compose override. The job
# dir keeps Harbor's own config.json and the logs keep the resolved config, so nothing of what
# ran is lost.
#
# Inputs (environment, with defaults):
#   CONFIG_PATH   the rendered Harbor job config    (required)
#   COMPOSE_PATH  the rendered compose override     (required)
# Outputs (last stdout line, JSON): removed (list of paths)
set -euo pipefail

: "${CONFIG_PATH:?CONFIG_PATH is required}" "${COMPOSE_PATH:?COMPOSE_PATH is required}"
removed=()
for path in "$CONFIG_PATH" "$COMPOSE_PATH"; do
  if [[ -f "$path" ]]; then
    rm -f -- "$path"
    removed+=("$path")
  fi
done
rmdir -- "$(dirname "$CONFIG_PATH")" "$(dirname "$COMPOSE_PATH")" 2>/dev/null || true
printf '%s\n' "${removed[@]}" | jq -Rsc '{removed: (split("\n") | map(select(length > 0)))}'
