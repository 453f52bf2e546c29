#!/usr/bin/env bash
# HarborJob dataset, on destroy: remove the clone this stack made. A dataset directory the user
# gave (DATASET_PATH) is never touched.
#
# Inputs (environment, with defaults):
#   CLONE_DIR   the clone made by harbor_dataset.sh; empty = none was made   ("")
# Outputs (last stdout line, JSON): removed ("" when nothing was)
set -euo pipefail

CLONE_DIR=${CLONE_DIR:-}
removed=""
if [[ -n "$CLONE_DIR" && -d "$CLONE_DIR/.git" ]]; then
  rm -rf -- "$CLONE_DIR"
  rmdir -- "$(dirname "$CLONE_DIR")" 2>/dev/null || true
  removed=$CLONE_DIR
fi
printf '[harbor_dataset.delete] removed %s\n' "${removed:-nothing}" >&2
jq -cn --arg removed "$removed" '{removed: $removed}'
