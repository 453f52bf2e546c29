#!/usr/bin/env bash
# Serving container status probe: read-only, run at program time on every `pulumi up`/`preview`.
# The container carries a run token in a label; while it runs, this returns that token (the
# component's label is unchanged: nothing happens). When it stopped (a crash, an OOM kill, a
# reboot), it returns a new token derived from the old one, so the next `up` replaces the
# container: the worker or router is started again and proven ready. Never fails.
#
# Inputs (environment): CONTAINER (the container's name; required)
# Outputs (last stdout line, JSON): state (absent | running | stopped), token
set -uo pipefail

label=benchstack.run-token
if ! info=$(docker inspect -f "{{.State.Running}} {{index .Config.Labels \"$label\"}}" "$CONTAINER" 2>/dev/null); then
  echo '{"state": "absent", "token": "start"}'
  exit 0
fi
read -r running token <<<"$info"
if [[ "$running" == true ]]; then
  printf '{"state": "running", "token": "%s"}\n' "${token:-start}"
else
  printf '{"state": "stopped", "token": "restart-%s"}\n' "$(printf '%s' "$token" | sha256sum | cut -c1-12)"
fi
