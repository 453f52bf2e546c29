#!/bin/sh
# The reference solution (the oracle agent runs it in the trial's pod).
set -e
mkdir -p /app
printf 'hello\n' > /app/hello.txt
echo "wrote /app/hello.txt"
