#!/usr/bin/env bash
# Serving container status probe: read-only, run at program time on every `pulumi up`/`preview`
# (components/serving.py). The probing is hostside/container_status.py, inlined
# below by the host seam (no code is on the host yet) and run with this host's python3.
#
# Inputs (environment): CONTAINER (the container's name), LABEL (the run token's label)
# Outputs (last stdout line, JSON): state (absent | running | stopped), token. Never fails.
set -uo pipefail

python3 - "$CONTAINER" "$LABEL" <<'BENCHSTACK_PY' || echo '{"state": "absent", "token": "start"}'
# benchstack:include hostside/container_status.py
BENCHSTACK_PY
