#!/bin/sh
# Reward 1 when /app/where.txt holds what the pod shows now: process 1's command and the hostname.
mkdir -p /logs/verifier
want="$(tr '\0' ' ' < /proc/1/cmdline | cut -d' ' -f1)
$(hostname)"
if [ -f /app/where.txt ] && [ "$(cat /app/where.txt)" = "$want" ]; then
  echo "PASS: $(tr '\n' ' ' < /app/where.txt)"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: want '$want', got '$(cat /app/where.txt 2>/dev/null)'"
  echo 0 > /logs/verifier/reward.txt
fi
exit 0
