#!/usr/bin/env bash
# The SSH host key of SSH_HOST as KNOWN_HOSTS records it. When it records none, one first
# contact through OpenSSH with StrictHostKeyChecking=accept-new (in SSH_OPTIONS) records it:
# the key is checked before any login, so no credentials are used and nothing runs on the host.
# Runs on the machine running Pulumi, at every preview and up (an invoke).
#
# Inputs (environment, with defaults):
#   SSH_HOST      address                                   (required)
#   SSH_PORT      port                                      (22)
#   KNOWN_HOSTS   the known_hosts file accept-new records in (~/.ssh/known_hosts)
#   SSH_OPTIONS   the seam's ssh options, shell-quoted words ("")
# Output (last stdout line, JSON): host_key ("type base64", "" when the host presented none)
set -euo pipefail

SSH_HOST=${SSH_HOST:?SSH_HOST is required}
SSH_PORT=${SSH_PORT:-22}
KNOWN_HOSTS=${KNOWN_HOSTS:-~/.ssh/known_hosts}
KNOWN_HOSTS=${KNOWN_HOSTS/#\~/$HOME}
SSH_OPTIONS=${SSH_OPTIONS:-}

name=$SSH_HOST
[[ "$SSH_PORT" == 22 ]] || name="[$SSH_HOST]:$SSH_PORT"
# `ssh-keygen -F` also finds hashed entries (HashKnownHosts).
lookup() { ssh-keygen -F "$name" -f "$KNOWN_HOSTS" 2>/dev/null | awk '!/^#/ && NF >= 3 {print $2 " " $3; exit}'; }

key=""
[[ -f "$KNOWN_HOSTS" ]] && key=$(lookup || true)
if [[ -z "$key" ]]; then
  mkdir -p "$(dirname "$KNOWN_HOSTS")"
  # The login itself is refused (no authentication method): only the key exchange happens.
  eval "ssh -n $SSH_OPTIONS -o PreferredAuthentications=none -o ConnectionAttempts=2 -p \"\$SSH_PORT\" \"\$SSH_HOST\" true" \
    >/dev/null 2>&1 || true
  [[ -f "$KNOWN_HOSTS" ]] && key=$(lookup || true)
fi
[[ -n "$key" ]] || printf 'known_host_key: %s presented no host key (unreachable, or not SSH)\n' "$name" >&2
jq -cn --arg key "$key" '{host_key: $key}'
