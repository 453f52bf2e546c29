#!/bin/sh
# Deliberately wrong: the verifier must give reward 0 (a model failure, not a harness one).
mkdir -p /app
printf 'goodbye\n' > /app/hello.txt
echo "wrote the wrong content on purpose"
