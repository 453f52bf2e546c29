#!/bin/bash
# A rehearsal host's boot, inside its container (the image's command; docker's init is PID 1 and
# reaps what the services leave): its own SSH host keys and sshd on port 22, then its own Docker
# engine started by its init script (no systemd here, as `sudo service docker restart`, the
# stack's restart command, expects), with its containers' cgroups under a parent of its own so
# that they never mix with this machine's engine's, then it waits.
#
# Inputs (environment): BENCHSTACK_HOST, the host's name (its cgroup parent);
# BENCHSTACK_DAEMON_JSON, the engine's /etc/docker/daemon.json as its owner left it ("": none).
set -eu
name=${BENCHSTACK_HOST:?BENCHSTACK_HOST is the host name}

[ -s /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -A
mkdir -p /run/sshd
/usr/sbin/sshd -E /var/log/sshd.log

if [ -n "${BENCHSTACK_DAEMON_JSON:-}" ] && [ ! -e /etc/docker/daemon.json ]; then
  mkdir -p /etc/docker
  printf '%s\n' "$BENCHSTACK_DAEMON_JSON" >/etc/docker/daemon.json
fi
printf 'DOCKER_OPTS="--cgroup-parent=/benchstack-host-%s"\n' "$name" >/etc/default/docker
service docker start >/dev/null
for _ in $(seq 1 120); do
  docker info >/dev/null 2>&1 && break
  sleep 0.5
done
echo "benchstack host $name up" >/run/benchstack-host-up
exec sleep infinity
