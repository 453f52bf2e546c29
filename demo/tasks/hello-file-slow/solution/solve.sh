#!/bin/sh
# Sleeps past the 5 s agent timeout (AgentTimeoutError); with a larger agent timeout
# multiplier it finishes and passes, which the stop/resume tests rely on.
echo "starting slow solution"
sleep 15
mkdir -p /app
printf 'hello\n' > /app/hello.txt
