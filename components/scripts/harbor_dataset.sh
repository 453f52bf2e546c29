#!/usr/bin/env bash
# HarborJob dataset: the pinned task set on the Harbor host (seed: "Download and pin
# Terminal-Bench 2.1"). Either a git clone checked out at COMMIT, or a directory already on the
# host. Every task dir gets its `environment/` dir (git drops empty dirs, and Harbor does not
# recognise a task without one). The task count must be EXPECTED_TASKS.
# Idempotent: an existing clone at COMMIT is reused.
#
# Inputs (environment, with defaults):
#   WORKSPACE        base directory on the host; clones go to WORKSPACE/datasets  ($HOME/benchstack)
#   DATASET_PATH     a task directory already on the host (instead of a clone)    ("")
#   GIT_URL          repository to clone (when DATASET_PATH is empty)             ("")
#   COMMIT           40-hex commit to check out                                   ("")
#   CLONE_DIR        where the clone goes        (WORKSPACE/datasets/<repo name>-<commit[:12]>)
#   SUBDIR           the tasks' directory inside the repository                   (tasks)
#   EXPECTED_TASKS   number of task.toml files expected (89 for TB 2.1)           (required)
#   INCLUDE, EXCLUDE task-name globs, space separated (the job's filters)         ("")
# Outputs (last stdout line, JSON): dataset_path, task_count, selected_count, commit
set -euo pipefail

WORKSPACE=${WORKSPACE:-$HOME/benchstack}
DATASET_PATH=${DATASET_PATH:-}
GIT_URL=${GIT_URL:-}
COMMIT=${COMMIT:-}
SUBDIR=${SUBDIR:-tasks}
EXPECTED_TASKS=${EXPECTED_TASKS:-}
INCLUDE=${INCLUDE:-}
EXCLUDE=${EXCLUDE:-}

log() { printf '[harbor_dataset] %s\n' "$*" >&2; }
die() { printf 'harbor_dataset: %s\n' "$*" >&2; exit 1; }

[[ "$EXPECTED_TASKS" =~ ^[1-9][0-9]*$ ]] || die "EXPECTED_TASKS must be a positive number, got '$EXPECTED_TASKS'"

commit=""
if [[ -n "$DATASET_PATH" ]]; then
  [[ -z "$GIT_URL" ]] || die "set DATASET_PATH or GIT_URL, not both"
  [[ "$DATASET_PATH" == /* ]] || die "DATASET_PATH must be absolute (Harbor stores it verbatim): $DATASET_PATH"
  [[ -d "$DATASET_PATH" ]] || die "DATASET_PATH=$DATASET_PATH is not a directory on this host"
  tasks=$DATASET_PATH
else
  [[ -n "$GIT_URL" ]] || die "set DATASET_PATH (a local task dir) or GIT_URL and COMMIT"
  [[ "$COMMIT" =~ ^[0-9a-f]{40}$ ]] || die "COMMIT must be a full 40-hex commit, got '$COMMIT'"
  command -v git >/dev/null || die "git is not installed on this host: install git"
  name=$(basename "${GIT_URL%/}" .git)
  clone=${CLONE_DIR:-$WORKSPACE/datasets/$name-${COMMIT:0:12}}
  if [[ "$(git -C "$clone" rev-parse HEAD 2>/dev/null)" != "$COMMIT" ]]; then
    log "cloning $GIT_URL at $COMMIT"
    mkdir -p "$(dirname "$clone")"
    rm -rf "$clone.partial"
    # A failed clone must not leave a half-written dir behind.
    trap 'rm -rf "$clone.partial"' EXIT
    timeout 1800 git clone -q "$GIT_URL" "$clone.partial" >&2 \
      || die "git clone of $GIT_URL failed (see above): check GIT_URL and the host's network"
    git -C "$clone.partial" -c advice.detachedHead=false checkout -q --detach "$COMMIT" >&2 \
      || die "commit $COMMIT is not in $GIT_URL: check COMMIT"
    rm -rf "$clone"
    mv "$clone.partial" "$clone"
    trap - EXIT
  fi
  commit=$(git -C "$clone" rev-parse HEAD)
  [[ "$commit" == "$COMMIT" ]] || die "clone $clone is at $commit, not $COMMIT: remove it and re-run"
  tasks="$clone/$SUBDIR"
  [[ -d "$tasks" ]] || die "SUBDIR=$SUBDIR does not exist in $GIT_URL at $COMMIT: set SUBDIR"
fi

count=$(find "$tasks" -mindepth 2 -maxdepth 2 -name task.toml -type f | wc -l)
[[ "$count" -eq "$EXPECTED_TASKS" ]] \
  || die "$tasks has $count tasks (task.toml files), expected $EXPECTED_TASKS: check the dataset pin or EXPECTED_TASKS"

selected=0
while IFS= read -r toml; do
  dir=$(dirname "$toml")
  # Harbor only recognises a task dir that has environment/, even an empty one.
  mkdir -p "$dir/environment"
  task=$(basename "$dir")
  keep=1
  set -f  # INCLUDE/EXCLUDE are task-name patterns: split them, do not expand them as files
  if [[ -n "$INCLUDE" ]]; then
    keep=0
    # shellcheck disable=SC2053  # INCLUDE's words are glob patterns, matched as globs on purpose
    for glob in $INCLUDE; do [[ "$task" == $glob ]] && keep=1; done
  fi
  # shellcheck disable=SC2053  # EXCLUDE's words are glob patterns, matched as globs on purpose
  for glob in $EXCLUDE; do [[ "$task" == $glob ]] && keep=0; done
  set +f
  selected=$((selected + keep))
done < <(find "$tasks" -mindepth 2 -maxdepth 2 -name task.toml -type f)
((selected > 0)) || die "no task in $tasks matches INCLUDE='$INCLUDE' minus EXCLUDE='$EXCLUDE': fix the job's task filters"

log "$count tasks in $tasks, $selected selected"
printf '{"dataset_path": "%s", "task_count": %d, "selected_count": %d, "commit": "%s"}\n' \
  "$tasks" "$count" "$selected" "$commit"
