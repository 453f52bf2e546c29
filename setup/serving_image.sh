#!/usr/bin/env bash
# Builds the stand-in SGLang serving image (the local rehearsal and the tests only, never the
# product: the stand-in for a GPU server itself is demo/gpu_standin/, packed in as data) and
# pushes it to the loopback registry the local stack pulls from, as
# $BENCHSTACK_REGISTRY/benchstack/sglang-standin:<sglang-router version> (the tag it always had).
#
# In it: a Debian bookworm minbase rootfs with python3 (3.11); both gateways a Router can run,
# the real sglang-router 0.3.2 and smg 1.13.0 (router.implementation), with their dependencies,
# installed on this host by a Python 3.11 and copied in (nothing is fetched at build time); the
# stand-in worker and the SGLang startup it replays at /opt/benchstack-standin/; the `sglang`
# shim on PATH. So the SGLangWorker's `sglang serve ...` and the Router's `python3 -m smg
# launch ...` or `python3 -m sglang_router.launch_router ...` all run in it, as uid 1000:1000
# (everything world-readable).
#
# Idempotent, cached by the hash of its inputs (this script, with the versions in it; the
# stand-in and the startup it replays; the shim): the image carries the hash as a label and the
# stamp file keeps it, so a second run with the same inputs only reads the registry's label. The rootfs tarball and the
# router's packages are cached per machine under $BENCHSTACK_STATE/sglang-standin.
#
# Inputs (environment; defaults in setup/defaults.env): BENCHSTACK_STATE (the cache's parent),
# BENCHSTACK_REGISTRY (the registry to push to), BENCHSTACK_PYTHON (a Python 3.11 for pip:
# bookworm's python3).
set -euo pipefail

ROUTER_VERSION=0.3.2
SMG_VERSION=1.13.0
SUITE=bookworm
IMAGE=benchstack/sglang-standin:$ROUTER_VERSION
BASE=benchstack/sglang-standin-base:$SUITE

# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
load_defaults
STATE=$BENCHSTACK_STATE
REGISTRY=$BENCHSTACK_REGISTRY
PYTHON=$BENCHSTACK_PYTHON
CACHE=$STATE/sglang-standin
STANDIN=$ROOT/demo/gpu_standin/sglang_worker.py
STARTUP=$ROOT/demo/gpu_standin/sglang_startup.json
SHIM=$ROOT/demo/gpu_standin/sglang
REMOTE=$REGISTRY/$IMAGE

log() { printf '[serving_image] %s\n' "$*" >&2; }
die() { printf 'serving_image: %s\n' "$*" >&2; exit 1; }
scratch=()
cleanup() { ((${#scratch[@]} == 0)) || rm -rf "${scratch[@]}"; }
trap cleanup EXIT

want=$(cat "${BASH_SOURCE[0]}" "$STANDIN" "$STARTUP" "$SHIM" | sha256sum | cut -c1-16)
label_of() { docker image inspect -f '{{index .Config.Labels "benchstack.inputs"}}' "$1" 2>/dev/null || true; }
pushed=$(skopeo inspect --tls-verify=false "docker://$REMOTE" 2>/dev/null \
  | jq -r '.Labels["benchstack.inputs"] // empty' || true)
if [[ "$(cat "$CACHE/stamp" 2>/dev/null)" == "$want" && "$pushed" == "$want" ]]; then
  exit 0
fi
mkdir -p "$CACHE"

previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [[ "$(label_of "$IMAGE")" != "$want" ]]; then
  log "building $IMAGE (inputs $want): bookworm + python3, sglang-router $ROUTER_VERSION, smg $SMG_VERSION, the stand-in"

  # --- the rootfs: debootstrap minbase with python3, once per machine ---------------------
  rootfs_tar=$CACHE/$SUITE-minbase-python3.tar
  if [[ ! -s "$rootfs_tar" ]]; then
    mirror=$(debian_mirror)
    rootfs=$(mktemp -d); scratch+=("$rootfs")
    timeout 1200 debootstrap --variant=minbase --include=python3 "$SUITE" "$rootfs" "$mirror" \
      >"$CACHE/debootstrap.log" 2>&1 || die "debootstrap failed; see $CACHE/debootstrap.log"
    # The downloaded packages and the docs are no part of the image.
    tar -C "$rootfs" --exclude='./var/cache/apt/archives/*.deb' --exclude=./usr/share/doc \
      --exclude=./usr/share/man --exclude=./usr/share/locale -c . >"$rootfs_tar.tmp"
    mv "$rootfs_tar.tmp" "$rootfs_tar"
  fi
  if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    docker import "$rootfs_tar" "$BASE" >/dev/null || die "docker import $rootfs_tar failed"
  fi

  # --- both gateways and their dependencies for bookworm's Python 3.11, once per version pair -
  site=$CACHE/gateways-router$ROUTER_VERSION-smg$SMG_VERSION-py311
  if [[ ! -f "$site/.complete" ]]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
      || die "$PYTHON is not a Python 3.11 (bookworm's python3 is 3.11): set BENCHSTACK_PYTHON"
    rm -rf "$site"
    timeout 900 "$PYTHON" -m pip install -q --no-compile --only-binary=:all: --target "$site/lib" \
      "sglang-router==$ROUTER_VERSION" "smg==$SMG_VERSION" >"$CACHE/pip.log" 2>&1 \
      || die "pip install sglang-router==$ROUTER_VERSION smg==$SMG_VERSION failed; see $CACHE/pip.log"
    rm -rf "$site/lib/bin"  # console scripts with this host's interpreter in their shebang
    "$PYTHON" -m pip list --format=freeze --path "$site/lib" >"$site/freeze.txt" 2>/dev/null
    touch "$site/.complete"
  fi

  # --- the image: its packages first (they change least), then the stand-in and the shim ----
  ctx=$(mktemp -d); scratch+=("$ctx")
  cp -a "$site/lib" "$ctx/site"
  cp "$site/freeze.txt" "$ctx/router-freeze.txt"
  cp "$STANDIN" "$ctx/sglang_worker.py"
  cp "$STARTUP" "$ctx/sglang_startup.json"
  cp "$SHIM" "$ctx/sglang"
  chmod -R a+rX,go-w "$ctx"
  chmod 755 "$ctx/sglang"
  cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM $BASE
COPY site /opt/benchstack-standin/site
COPY router-freeze.txt /opt/benchstack-standin/
# Bytecode at build time: uid 1000 cannot write __pycache__ under /opt when it runs.
RUN python3 -m compileall -q /opt/benchstack-standin/site
COPY sglang_worker.py sglang_startup.json /opt/benchstack-standin/
COPY sglang /usr/local/bin/sglang
ENV PYTHONPATH=/opt/benchstack-standin/site PYTHONDONTWRITEBYTECODE=1
LABEL benchstack.inputs=$want sglang-router.version=$ROUTER_VERSION smg.version=$SMG_VERSION
DOCKERFILE
  # The classic builder (no buildx here); no network: everything is in the context.
  DOCKER_BUILDKIT=0 timeout 900 docker build --network none -t "$IMAGE" "$ctx" \
    >"$CACHE/build.log" 2>&1 || die "docker build $IMAGE failed; see $CACHE/build.log"
  docker run --rm --network none --user 1000:1000 -e HOME=/tmp "$IMAGE" bash -c '
    python3 -c "import sys; sys.exit(sys.version_info[:2] != (3, 11))" &&
    python3 -m sglang_router.launch_router --help >/dev/null &&
    python3 -m smg launch --help >/dev/null && sglang serve --help >/dev/null' \
    >"$CACHE/smoke.log" 2>&1 \
    || die "$IMAGE does not run both gateways and the sglang shim as uid 1000; see $CACHE/smoke.log"
fi

if [[ "$pushed" != "$want" ]]; then
  log "pushing $REMOTE"
  docker tag "$IMAGE" "$REMOTE"
  timeout 600 docker push -q "$REMOTE" >/dev/null || die "docker push $REMOTE failed"
fi
echo "$want" >"$CACHE/stamp"
# The image this run replaced has no tag left: remove it (kept if a container still uses it).
current=$(docker image inspect -f '{{.Id}}' "$IMAGE")
if [[ -n "$previous" && "$previous" != "$current" ]]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
