#!/usr/bin/env bash
# ProxyBridge status probe: read-only, run at program time on every `pulumi up`/`preview`. The
# bridge's create records a token; while its supervisor lives and socat listens, this returns
# that token (the step's trigger is unchanged: nothing runs). When the bridge died with its
# supervisor (a reboot, a kill), it returns a new token derived from the recorded one, so the
# next `up` replaces the step: the bridge is started again. Never fails.
#
# Inputs (environment): STATE_DIR, NAME, BRIDGE_PORT (as for proxy_bridge.sh; required)
# Outputs (last stdout line, JSON): state (absent | running | down), token
set -uo pipefail

token_file="$STATE_DIR/$NAME.token"
recorded=$(cat "$token_file" 2>/dev/null) || { echo '{"state": "absent", "token": "start"}'; exit 0; }
alive() {
  if systemctl is-active --quiet "$NAME.service" 2>/dev/null; then return 0; fi
  local pid
  pid=$(cat "$STATE_DIR/$NAME.pid" 2>/dev/null) && [[ "$pid" =~ ^[0-9]+$ ]] \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "benchstack-proxy-bridge-loop $NAME "
}
if alive && [[ -n "$(ss -ltnH "sport = :$BRIDGE_PORT" 2>/dev/null)" ]]; then
  printf '{"state": "running", "token": "%s"}\n' "$recorded"
else
  printf '{"state": "down", "token": "repair-%s"}\n' "$(printf '%s' "$recorded" | sha256sum | cut -c1-12)"
fi
