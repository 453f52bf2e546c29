#!/bin/sh
# The reference solution. In Harbor's ack environment process 1 is the pod's `sleep infinity`
# and the hostname is the pod's name: both land in agent/oracle.txt for the test to read.
set -e
mkdir -p /app
{ tr '\0' ' ' < /proc/1/cmdline | cut -d' ' -f1; hostname; } > /app/where.txt
cat /app/where.txt
