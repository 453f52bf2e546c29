#!/bin/sh
# POSIX-sh-only verifier (the image has no python): reward 1 when /app/hello.txt says hello.
mkdir -p /logs/verifier
if [ -f /app/hello.txt ] && [ "$(cat /app/hello.txt)" = "hello" ]; then
  echo "PASS: /app/hello.txt contains 'hello'"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/hello.txt missing or wrong content"
  echo 0 > /logs/verifier/reward.txt
fi
exit 0
