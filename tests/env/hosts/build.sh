#!/usr/bin/env bash
# Builds the image of the two-host rehearsal's hosts (tests/env/hosts/hosts.sh runs one container
# of it per host), once per set of inputs: a Debian bookworm root filesystem made with
# debootstrap (as the canary is), with what the seed installs on its two servers (ca-certificates
# curl git jq python3 skopeo socat tmux, Docker), an sshd, sudo, a non-root user `bench` (uid
# 1000, in the docker group, passwordless sudo), a Python >= 3.12 for Harbor (this machine's
# harbor Python, installed under /usr/local as python3.13, the name Pulumi.a100.yaml uses), the
# Compose v2 plugin, and pip pointed at the upstream proxy the hosts reach on their own loopback.
#
# Cached by the hash of its inputs (this script, the boot script, the package list, the Python's
# version, the compose plugin's sha256, this machine's CA bundle): the image carries the hash
# as a label, so a warm run is one `docker image inspect`. The debootstrap tarball is kept per package list under
# $BENCHSTACK_TEST_STATE/hosts, so a changed boot script rebuilds in about a minute, not three.
#
# Inputs (environment; defaults in setup/ and tests/env/defaults.env): BENCHSTACK_TEST_STATE (the cache),
# BENCHSTACK_HARBOR_PYTHON (the Python >= 3.12 copied in). Prints the image name.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=setup/lib.sh
source "$HERE/../../../setup/lib.sh"
load_defaults "$ROOT/tests/env/defaults.env"

SUITE=bookworm
IMAGE=benchstack/test-host:$SUITE
CACHE=$BENCHSTACK_TEST_STATE/hosts
BOOT=$HERE/boot.sh
COMPOSE=/usr/local/lib/docker/cli-plugins/docker-compose
# The seed's "Install the basic tools", Docker, and what a server has to be reached and
# administered: sshd, sudo, ip, ps.
PACKAGES=(ca-certificates curl git jq python3 python3-venv skopeo socat tmux docker.io
  openssh-server sudo iproute2 procps iptables)
# The upstream proxy as every host sees it (on its own loopback: hosts.sh forwards it there).
HOST_PROXY=http://127.0.0.1:27890
# The certificate authorities this machine trusts, which the hosts trust as well.
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

log() { printf '[hosts-build] %s\n' "$*" >&2; }
die() { printf 'hosts build: %s\n' "$*" >&2; exit 1; }
scratch=()
cleanup() {
  local dir
  for dir in "${scratch[@]}"; do
    # Never remove a tree with /proc still mounted in it.
    if mountpoint -q "$dir/proc" 2>/dev/null; then umount "$dir/proc" || return; fi
    rm -rf "$dir"
  done
}
trap cleanup EXIT

python=$(readlink -f "$(command -v "$BENCHSTACK_HARBOR_PYTHON")") \
  || die "no Python at $BENCHSTACK_HARBOR_PYTHON (BENCHSTACK_HARBOR_PYTHON)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 12))' \
  || die "$python is older than 3.12: Harbor needs >= 3.12 (BENCHSTACK_HARBOR_PYTHON)"
python_home=$(dirname "$(dirname "$python")")
python_version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
python_short=${python_version%.*}
[[ -x "$COMPOSE" ]] || die "no Compose v2 plugin at $COMPOSE: run setup/dev.sh --peers"

# One build at a time (tests/run.sh builds in the background while a test may start the hosts).
mkdir -p "$CACHE"
exec 9>"$CACHE/build.lock"
flock 9

base_hash=$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-12)
want=$( { cat "${BASH_SOURCE[0]}" "$BOOT" "$CA_BUNDLE"; echo "$python $python_version"; sha256sum <"$COMPOSE"; } \
  | sha256sum | cut -c1-16)
have=$(docker image inspect -f '{{index .Config.Labels "benchstack.inputs"}}' "$IMAGE" 2>/dev/null || true)
if [[ "$have" == "$want" ]]; then
  echo "$IMAGE"
  exit 0
fi
start=$SECONDS
mkdir -p "$CACHE"

# --- the root filesystem: debootstrap, once per package list -------------------------------
base_tar=$CACHE/rootfs-$SUITE-$base_hash.tar
if [[ ! -s "$base_tar" ]]; then
  log "debootstrap $SUITE with ${PACKAGES[*]} (once per package list)"
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX"); scratch+=("$rootfs")
  timeout 900 debootstrap --variant=minbase "$SUITE" "$rootfs" "$(debian_mirror)" \
    >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed; see $CACHE/debootstrap.log"
  # The packages with apt inside the root (debootstrap's --include cannot configure docker.io's
  # and skopeo's dependencies in its first pass), starting no service there.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  mount -t proc proc "$rootfs/proc"
  installed=0
  { chroot "$rootfs" apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 1500 chroot "$rootfs" \
      apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}"; } >>"$CACHE/debootstrap.log" 2>&1 \
    || installed=$?
  umount "$rootfs/proc"
  ((installed == 0)) || die "apt-get install in the host root failed; see $CACHE/debootstrap.log"
  chroot "$rootfs" apt-get clean
  rm -f "$rootfs/usr/sbin/policy-rc.d" "$rootfs/etc/resolv.conf"
  rm -rf "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" --exclude='./var/cache/apt/archives/*.deb' --exclude=./usr/share/doc \
    --exclude=./usr/share/man --exclude=./usr/share/locale -c . >"$base_tar.tmp"
  mv "$base_tar.tmp" "$base_tar"
  rm -f "$CACHE"/rootfs-"$SUITE"-*.tar.tmp
  find "$CACHE" -maxdepth 1 -name "rootfs-$SUITE-*.tar" ! -name "$(basename "$base_tar")" -delete
fi

# --- the host: user, sudo, Python, compose, pip's proxy, the boot script -------------------
log "building $IMAGE (inputs $want)"
rootfs=$(mktemp -d "$CACHE/image.XXXXXX"); scratch+=("$rootfs")
tar -C "$rootfs" -xf "$base_tar"
chroot "$rootfs" useradd --create-home --uid 1000 --user-group --shell /bin/bash --groups docker,sudo bench
# No password, and not locked ("!"): sshd without PAM refuses a locked account even with a key.
chroot "$rootfs" usermod -p '*' bench
printf 'bench ALL=(ALL) NOPASSWD:ALL\n' >"$rootfs/etc/sudoers.d/bench"
chmod 440 "$rootfs/etc/sudoers.d/bench"
# The Python: this machine's, installed under /usr/local as `make altinstall` does (its interpreter
# as python3.13 beside Debian's python3, its standard library, its libpython), so a venv of it
# finds its prefix by its landmarks; ld.so finds libpython there (its rpath names where it was
# built).
cp -a "$python_home/lib/." "$rootfs/usr/local/lib/"
install -m 755 "$python_home/bin/python$python_short" "$rootfs/usr/local/bin/python$python_short"
chroot "$rootfs" ldconfig
chroot "$rootfs" "/usr/local/bin/python$python_short" -c 'import ssl, sqlite3, venv, ensurepip' \
  || die "the copied Python $python_version does not run in the host image"
if ! { chroot "$rootfs" "/usr/local/bin/python$python_short" -m venv /tmp/venv-check \
  && chroot "$rootfs" /tmp/venv-check/bin/python -m pip --version >/dev/null; }; then
  die "a venv of the copied Python $python_version has no working pip"
fi
rm -rf "$rootfs/tmp/venv-check"
install -D -m 755 "$COMPOSE" "$rootfs$COMPOSE"
# pip on the host goes out through the upstream proxy, as a server behind one does, trusting
# what this machine trusts (its network may re-sign TLS with a CA of its own).
install -m 644 "$CA_BUNDLE" "$rootfs$CA_BUNDLE"
printf '[global]\nproxy = %s\ncert = %s\ndisable-pip-version-check = true\n' "$HOST_PROXY" "$CA_BUNDLE" \
  >"$rootfs/etc/pip.conf"
# Host keys are made at each boot (each host has its own); none is baked into the image.
rm -f "$rootfs"/etc/ssh/ssh_host_*
printf 'PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\n' \
  >"$rootfs/etc/ssh/sshd_config.d/benchstack.conf"
install -m 755 "$BOOT" "$rootfs/usr/local/sbin/benchstack-host-boot"
# Docker starts from its init script (no systemd on these hosts), as `service docker restart`
# restarts it. That script raises its limits above this machine's hard ones, which a container
# here may not (no CAP_SYS_RESOURCE): it keeps the hard limit instead of failing.
# shellcheck disable=SC2016  # sed writes shell text into the init script: no expansion here
sed -i -e 's/^\(\t*\)ulimit -n 1048576$/\1ulimit -n 1048576 2>\/dev\/null || ulimit -n "$(ulimit -H -n)"/' \
  -e 's/^\(\t*\)ulimit -\([pu]\) unlimited$/\1ulimit -\2 unlimited 2>\/dev\/null || true/' "$rootfs/etc/init.d/docker"
[[ $(grep -c -e '|| ulimit -n' -e 'unlimited 2>/dev/null || true' "$rootfs/etc/init.d/docker") == 3 ]] \
  || die "the docker init script's ulimit lines are not where this script expects them"
docker rmi "$IMAGE" >/dev/null 2>&1 || true
tar -C "$rootfs" -c . | docker import \
  --change "LABEL benchstack.inputs=$want" \
  --change 'CMD ["/usr/local/sbin/benchstack-host-boot"]' - "$IMAGE" >/dev/null \
  || die "docker import of the host image failed"
log "built $IMAGE in $((SECONDS - start)) s"
echo "$IMAGE"
