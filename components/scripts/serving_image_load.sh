#!/usr/bin/env bash
# Loads the SGLang image from an archive on this host (the seed's skopeo route for hosts whose
# Docker daemon cannot pull) and proves it is amd64. Idempotent: an image already loaded under
# IMAGE with the archive's config digest is not loaded again.
#
# Inputs (environment):
#   IMAGE_ARCHIVE   path of a `docker save` / `skopeo copy docker-archive:` tar on this host (required)
#   IMAGE           the name:tag the archive holds, as in the config (required)
#   DOCKER          the docker CLI (default: docker)
# Output: {"image", "image_id", "architecture", "loaded"} on the last stdout line.
set -euo pipefail

die() { printf 'serving_image_load: %s\n' "$*" >&2; exit 1; }
DOCKER=${DOCKER:-docker}
[[ -n "${IMAGE_ARCHIVE:-}" ]] || die "IMAGE_ARCHIVE is empty: set serving.image_archive"
[[ -n "${IMAGE:-}" ]] || die "IMAGE is empty: set serving.image to the name:tag inside the archive"
[[ -s "$IMAGE_ARCHIVE" ]] || die "image archive $IMAGE_ARCHIVE not found (or empty) on $(hostname): copy it there or fix serving.image_archive"

# The archive's image config digest is the image id docker load will give it.
want=$(tar -xOf "$IMAGE_ARCHIVE" manifest.json 2>/dev/null \
  | python3 -c 'import json,sys; m=json.load(sys.stdin); print(m[0]["Config"].split("/")[-1].removesuffix(".json"))' 2>/dev/null) \
  || die "$IMAGE_ARCHIVE has no readable manifest.json: is it a docker-archive tar?"
have=$("$DOCKER" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
loaded=false
if [[ "${have#sha256:}" != "${want#sha256:}" ]]; then
  printf '[serving_image_load] docker load -i %s\n' "$IMAGE_ARCHIVE" >&2
  "$DOCKER" load -i "$IMAGE_ARCHIVE" >&2 || die "docker load -i $IMAGE_ARCHIVE failed"
  loaded=true
fi
id=$("$DOCKER" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null) \
  || die "$IMAGE_ARCHIVE does not hold $IMAGE: set serving.image to the tag it holds"
[[ "${id#sha256:}" == "${want#sha256:}" ]] \
  || die "$IMAGE is $id after loading, not the archive's sha256:${want#sha256:}: set serving.image to the tag the archive holds"
arch=$("$DOCKER" image inspect --format '{{.Architecture}}' "$IMAGE")
if [[ "$arch" != amd64 && "$loaded" == true ]]; then
  # Leave the host as it was found: the wrong image must not stay under the configured tag.
  "$DOCKER" rmi "$IMAGE" >/dev/null 2>&1 || true
fi
[[ "$arch" == amd64 ]] || die "$IMAGE from $IMAGE_ARCHIVE is $arch, not amd64: fetch it with skopeo --override-arch amd64"
printf '{"image": "%s", "image_id": "%s", "architecture": "%s", "loaded": %s}\n' \
  "$IMAGE" "$id" "$arch" "$loaded"
