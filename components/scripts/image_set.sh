# image_set.sh: make every task image of the manifest present locally as linux/amd64.
#
# Inputs (environment; defaults in brackets):
#   IMAGES              newline-separated image references, e.g. alexgshaw/fix-git:20260403 [required]
#   MIRROR              registry host[:port][/prefix] serving Docker Hub images: pull MIRROR/repo:tag,
#                       tag locally as repo:tag. Images naming another registry are pulled as is. [none]
#   CONCURRENCY         images pulled at the same time [4]
#   RETRIES             retries per image after its first attempt, then it is reported as failed [4]
#   BACKOFF_SECONDS     wait after the first failed attempt; doubles per attempt, at most 60 s [5]
#   PULL_TIMEOUT        seconds allowed for one attempt (manifest read + copy) [1800]
#   REGISTRY_USERNAME   user for the registry pulled from (MIRROR, else Docker Hub) [none]
#   REGISTRY_PASSWORD   its password or token: written only to a private authfile, never printed [none]
#   TLS_VERIFY          true|false|auto; auto = false for localhost/127.x (plain HTTP, as Docker
#                       treats loopback registries) and true otherwise [auto]
#   PIN_DIGESTS         1: also output `pinned` (image -> repo@sha256:...), asking the registry
#                       only for images whose digest was never recorded here [0]
#   SCRATCH_DIR         private work dir (manifests, skopeo's temp files, the authfile); on a
#                       disk rather than a small tmpfs [${TMPDIR:-/var/tmp}]
#   STATE_DIR           where registry digests of pulled images are kept between runs
#                       [${XDG_STATE_HOME:-$HOME/.local/state}/benchstack/image-set]
#   NO_NETWORK_TASKS    newline-separated tasks whose network policy is not public: Harbor 0.21.0
#                       runs them behind its egress-control sidecar image [none]
#   REQUIRE_SIDECAR     1: fail before pulling anything when the sidecar can neither be found nor
#                       built here (naming those tasks); 0: only warn [1]
#   SIDECAR_IMAGE       the sidecar tag Harbor looks up (Harbor 0.21.0, linux/amd64)
#                       [harbor-prebuilt:harbor-docker-egress-control-sidecar--b1e6760734a9e6f6]
#   HARBOR_PYTHON       python of the Harbor venv on this host: when set, the sidecar tag is derived
#                       by Harbor's own code; a missing sidecar is then built by Harbor (with docker
#                       buildx) or, without buildx, assembled here from Harbor's build context,
#                       its digest-pinned gost base fetched like the task images (mirror too) [none]
#   SIDECAR_CONTEXT     the sidecar's build context directory [Harbor's, when HARBOR_PYTHON is set]
#
# Why skopeo (as the seed) and not `docker pull`: skopeo takes the mirror, the credentials (a
# private authfile) and the proxy (HTTPS_PROXY of this script) per call, without touching the
# daemon's config or ~/.docker; --override-arch fetches the amd64 member of a multi-arch index
# whatever this host is; and the manifest is read first, so the registry digest we record is
# the one we copied (copy by digest). Unlike the seed it streams into the engine
# (docker-daemon:) instead of writing a docker-archive and loading it: one disk pass, not three
# (measured here: 0.9 s against 2.8 s for a 200 MB image).
#
# Digests: `digests` holds each image's local image ID (the sha256 of its config). It is known
# for every present image without asking any registry, is identical whichever mirror served the
# image, and is what the engine runs. `repo_digests` holds the registry manifest digest, which
# `docker load` forgets: it is recorded in STATE_DIR when this script pulls the image.
#
# Output (last stdout line, JSON): {"ready", "total", "pulled", "present", "digests",
#   "repo_digests", "pinned" (PIN_DIGESTS=1 only), "sidecar": {"status", "image"}}
#   sidecar.status: not-needed | present | built | assembled | build-at-launch | missing
set -euo pipefail

IMAGES=${IMAGES:-}
MIRROR=${MIRROR:-}
CONCURRENCY=${CONCURRENCY:-4}
RETRIES=${RETRIES:-4}
BACKOFF_SECONDS=${BACKOFF_SECONDS:-5}
PULL_TIMEOUT=${PULL_TIMEOUT:-1800}
REGISTRY_USERNAME=${REGISTRY_USERNAME:-}
REGISTRY_PASSWORD=${REGISTRY_PASSWORD:-}
TLS_VERIFY=${TLS_VERIFY:-auto}
PIN_DIGESTS=${PIN_DIGESTS:-0}
STATE_DIR=${STATE_DIR:-${XDG_STATE_HOME:-${HOME:-/var/tmp}/.local/state}/benchstack/image-set}
NO_NETWORK_TASKS=${NO_NETWORK_TASKS:-}
REQUIRE_SIDECAR=${REQUIRE_SIDECAR:-1}
SIDECAR_IMAGE=${SIDECAR_IMAGE:-harbor-prebuilt:harbor-docker-egress-control-sidecar--b1e6760734a9e6f6}
HARBOR_PYTHON=${HARBOR_PYTHON:-}
SCRATCH_DIR=${SCRATCH_DIR:-${TMPDIR:-/var/tmp}}

log() { printf '[image_set] %s\n' "$*" >&2; }
die() { printf 'image_set: %s\n' "$*" >&2; exit 1; }

is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
is_uint "$CONCURRENCY" && ((CONCURRENCY >= 1)) || die "CONCURRENCY=$CONCURRENCY: set a whole number >= 1"
is_uint "$RETRIES" || die "RETRIES=$RETRIES: set a whole number >= 0"
attempts=$((RETRIES + 1))
is_uint "$BACKOFF_SECONDS" || die "BACKOFF_SECONDS=$BACKOFF_SECONDS: set a whole number of seconds"
is_uint "$PULL_TIMEOUT" && ((PULL_TIMEOUT >= 1)) || die "PULL_TIMEOUT=$PULL_TIMEOUT: set seconds >= 1"
[[ "$PIN_DIGESTS" == 0 || "$PIN_DIGESTS" == 1 ]] || die "PIN_DIGESTS=$PIN_DIGESTS: set 0 or 1"
[[ "$REQUIRE_SIDECAR" == 0 || "$REQUIRE_SIDECAR" == 1 ]] || die "REQUIRE_SIDECAR=$REQUIRE_SIDECAR: set 0 or 1"
[[ "$TLS_VERIFY" =~ ^(auto|true|false)$ ]] || die "TLS_VERIFY=$TLS_VERIFY: set auto, true or false"
[[ -n "$REGISTRY_USERNAME" && -z "$REGISTRY_PASSWORD" ]] && die "REGISTRY_USERNAME is set but REGISTRY_PASSWORD is empty: set both or neither"
[[ -z "$REGISTRY_USERNAME" && -n "$REGISTRY_PASSWORD" ]] && die "REGISTRY_PASSWORD is set but REGISTRY_USERNAME is empty: set both or neither"
for tool in docker skopeo jq tar timeout sha256sum; do
  command -v "$tool" >/dev/null || die "$tool not found on this host: install it (Debian package: ${tool/sha256sum/coreutils})"
done
docker info >/dev/null 2>&1 || die "the Docker engine does not answer on this host: start dockerd"

mapfile -t images < <(printf '%s\n' "$IMAGES" | sed 's/[[:space:]]//g' | grep -v '^$' | sort -u)
((${#images[@]})) || die "IMAGES is empty: pass the manifest's images, one per line"
for image in "${images[@]}"; do
  [[ "$image" != *@* ]] || die "image $image is pinned by digest in the dataset: use its tag (pinning is PIN_DIGESTS=1)"
done
mapfile -t offline_tasks < <(printf '%s\n' "$NO_NETWORK_TASKS" | sed 's/[[:space:]]//g' | grep -v '^$' | sort -u)

mkdir -p "$SCRATCH_DIR" || die "SCRATCH_DIR=$SCRATCH_DIR cannot be created: point it at a writable disk"
work=$(mktemp -d "$SCRATCH_DIR/image_set.XXXXXX") || die "SCRATCH_DIR=$SCRATCH_DIR is not writable"
chmod 700 "$work"
cleanup() {
  local pids
  pids=$(jobs -pr)
  [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT

# --- image name handling: Docker Hub names get the mirror, the local tag is the normal form ---
# prints "<registry>\t<repository path>\t<tag>"; registry "docker.io" means Docker Hub
split_ref() {
  local ref=$1 first rest registry path tag
  first=${ref%%/*}
  if [[ "$ref" == */* && ( "$first" == *.* || "$first" == *:* || "$first" == localhost ) ]]; then
    registry=$first; rest=${ref#*/}
  else
    registry=docker.io; rest=$ref
  fi
  [[ "$registry" == index.docker.io ]] && registry=docker.io
  if [[ "${rest##*/}" == *:* ]]; then tag=${rest##*:}; path=${rest%:*}; else tag=latest; path=$rest; fi
  [[ "$registry" == docker.io && "$path" != */* ]] && path=library/$path
  printf '%s\t%s\t%s\n' "$registry" "$path" "$tag"
}

# the name `docker images` shows for a reference (docker.io/ and library/ dropped, :latest added)
local_name() {
  local registry path tag
  IFS=$'\t' read -r registry path tag < <(split_ref "$1")
  if [[ "$registry" == docker.io ]]; then
    path=${path#library/}
    printf '%s:%s\n' "$path" "$tag"
  else
    printf '%s/%s:%s\n' "$registry" "$path" "$tag"
  fi
}

# where the image is fetched from, without the tag: "host[/prefix]/path"
source_repo() {
  local registry path tag
  IFS=$'\t' read -r registry path tag < <(split_ref "$1")
  if [[ "$registry" == docker.io && -n "$MIRROR" ]]; then
    printf '%s/%s\n' "${MIRROR%/}" "$path"
  else
    printf '%s/%s\n' "$registry" "$path"
  fi
}

tls_flag() {  # $1 = source host; prints the skopeo TLS flag for it
  local host=${1%%/*} verify=$TLS_VERIFY
  if [[ "$verify" == auto ]]; then
    verify=true
    [[ "$host" == localhost || "$host" == localhost:* || "$host" == 127.* ]] && verify=false
  fi
  printf -- '--tls-verify=%s\n' "$verify"
}

# --- credentials: a private authfile for the registry we pull from, never on a command line ----
skopeo_auth=()
if [[ -n "$REGISTRY_USERNAME" ]]; then
  auth_host=docker.io
  [[ -n "$MIRROR" ]] && auth_host=${MIRROR%%/*}
  authfile="$work/auth.json"
  # printf is a builtin: the secret never appears in a process's argv (ps); base64 reads stdin.
  auth_b64=$(printf '%s:%s' "$REGISTRY_USERNAME" "$REGISTRY_PASSWORD" | base64 -w0)
  (umask 077; printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$auth_host" "$auth_b64" >"$authfile")
  unset auth_b64
  skopeo_auth=(--authfile "$authfile")
fi
# Children (skopeo, docker) need only the authfile, not the secret in their environment.
unset REGISTRY_PASSWORD

# --- fetching: one image into the engine, with retries and backoff ----------------------------
# fetch_image LABEL SRC_REPO TAG PINNED_DIGEST LOCAL_NAME DIR: on success the image is in the
# engine as LOCAL_NAME and DIR/digest holds the registry manifest digest (read first, then
# copied by digest, so it is the one we got); on failure DIR/reason holds one line and it
# returns 1. An empty PINNED_DIGEST reads the tag. skopeo streams straight into the engine
# (docker-daemon:): a loaded image only appears complete, so a cut stream leaves nothing.
fetch_image() {
  local label=$1 src=$2 tag=$3 digest=$4 local_ref=$5 dir=$6 tls attempt=1 wait_s err ref
  tls=$(tls_flag "$src")
  mkdir -p "$dir"
  while :; do
    rm -f -- "$dir/manifest.raw"
    if [[ -n "$4" ]] || { timeout "$PULL_TIMEOUT" skopeo inspect --raw "$tls" "${skopeo_auth[@]}" \
           --retry-times 0 "docker://$src:$tag" >"$dir/manifest.raw" 2>"$dir/err" \
         && digest="sha256:$(sha256sum "$dir/manifest.raw" | cut -d' ' -f1)"; }; then
      if TMPDIR="$dir" timeout "$PULL_TIMEOUT" skopeo copy -q "--src-${tls#--}" "${skopeo_auth[@]}" \
           --retry-times 0 --override-os linux --override-arch amd64 \
           "docker://$src@$digest" "docker-daemon:$local_ref" >/dev/null 2>"$dir/err"; then
        printf '%s\n' "$digest" >"$dir/digest"
        return 0
      fi
    fi
    err=$(grep -v '^[[:space:]]*$' "$dir/err" | tail -n1 | cut -c1-300)
    [[ -n "$err" ]] || err="timed out after ${PULL_TIMEOUT}s"
    if ((attempt >= attempts)); then
      ref="$src:$tag"
      [[ -z "$4" ]] || ref="$src@$4"
      printf 'could not fetch %s after %d attempts: %s\n' "$ref" "$attempt" "$err" >"$dir/reason"
      return 1
    fi
    wait_s=$((BACKOFF_SECONDS * (1 << (attempt - 1))))
    ((wait_s > 60)) && wait_s=60
    log "retry $label: attempt $attempt/$attempts failed ($err); next in ${wait_s}s"
    sleep "$wait_s"
    attempt=$((attempt + 1))
  done
}

# --- the egress-control sidecar: checked first, so a host that cannot run the offline tasks ----
# --- fails in minutes, not after hours of pulling --------------------------------------------
# Without buildx, the sidecar is assembled from Harbor's own build context: its Dockerfile is
# only FROM (digest-pinned gost) + COPY [--chmod], which `docker create` + `docker cp` +
# `docker commit` reproduce; Harbor looks the image up by tag only. Any other instruction (a
# future Harbor) is refused rather than guessed.
assemble_sidecar() {
  local dockerfile="$SIDECAR_CONTEXT/Dockerfile" stage="$work/sidecar-stage" base="" line op rest
  local word mode dest srcs src target ref repo_tag digest dir id arch ctr cmd=()
  [[ -f "$dockerfile" ]] || die "SIDECAR_CONTEXT=$SIDECAR_CONTEXT has no Dockerfile: point it at Harbor's harbor-docker-egress-control-sidecar directory"
  mkdir -p "$stage" && chmod 755 "$stage" || die "cannot create $stage"
  while IFS= read -r line || [[ -n "$line" ]]; do
    [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
    [[ "$line" != *\\ ]] || die "$dockerfile: line continuations cannot be assembled without docker buildx: install buildx"
    read -r op rest <<<"$line"
    case "${op^^}" in
      FROM)
        [[ -z "$base" && "$rest" != *" "* && "$rest" != --* ]] || die "$dockerfile: 'FROM $rest' cannot be assembled without docker buildx: install buildx"
        base=$rest ;;
      COPY)
        [[ -n "$base" ]] || die "$dockerfile: COPY before FROM"
        mode=""
        read -r -a srcs <<<"$rest"
        while [[ "${srcs[0]:-}" == --* ]]; do
          word=${srcs[0]}
          [[ "$word" =~ ^--chmod=([0-7]{3,4})$ ]] || die "$dockerfile: 'COPY $word' cannot be assembled without docker buildx: install buildx"
          mode=${BASH_REMATCH[1]}
          srcs=("${srcs[@]:1}")
        done
        ((${#srcs[@]} >= 2)) || die "$dockerfile: 'COPY $rest' names no source"
        dest=${srcs[-1]}
        unset 'srcs[-1]'
        for src in "${srcs[@]}"; do
          [[ -f "$SIDECAR_CONTEXT/$src" && "$src" != *..* ]] || die "$dockerfile: COPY source $src is not a file of $SIDECAR_CONTEXT"
          target="$stage$dest"
          [[ "$dest" == */ || ${#srcs[@]} -gt 1 ]] && target="$stage${dest%/}/$(basename "$src")"
          # (`if (assemble_sidecar)` turns set -e off in here: every step checks itself)
          mkdir -p "$(dirname "$target")" && cp -p "$SIDECAR_CONTEXT/$src" "$target" \
            && { [[ -z "$mode" ]] || chmod "$mode" "$target"; } || die "staging $src for the sidecar failed"
        done ;;
      *) die "$dockerfile: instruction $op cannot be assembled without docker buildx: install buildx" ;;
    esac
  done <"$dockerfile"
  [[ -n "$base" ]] || die "$dockerfile has no FROM"
  find "$stage" -type d -exec chmod 755 {} + || die "cannot set modes in $stage"
  ref=${base%@*}
  digest=""
  [[ "$base" == *@sha256:* ]] && digest=${base#*@}
  repo_tag=$(local_name "$ref")
  log "assembling egress sidecar $SIDECAR_IMAGE from $base (no buildx here)"
  dir="$work/scratch/sidecar-base"
  fetch_image "sidecar base $ref" "$(source_repo "$ref")" "${repo_tag##*:}" "$digest" "$repo_tag" "$dir" \
    || die "egress sidecar base: $(cat "$dir/reason"); pre-load $SIDECAR_IMAGE, or serve $ref from MIRROR"
  rm -rf -- "$dir"
  id=$(docker image inspect --format '{{.Id}}' "$repo_tag") || die "the sidecar base $base is not in the engine after its copy"
  arch=$(docker image inspect --format '{{.Os}}/{{.Architecture}}' "$id")
  [[ "$arch" == linux/amd64 ]] || die "egress sidecar base $base is $arch, not linux/amd64"
  # create refuses an image with neither entrypoint nor command; compose sets the entrypoint.
  [[ "$(docker image inspect --format '{{json .Config.Entrypoint}}{{json .Config.Cmd}}' "$id")" == nullnull ]] && cmd=(true)
  ctr=$(docker create "$id" "${cmd[@]}") || die "docker create from the sidecar base $base failed"
  if ! docker cp "$stage/." "$ctr:/" >&2 \
     || ! docker commit --change "LABEL io.benchstack.sidecar.base=$base" "$ctr" "$SIDECAR_IMAGE" >/dev/null; then
    docker rm -f "$ctr" >/dev/null 2>&1 || true
    die "assembling the egress sidecar $SIDECAR_IMAGE failed (docker cp/commit): see the lines above"
  fi
  docker rm -f "$ctr" >/dev/null || true
}

SIDECAR_CONTEXT=${SIDECAR_CONTEXT:-}
sidecar_status=not-needed
if ((${#offline_tasks[@]})); then
  if [[ -n "$HARBOR_PYTHON" ]]; then
    [[ -x "$HARBOR_PYTHON" ]] || die "HARBOR_PYTHON=$HARBOR_PYTHON is not an executable: point it at the Harbor venv's python or leave it empty"
    # Harbor names the sidecar by a hash of its build context and the engine's platform;
    # asking Harbor's own code keeps the tag right when the wheel changes.
    harbor_sidecar=$(HARBOR_TELEMETRY=0 "$HARBOR_PYTHON" - <<'PY'
import subprocess
from harbor.environments.docker import EGRESS_CONTROL_SIDECAR_CONTEXT_PATH as ctx
from harbor.environments.docker.docker import DockerEnvironment as env
from harbor.utils.container_cache import docker_build_context_hash
platform = subprocess.run(["docker", "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"],
                          check=True, capture_output=True, text=True).stdout.strip()
key = docker_build_context_hash(context=ctx, dockerfile_path=ctx / "Dockerfile", build_args={},
                                platform=platform)
print(f"{env._EGRESS_CONTROL_SIDECAR_DOCKER_NAME}--{key}")
print(ctx)
PY
    ) || die "could not derive the sidecar tag with HARBOR_PYTHON=$HARBOR_PYTHON: is Harbor installed in that venv?"
    SIDECAR_IMAGE=$(sed -n 1p <<<"$harbor_sidecar")
    [[ -n "$SIDECAR_CONTEXT" ]] || SIDECAR_CONTEXT=$(sed -n 2p <<<"$harbor_sidecar")
  fi
  has_buildx=0
  docker buildx version >/dev/null 2>&1 && has_buildx=1
  if docker image inspect "$SIDECAR_IMAGE" >/dev/null 2>&1; then
    sidecar_status=present
    log "egress sidecar $SIDECAR_IMAGE present for ${#offline_tasks[@]} no-network tasks"
  elif ((has_buildx)) && [[ -n "$HARBOR_PYTHON" ]]; then
    log "building egress sidecar $SIDECAR_IMAGE with Harbor's own builder (docker buildx)"
    HARBOR_TELEMETRY=0 timeout "$PULL_TIMEOUT" "$HARBOR_PYTHON" - >&2 <<'PY' || die "building the egress sidecar failed (see the build log under ~/.cache/harbor/docker_build/): Harbor needs its gost base image reachable; pre-load $SIDECAR_IMAGE or fix the engine's registry access"
import asyncio
from harbor.environments.docker import EGRESS_CONTROL_SIDECAR_CONTEXT_PATH as ctx
from harbor.environments.docker.docker import DockerEnvironment as env
from harbor.environments.docker.utils import default_docker_platform, ensure_docker_image_built
async def main():
    print(await ensure_docker_image_built(
        docker_name=env._EGRESS_CONTROL_SIDECAR_DOCKER_NAME, docker_build_context=ctx,
        dockerfile_path=ctx / "Dockerfile", build_args={}, platform=await default_docker_platform()))
asyncio.run(main())
PY
    docker image inspect "$SIDECAR_IMAGE" >/dev/null 2>&1 || die "Harbor built the sidecar but $SIDECAR_IMAGE is not present: HARBOR_PYTHON belongs to another Harbor version?"
    sidecar_status=built
  elif [[ -n "$SIDECAR_CONTEXT" ]]; then
    # In a subshell: its `die` ends only the assembly, and REQUIRE_SIDECAR decides what follows.
    if (assemble_sidecar); then
      sidecar_status=assembled
    elif ((REQUIRE_SIDECAR)); then
      exit 1
    else
      log "warning (REQUIRE_SIDECAR=0): the egress sidecar could not be assembled (above); ${#offline_tasks[@]} no-network tasks will fail at launch"
      sidecar_status=missing
    fi
  elif ((has_buildx)); then
    sidecar_status=build-at-launch
    log "egress sidecar $SIDECAR_IMAGE absent; docker buildx is here, so Harbor will build it at launch (its gost base image must be reachable then); set HARBOR_PYTHON to build it now"
  else
    tasks_csv=$(IFS=,; printf '%s' "${offline_tasks[*]}")
    msg="docker buildx is missing and the egress sidecar $SIDECAR_IMAGE is not present, so ${#offline_tasks[@]} no-network tasks would fail at launch: ${tasks_csv//,/, }; set HARBOR_PYTHON (the sidecar is then assembled here), install the docker buildx plugin, or docker load that image"
    ((REQUIRE_SIDECAR)) && die "$msg"
    log "warning (REQUIRE_SIDECAR=0): $msg"
    sidecar_status=missing
  fi
fi

# --- what is already here: two engine calls in all, and no registry request ------------------
declare -A local_id=() want_name=()
while IFS=$'\t' read -r name id; do
  local_id[$name]=$id
done < <(docker images --no-trunc --format '{{.Repository}}:{{.Tag}}{{"\t"}}{{.ID}}')
declare -A arch_of=() repo_digests_of=()
present_ids=()
for image in "${images[@]}"; do
  name=$(local_name "$image")
  want_name[$image]=$name
  [[ -n "${local_id[$name]:-}" ]] && present_ids+=("${local_id[$name]}")
done
if ((${#present_ids[@]})); then
  while IFS=$'\t' read -r id arch os rds; do
    [[ -n "$id" ]] || continue
    arch_of[$id]="$os/$arch"
    repo_digests_of[$id]=$rds
  done < <(docker image inspect --format '{{.Id}}{{"\t"}}{{.Architecture}}{{"\t"}}{{.Os}}{{"\t"}}{{range .RepoDigests}}{{.}} {{end}}' "${present_ids[@]}")
fi

mkdir -p "$work/results" "$work/scratch"
total=${#images[@]}
to_pull=()
for image in "${images[@]}"; do
  id=${local_id[${want_name[$image]}]:-}
  if [[ -n "$id" && "${arch_of[$id]:-}" == linux/amd64 ]]; then
    printf 'ok\t%s\t%s\tpresent\n' "$image" "$id" >"$work/results/$(printf '%s' "$image" | sha256sum | cut -c1-16)"
  else
    [[ -n "$id" ]] && log "$image is present as ${arch_of[$id]:-unknown}, not linux/amd64: pulling it again"
    to_pull+=("$image")
  fi
done
ready_count() { grep -l '^ok' "$work"/results/* 2>/dev/null | wc -l; }
log "$(ready_count)/$total ready; ${#to_pull[@]} to pull (concurrency $CONCURRENCY, up to $attempts attempts each)"

# --- one image: fetch, load, tag, architecture check --------------------------------------
pull_one() {
  local image=$1 key name dir id arch digest
  key=$(printf '%s' "$image" | sha256sum | cut -c1-16)
  name=${want_name[$image]}
  dir="$work/scratch/$key"
  if ! fetch_image "$image" "$(source_repo "$image")" "${name##*:}" "" "$name" "$dir"; then
    printf 'fail\t%s\t%s\n' "$image" "$(cat "$dir/reason")" >"$work/results/$key"
    rm -rf -- "$dir"
    return 0
  fi
  digest=$(cat "$dir/digest")
  rm -rf -- "$dir"
  if ! IFS=$'\t' read -r id arch < <(docker image inspect --format '{{.Id}}{{"\t"}}{{.Os}}/{{.Architecture}}' "$name"); then
    printf 'fail\t%s\t%s was copied but the engine does not list it\n' "$image" "$image" >"$work/results/$key"
    return 0
  fi
  if [[ "$arch" != linux/amd64 ]]; then
    # Leave nothing behind that a later run would take for a ready image.
    docker rmi "$name" >/dev/null 2>&1 || true
    printf 'fail\t%s\t%s is %s, not linux/amd64 (the registry has no amd64 variant): use an amd64 tag\n' \
      "$image" "$image" "$arch" >"$work/results/$key"
    return 0
  fi
  printf 'ok\t%s\t%s\tpulled\t%s\n' "$image" "$id" "$digest" >"$work/results/$key"
  log "$(ready_count)/$total ready (pulled $image)"
}

for image in "${to_pull[@]}"; do
  while (($(jobs -pr | wc -l) >= CONCURRENCY)); do wait -n || true; done
  log "pulling $image ($(ready_count)/$total ready)"
  pull_one "$image" &
done
wait

# --- results, recorded digests, outputs ----------------------------------------------------
mkdir -p "$STATE_DIR"
state="$STATE_DIR/repo-digests.tsv"
touch "$state"
failures=()
for image in "${images[@]}"; do
  f="$work/results/$(printf '%s' "$image" | sha256sum | cut -c1-16)"
  if [[ ! -s "$f" ]]; then
    failures+=("$image: its pull worker died without a result")
  elif [[ "$(cut -f1 "$f")" == fail ]]; then
    failures+=("$(cut -f3- "$f")")
  fi
done
# Merge the new registry digests (image, image id, digest) into the state, newest wins.
{ cat "$state"; cat "$work"/results/* 2>/dev/null | awk -F'\t' '$1=="ok" && $4=="pulled" {print $2"\t"$3"\t"$5}'; } \
  | awk -F'\t' '{row[$1]=$0} END {for (k in row) print row[k]}' | sort >"$state.tmp"
mv "$state.tmp" "$state"

if ((${#failures[@]})); then
  for f in "${failures[@]}"; do log "$f"; done
  die "$(ready_count)/$total images ready; ${#failures[@]} failed: ${failures[0]}$( ((${#failures[@]} > 1)) && printf ' (and %d more above)' $((${#failures[@]} - 1)) )"
fi

ready_tsv="$work/ready.tsv"
cat "$work"/results/* | awk -F'\t' '$1=="ok" {print $2"\t"$3"\t"$4}' | sort >"$ready_tsv"
# repo digest only where it belongs to the image ID present now (a re-tagged image has none)
repo_tsv="$work/repo.tsv"
awk -F'\t' 'NR==FNR {rd[$1"\t"$2]=$3; next} ($1"\t"$2) in rd {print $1"\t"rd[$1"\t"$2]}' \
  "$state" "$ready_tsv" >"$repo_tsv"
# Present images pulled by other means (docker pull) may carry their registry digest locally.
while IFS=$'\t' read -r image id how; do
  [[ "$how" == present ]] && ! awk -F'\t' -v i="$image" '$1==i {f=1} END {exit !f}' "$repo_tsv" || continue
  for rd in ${repo_digests_of[$id]:-}; do
    if [[ "${rd%@*}" == "${want_name[$image]%:*}" || "${rd%@*}" == "$(source_repo "$image")" ]]; then
      printf '%s\t%s\n' "$image" "${rd#*@}" >>"$repo_tsv"
      break
    fi
  done
done <"$ready_tsv"

pinned_tsv="$work/pinned.tsv"
: >"$pinned_tsv"
if ((PIN_DIGESTS)); then
  while IFS=$'\t' read -r image id _; do
    digest=$(awk -F'\t' -v i="$image" '$1==i {print $2}' "$repo_tsv")
    if [[ -z "$digest" ]]; then
      # Present but never pulled by this script: the only source of its digest is the registry.
      src=$(source_repo "$image")
      name=${want_name[$image]}
      timeout "$PULL_TIMEOUT" skopeo inspect --raw "$(tls_flag "$src")" "${skopeo_auth[@]}" \
        "docker://$src:${name##*:}" >"$work/pin.raw" 2>"$work/pin.err" \
        || die "PIN_DIGESTS=1: cannot read the registry digest of $image from $src: $(tail -n1 "$work/pin.err")"
      digest="sha256:$(sha256sum "$work/pin.raw" | cut -d' ' -f1)"
      log "warning: $image was present but not pulled here; pinned to the registry's current $digest, which may not be the local image"
    fi
    repo=${want_name[$image]%:*}
    printf '%s\t%s@%s\n' "$image" "$repo" "$digest" >>"$pinned_tsv"
  done <"$ready_tsv"
fi

pulled=$(awk -F'\t' '$3=="pulled"' "$ready_tsv" | wc -l)
log "$total/$total ready ($pulled pulled, $((total - pulled)) already present)"
tsv_obj() { jq -Rn '[inputs | split("\t") | {(.[0]): .[1]}] | add // {}' <"$1"; }
jq -cn \
  --argjson ready "$(wc -l <"$ready_tsv")" --argjson total "$total" --argjson pulled "$pulled" \
  --argjson digests "$(tsv_obj <(cut -f1,2 "$ready_tsv"))" \
  --argjson repo "$(tsv_obj "$repo_tsv")" --argjson pinned "$(tsv_obj "$pinned_tsv")" \
  --argjson pin "$PIN_DIGESTS" --arg sstatus "$sidecar_status" --arg simage "$SIDECAR_IMAGE" \
  '{ready: $ready, total: $total, pulled: $pulled, present: ($ready - $pulled), digests: $digests,
    repo_digests: $repo, sidecar: {status: $sstatus, image: $simage}}
   + (if $pin == 1 then {pinned: $pinned} else {} end)'
