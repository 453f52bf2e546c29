#!/bin/sh
# The reference solution. The extra lines land in the trial's agent/oracle.txt, where the
# tests read what the compose override gave the container (proxy variables, mounted tools).
set -e
mkdir -p /app
printf 'hello\n' > /app/hello.txt
echo "wrote /app/hello.txt"
echo "proxy=${HTTP_PROXY:-unset}"
echo "tmux=$(command -v tmux || echo missing)"
echo "tools=$(ls /opt/harbor-tools 2>/dev/null | tr '\n' ' ')"
