#!/usr/bin/env bash
# Builds the Kubernetes binaries of the one-node cluster (cluster.sh: the local-k8s stack's and
# the k8s tests')
# from Go modules, once per set of inputs: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet and kubectl from this wrapper module (see go.mod), and the pause image
# from pause.c inside the kubernetes module, packed as an image archive that
# `ctr -n k8s.io images import` takes. Nothing else is built: no kube-proxy (the tests use no
# Service traffic), no kubeadm, no test binaries, no debug info.
#
# Layout (K8S_DIR):
#   parts/<part>-<hash of its inputs>/   one build each: kube (bin/), pause (pause.tar)
#   build-<hash of the parts>/bin/       the five binaries (links into the parts)
#   build-<hash of the parts>/pause.tar  the pause image archive
#   build-<hash of the parts>/status.json  versions, per-part seconds (download, compile), cache hits
#   current -> the newest build-<hash>
# A part is rebuilt only when its inputs change (a warm run only hashes); prints the bin dir.
#
# Inputs (environment): BENCHSTACK_K8S_DIR (where builds go; setup/defaults.env), GO (the go
# command, `go`), CC (the C compiler, `gcc`).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=setup/lib.sh
source "$HERE/../lib.sh"
load_defaults
K8S_DIR=$BENCHSTACK_K8S_DIR
GO=${GO:-go}
CC=${CC:-gcc}

# The commands built; the pause image is named as upstream tags it (its Makefile's TAG), the
# sandbox image cluster.sh configures.
COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

log() { printf '[k8s-build] %s\n' "$*" >&2; }
die() { printf 'k8s-build: %s\n' "$*" >&2; exit 1; }

command -v "$GO" >/dev/null || die "no Go toolchain ('$GO' not found): install Go >= 1.24"
for tool in "$CC" jq sha256sum tar; do
  command -v "$tool" >/dev/null || die "'$tool' not found (setup/setup.sh --stack local-k8s installs the build's Debian packages)"
done
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' "$HERE/go.mod")
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "no k8s.io/kubernetes require in $HERE/go.mod"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
go_version=$("$GO" env GOVERSION)
# The kubernetes module's files (pause.c, the tag's date), from the module cache or the proxy;
# asked from / so that no go.sum is touched.
module_json=$(cd / && "$GO" mod download -json "k8s.io/kubernetes@$version") \
  || die "go mod download k8s.io/kubernetes@$version failed"
module_src=$(jq -r .Dir <<<"$module_json")
tag_date=$(jq -r '.Time // "1970-01-01T00:00:00Z"' "$(jq -r .Info <<<"$module_json")")
PAUSE_TAG=$(awk '$1 == "TAG" && $2 == "?=" { print $3; exit }' "$module_src/build/pause/Makefile")
[[ -n "$PAUSE_TAG" ]] || die "no TAG in $module_src/build/pause/Makefile"
PAUSE_IMAGE=registry.k8s.io/pause:$PAUSE_TAG

# sha256 of files and strings (the recipe), 12 hex digits.
inputs_hash() {
  local path
  for path in "$@"; do
    if [[ -f "$path" ]]; then sha256sum <"$path"; else printf '%s\n' "$path"; fi
  done | { cat; echo "$go_version"; } | sha256sum | cut -c1-12
}

# part NAME KEY BUILDER: runs `BUILDER OUT_DIR` once per KEY; sets PART_DIR, appends to STATUS.
# A builder may write extra status fields as JSON into OUT_DIR/.status.json.
STATUS=()
part() {
  local name=$1 key=$2 builder=$3 dir start seconds built=false extra
  dir="$K8S_DIR/parts/$name-$key"
  start=$SECONDS
  if [[ ! -f "$dir/.complete" ]]; then
    log "building $name (once per set of inputs; minutes on 2 cores; log: $K8S_DIR/build-$name.log)"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    "$builder" "$dir.tmp" >"$K8S_DIR/build-$name.log" 2>&1 \
      || die "the $name build failed; see $K8S_DIR/build-$name.log (last line: $(tail -n1 "$K8S_DIR/build-$name.log"))"
    extra='{}'
    [[ -f "$dir.tmp/.status.json" ]] && extra=$(cat "$dir.tmp/.status.json")
    jq -n --argjson seconds "$((SECONDS - start))" --argjson extra "$extra" '$extra + {seconds: $seconds}' \
      >"$dir.tmp/.built.json"
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    built=true
  fi
  seconds=$((SECONDS - start))
  if $built; then log "built $name in ${seconds} s"; else log "$name cached ($dir)"; fi
  PART_DIR=$dir
  # The cold build's own numbers stay with the part: a warm run reports them as `cold`.
  extra=$(cat "$dir/.built.json" 2>/dev/null || echo null)
  STATUS+=("$(jq -cn --arg name "$name" --arg dir "$dir" --argjson built "$built" \
    --argjson seconds "$seconds" --argjson cold "$extra" \
    '{name: $name, dir: $dir, built_now: $built, seconds: $seconds, cold: $cold}')")
}

# kubernetes' hack/lib/version.sh stamps these; the build date is the tag's (from the module's
# .info), so the same inputs give the same binaries.
kube_ldflags() {
  local pkg flags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$tag_date"
  done
  printf '%s' "$flags"
}

# The five commands in one `go build` (shared packages compile once, both cores busy). The
# modules are fetched first by `go list` (only those holding a package the commands import, not
# the whole module graph), so the status tells download from compile time.
build_kube() {
  local out=$1 src pkgs=() cmd start download
  src=$(mktemp -d)
  cp "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$src/"
  for cmd in "${COMMANDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  start=$SECONDS
  (cd "$src" && "$GO" list -mod=readonly -deps "${pkgs[@]}" >/dev/null)
  download=$((SECONDS - start))
  mkdir -p "$out/bin"
  (cd "$src" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -buildvcs=false \
    -ldflags "$(kube_ldflags)" -o "$out/bin/" "${pkgs[@]}")
  rm -rf "$src"
  "$out/bin/kubelet" --version | grep -qx "Kubernetes $version" \
    || { echo "the built kubelet is not $version: $("$out/bin/kubelet" --version)"; return 1; }
  jq -n --argjson download "$download" --argjson compile "$((SECONDS - start - download))" \
    '{download_seconds: $download, compile_seconds: $compile}' >"$out/.status.json"
}

# The pause image: upstream's pause.c, static, alone in a one-layer image. The archive holds
# both an OCI layout (index.json, named by the containerd annotation) and docker's manifest.json.
build_pause() {
  local out=$1 work config manifest layer_sha config_sha manifest_sha diff_id
  work=$(mktemp -d)
  mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
  "$CC" -Os -Wall -Werror -static -DVERSION="v$PAUSE_TAG-benchstack" \
    -o "$work/rootfs/pause" "$module_src/build/pause/linux/pause.c"
  strip "$work/rootfs/pause" 2>/dev/null || true
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/rootfs" -cf "$work/layer.tar" pause
  layer_sha=$(sha256sum <"$work/layer.tar" | cut -d' ' -f1)
  diff_id=$layer_sha
  cp "$work/layer.tar" "$work/oci/blobs/sha256/$layer_sha"
  config=$(jq -cn --arg diff "sha256:$diff_id" '{architecture: "amd64", os: "linux",
    config: {User: "65535:65535", Entrypoint: ["/pause"], WorkingDir: "/"},
    rootfs: {type: "layers", diff_ids: [$diff]}, history: [{created_by: "benchstack k8s build.sh"}]}')
  printf '%s' "$config" >"$work/config.json"
  config_sha=$(sha256sum <"$work/config.json" | cut -d' ' -f1)
  cp "$work/config.json" "$work/oci/blobs/sha256/$config_sha"
  manifest=$(jq -cn --arg c "sha256:$config_sha" --argjson cs "$(stat -c %s "$work/config.json")" \
    --arg l "sha256:$layer_sha" --argjson ls "$(stat -c %s "$work/layer.tar")" \
    '{schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}]}')
  printf '%s' "$manifest" >"$work/manifest.json"
  manifest_sha=$(sha256sum <"$work/manifest.json" | cut -d' ' -f1)
  cp "$work/manifest.json" "$work/oci/blobs/sha256/$manifest_sha"
  jq -cn --arg m "sha256:$manifest_sha" --argjson ms "$(stat -c %s "$work/manifest.json")" \
    --arg name "$PAUSE_IMAGE" --arg tag "$PAUSE_TAG" \
    '{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest: $m, size: $ms, platform: {architecture: "amd64", os: "linux"},
      annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": $tag}}]}' \
    >"$work/oci/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/oci/oci-layout"
  jq -cn --arg c "blobs/sha256/$config_sha" --arg l "blobs/sha256/$layer_sha" --arg name "$PAUSE_IMAGE" \
    '[{Config: $c, RepoTags: [$name], Layers: [$l]}]' >"$work/oci/manifest.json"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/oci" -cf "$out/pause.tar" .
  rm -rf "$work"
  jq -n --arg image "$PAUSE_IMAGE" --arg digest "sha256:$manifest_sha" '{image: $image, digest: $digest}' \
    >"$out/.status.json"
}

mkdir -p "$K8S_DIR/parts"
total_start=$SECONDS
recipe="commands=${COMMANDS[*]} CGO_ENABLED=0 -trimpath -s -w gitTreeState=archive"
part "kube-$version" "$(inputs_hash "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$recipe")" build_kube
kube=$PART_DIR
part "pause-$PAUSE_TAG" "$(inputs_hash "$module_src/build/pause/linux/pause.c" "$PAUSE_IMAGE" \
  "$("$CC" -dumpfullversion 2>/dev/null || "$CC" -dumpversion)")" build_pause
pause=$PART_DIR

build="$K8S_DIR/build-$(printf '%s\n' "${STATUS[@]}" | jq -r .dir | sha256sum | cut -c1-12)"
if [[ ! -f "$build/.complete" ]]; then
  rm -rf "$build.tmp"
  mkdir -p "$build.tmp"
  ln -s "$kube/bin" "$build.tmp/bin"
  ln -s "$pause/pause.tar" "$build.tmp/pause.tar"
  touch "$build.tmp/.complete"
  rm -rf "$build"
  mv "$build.tmp" "$build"
fi
printf '%s\n' "${STATUS[@]}" | jq -s --arg version "$version" --arg go "$go_version" --arg dir "$build" \
  --arg pause "$PAUSE_IMAGE" --argjson seconds "$((SECONDS - total_start))" \
  '{kubernetes: $version, go: $go, dir: $dir, pause_image: $pause, seconds: $seconds, parts: .}' \
  >"$build/status.json"
ln -sfn "$build" "$K8S_DIR/current"
log "kubernetes $version ready in $((SECONDS - total_start)) s ($build)"
echo "$build/bin"
