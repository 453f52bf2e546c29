#!/usr/bin/env bash
# image_set.sh: make every task image of the manifest present locally as linux/amd64, and the
# egress-control sidecar of Harbor's no-network tasks, reporting each image's digest.
#
# The work is components/image_pull.py, from the host code the seam copied ($BENCHSTACK_CODE),
# run with this host's python3 (3.9+, standard library only). Its docstring lists the
# inputs (environment: IMAGES, MIRROR, CONCURRENCY, RETRIES, BACKOFF_SECONDS, PULL_TIMEOUT,
# REGISTRY_USERNAME, REGISTRY_PASSWORD, TLS_VERIFY, PIN_DIGESTS, SCRATCH_DIR, STATE_DIR,
# NO_NETWORK_TASKS, REQUIRE_SIDECAR, SIDECAR_IMAGE, HARBOR_PYTHON, SIDECAR_CONTEXT) and the
# output (last stdout line, JSON: ready, total, pulled, present, digests, repo_digests,
# sidecar, pinned). Tools on the host: docker, skopeo, python3.
#
# The password leaves this shell on a descriptor of the program (REGISTRY_PASSWORD_FD), not in
# its environment or arguments; the program writes it to a private authfile for skopeo.
set -euo pipefail

die() { printf 'image_set: %s\n' "$*" >&2; exit 1; }

: "${BENCHSTACK_CODE:?BENCHSTACK_CODE is empty: run this through the host seam, which ships the host code}"
command -v python3 >/dev/null || die "python3 not found on this host: install it (Debian package: python3)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
  || die "python3 on this host is $(python3 -V 2>&1), older than 3.9: install a newer python3"

password=${REGISTRY_PASSWORD:-}
unset REGISTRY_PASSWORD
export REGISTRY_PASSWORD_FD=3
exec python3 "$BENCHSTACK_CODE/image_pull.py" 3<<<"$password"
