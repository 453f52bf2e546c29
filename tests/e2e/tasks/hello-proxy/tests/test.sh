#!/bin/bash
# A verifier that needs the proxy (as many TB tasks' verifiers download their test deps): one
# HTTP exchange through $http_proxy with bash's /dev/tcp (the image has no curl). Any HTTP
# status line from the proxy passes. When the proxy is unreachable, bash's own error is the
# evidence the audit reads, and the reward is 0: an infra failure, not the model's.
mkdir -p /logs/verifier
proxy=${http_proxy:-${HTTP_PROXY:-}}
proxy=${proxy#http://}
proxy=${proxy%%/*}
host=${proxy%:*} port=${proxy##*:}
if [ -z "$proxy" ]; then
  echo "FAIL: no http_proxy in the environment"
  echo 0 > /logs/verifier/reward.txt
  exit 0
fi
status=$( (exec 3<>"/dev/tcp/$host/$port" && printf 'GET http://127.0.0.1:9/ HTTP/1.0\r\n\r\n' >&3 && head -n 1 <&3) 2>&1 )
echo "$status"
case "$status" in
  HTTP/*) echo "PASS: the proxy at $host:$port answered"; echo 1 > /logs/verifier/reward.txt ;;
  *) echo "FAIL: no answer from the proxy at $host:$port"; echo 0 > /logs/verifier/reward.txt ;;
esac
exit 0
