#!/usr/bin/env bash
# HarborJob configs: write the rendered Harbor job config and the Docker Compose override to the
# Harbor host (seed: "Create the Harbor and Docker Compose configs"). The texts are rendered by
# components/harbor_config.py; this only places them. Idempotent: same text, same file.
#
# Inputs (environment, with defaults):
#   CONFIG_PATH      where the job config goes                      (required)
#   COMPOSE_PATH     where the compose override goes                (required)
#   JOB_CONFIG_YAML  the job config text                            (required)
#   COMPOSE_YAML     the compose override text                      (required)
# Outputs (last stdout line, JSON): config_path, compose_path, config_sha256, compose_sha256
set -euo pipefail

die() { printf 'harbor_configs: %s\n' "$*" >&2; exit 1; }

for key in CONFIG_PATH COMPOSE_PATH JOB_CONFIG_YAML COMPOSE_YAML; do
  [[ -n "${!key:-}" ]] || die "$key is empty: the component must pass it"
done
for key in CONFIG_PATH COMPOSE_PATH; do
  [[ "${!key}" == /* ]] || die "$key must be an absolute path (Harbor stores paths verbatim): ${!key}"
done

place() {  # write atomically, so a reader never sees half a file
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "$2" >"$1.tmp"
  mv "$1.tmp" "$1"
  printf '[harbor_configs] wrote %s\n' "$1" >&2
}
place "$CONFIG_PATH" "$JOB_CONFIG_YAML"
place "$COMPOSE_PATH" "$COMPOSE_YAML"

printf '{"config_path": "%s", "compose_path": "%s", "config_sha256": "%s", "compose_sha256": "%s"}\n' \
  "$CONFIG_PATH" "$COMPOSE_PATH" "$(sha256sum "$CONFIG_PATH" | cut -d' ' -f1)" \
  "$(sha256sum "$COMPOSE_PATH" | cut -d' ' -f1)"
