#!/usr/bin/env bash
# ProxyBridge status probe: read-only, run at program time on every `pulumi up`/`preview`,
# before any code is on the host, so hostside/proxy_status.py comes inlined (see that file).
# Inputs (environment): STATE_DIR, NAME, BRIDGE_PORT (required)
# Outputs (last stdout line, JSON): state (absent | running | down), token
set -uo pipefail
python3 - "$STATE_DIR" "$NAME" "$BRIDGE_PORT" <<'PY'
# benchstack:include hostside/proxy_status.py
PY
