#!/usr/bin/env bash
# Builds the whole Pulumi engine from sources with this machine's Go, once per set of inputs:
# the CLI and the Python language host from Go modules (this wrapper module), the command and
# Docker providers from the upstream trees in ../shared/vendor (see its README), the Kubernetes
# provider from its own Go module (pinned in kubernetes/). The engine then never downloads
# anything: the providers are installed into its own PULUMI_HOME with
# `pulumi plugin install resource NAME VERSION --file`.
#
# Layout (ENGINE_DIR):
#   parts/<part>-<version>-<hash of its inputs>/   one build each: cli, command, docker, kubernetes
#   engine-<hash of the parts>/bin/                pulumi, pulumi-language-python(-exec)
#   engine-<hash of the parts>/home/               PULUMI_HOME with the three providers installed
#   engine-<hash of the parts>/status.json         versions, per-part build seconds, cache hits
#   current -> the newest engine-<hash>
# A part is rebuilt only when its inputs change (a warm run only checks); prints the bin dir.
#
#   build.sh          the whole engine
#   build.sh --core   the CLI with the command and Docker providers only, as an engine of its own
#                     (`current` points at it until the whole one is built): what every stack but a
#                     Kubernetes one needs, ready about 16 minutes sooner on a cold 2-core machine
#
# Inputs (environment; defaults in setup/defaults.env): BENCHSTACK_ENGINE_DIR (where builds go),
# BENCHSTACK_VENDOR (the upstream sources), GO (the go command, `go`).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=setup/lib.sh
source "$HERE/../lib.sh"
load_defaults
ENGINE_DIR=$BENCHSTACK_ENGINE_DIR
VENDOR=$BENCHSTACK_VENDOR
GO=${GO:-go}
case "${1:-}" in
  "") CORE=false ;;
  --core) CORE=true ;;
  *) echo "usage: build.sh [--core]" >&2; exit 2 ;;
esac

# The provider versions are those of the vendored trees and of kubernetes/module; the SDK pins
# in pyproject.toml must match them (tests/engine checks `pulumi plugin ls` against the pins).
COMMAND_VERSION=1.2.1
DOCKER_VERSION=5.1.1
LANGUAGE_HOST_SRC=$VENDOR/pulumi-language-python-3.259.0/sdk/python/cmd
COMMAND_SRC=$VENDOR/pulumi-command-provider-$COMMAND_VERSION/provider
DOCKER_SRC=$VENDOR/pulumi-docker-provider-$DOCKER_VERSION
KUBERNETES_PIN=$HERE/kubernetes

log() { printf '[engine] %s\n' "$*" >&2; }
die() { printf 'engine: %s\n' "$*" >&2; exit 1; }

command -v "$GO" >/dev/null || die "no Go toolchain ('$GO' not found): install Go >= 1.26"
for src in "$LANGUAGE_HOST_SRC/pulumi-language-python/main.go" "$LANGUAGE_HOST_SRC/pulumi-language-python-exec" \
  "$COMMAND_SRC/go.mod" "$DOCKER_SRC/provider/go.mod" "$DOCKER_SRC/upstream"; do
  [[ -e "$src" ]] || die "missing engine source $src: set BENCHSTACK_VENDOR to the vendor folder (../shared/vendor)"
done
for src in module go.mod go.sum; do
  [[ -f "$KUBERNETES_PIN/$src" ]] || die "missing $KUBERNETES_PIN/$src (the Kubernetes provider's pin)"
done
# pin KEY: the value of one `KEY VALUE` line of kubernetes/module.
pin() { awk -v key="$1" '$1 == key { print $2; found = 1; exit } END { exit !found }' "$KUBERNETES_PIN/module" \
  || die "no '$1' line in $KUBERNETES_PIN/module"; }
KUBERNETES_VERSION=$(pin version)
KUBERNETES_MODULE=$(pin path)
KUBERNETES_MODULE_VERSION=$(pin module_version)
KUBERNETES_MODULE_SUM=$(pin sum)
version=$(awk '$1 == "require" { $0 = substr($0, 9) } $1 == "github.com/pulumi/pulumi/pkg/v3" { print $2; exit }' "$HERE/go.mod")
[[ -n "$version" ]] || die "no pulumi/pkg/v3 require in $HERE/go.mod"
go_version=$("$GO" env GOVERSION)

# sha256 of a list of files and directories (contents and relative names), 12 hex digits.
inputs_hash() {
  local path
  for path in "$@"; do
    if [[ -d "$path" ]]; then
      (cd "$path" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    else
      sha256sum <"$path"
    fi
  done | { cat; echo "$go_version"; } | sha256sum | cut -c1-12
}

# part NAME KEY BUILDER: runs `BUILDER OUT_DIR` once per KEY; sets PART_DIR, appends to STATUS.
STATUS=()
part() {
  local name=$1 key=$2 builder=$3 dir start seconds status built=false
  dir="$ENGINE_DIR/parts/$name-$key"
  start=$SECONDS
  if [[ ! -f "$dir/.complete" ]]; then
    log "building $name (once per set of inputs; minutes on 2 cores; log: $ENGINE_DIR/build-$name.log)"
    rm -rf "$dir.tmp"
    mkdir -p "$dir.tmp"
    # A subshell outside any `||`, so that errexit holds in the builder: its first failing
    # command fails the part (in `builder || die` bash would ignore -e inside the function).
    set +e
    (set -e; "$builder" "$dir.tmp") >"$ENGINE_DIR/build-$name.log" 2>&1
    status=$?
    set -e
    ((status == 0)) \
      || die "the $name build failed; see $ENGINE_DIR/build-$name.log (last line: $(tail -n1 "$ENGINE_DIR/build-$name.log"))"
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
    built=true
  fi
  seconds=$((SECONDS - start))
  if $built; then log "built $name in ${seconds} s"; else log "$name cached ($dir)"; fi
  PART_DIR=$dir
  STATUS+=("$(jq -cn --arg name "$name" --arg dir "$dir" --argjson built "$built" \
    --argjson seconds "$seconds" '{name: $name, dir: $dir, built_now: $built, seconds: $seconds}')")
}

go_build() { "$GO" build -trimpath -buildvcs=false "$@"; }

# The CLI and the language host, from one module, so both compile against the same pkg/sdk.
# The language host's main.go is upstream's (its own go.mod path-replaces pkg and sdk into the
# pulumi repository, which is not here); this module requires them at the CLI's version.
build_cli() {
  local out=$1 src
  src=$(mktemp -d)
  cp "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$src/"
  mkdir -p "$src/cmd/pulumi-language-python"
  cp "$LANGUAGE_HOST_SRC/pulumi-language-python/main.go" "$src/cmd/pulumi-language-python/"
  mkdir -p "$out/bin"
  (cd "$src" && go_build -mod=readonly \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
    -o "$out/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  (cd "$src" && go_build -mod=readonly \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
    -o "$out/bin/pulumi-language-python" ./cmd/pulumi-language-python)
  install -m 755 "$LANGUAGE_HOST_SRC/pulumi-language-python-exec" "$out/bin/"
  rm -rf "$src"
  [[ "$("$out/bin/pulumi" version)" == "$version" ]] || { echo "the built pulumi is not $version"; return 1; }
}

build_command() {
  local out=$1 src
  src=$(mktemp -d)
  cp -r "$COMMAND_SRC/." "$src/"
  chmod -R u+w "$src"
  (cd "$src" && go_build -mod=readonly \
    -ldflags "-s -w -X github.com/pulumi/pulumi-command/provider/pkg/version.Version=$COMMAND_VERSION" \
    -o "$out/pulumi-resource-command" ./cmd/pulumi-resource-command)
  rm -rf "$src"
}

# provider/go.mod replaces the Terraform provider with ../upstream, so the copy keeps the
# layout; upstream is unpatched in the vendor tree and its two patches are applied here.
build_docker() {
  local out=$1 src
  src=$(mktemp -d)
  cp -r "$DOCKER_SRC/." "$src/"
  chmod -R u+w "$src"
  (cd "$src/upstream" && git apply ../patches/*.patch)
  (cd "$src/provider" && "$GO" mod download)
  # schema-embed.json: the schema stamped with the version; the build fails without it.
  (cd "$src/provider/cmd/pulumi-resource-docker" && VERSION=$DOCKER_VERSION "$GO" generate main.go)
  (cd "$src/provider" && CGO_ENABLED=0 go_build -mod=readonly -tags no_compose \
    -ldflags "-s -w -X github.com/pulumi/pulumi-docker/provider/v5/pkg/version.Version=$DOCKER_VERSION" \
    -o "$out/pulumi-resource-docker" github.com/pulumi/pulumi-docker/provider/v5/cmd/pulumi-resource-docker)
  rm -rf "$src"
}

# The provider's own module at the pinned version, with kubernetes/go.mod and go.sum in place of
# its go.mod (which replaces the Go SDK with a path outside the module) and go.sum.
build_kubernetes() {
  local out=$1 download dir sum
  # Global, not local: the builder runs in a subshell of its own, whose EXIT trap removes the
  # copy (about 60 MB) when a step fails too.
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  echo "[kubernetes] go mod download $KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION"
  # Run outside any module (kubernetes/go.mod names this very module).
  download=$(cd "$src" && "$GO" mod download -json "$KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION") \
    || { echo "go mod download $KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION failed: $(jq -r '.Error // "" | gsub("\\s+"; " ")' <<<"$download")"; return 1; }
  dir=$(jq -r .Dir <<<"$download")
  sum=$(jq -r .Sum <<<"$download")
  [[ "$sum" == "$KUBERNETES_MODULE_SUM" ]] \
    || { echo "$KUBERNETES_MODULE@$KUBERNETES_MODULE_VERSION has hash $sum, pinned $KUBERNETES_MODULE_SUM"; return 1; }
  cp -r "$dir/." "$src/"
  chmod -R u+w "$src"
  cp "$KUBERNETES_PIN/go.mod" "$KUBERNETES_PIN/go.sum" "$src/"
  # schema-embed.json and terraform-mapping-embed.json: the schema stamped with the version; the
  # build fails without them.
  echo "[kubernetes] generate (schema $KUBERNETES_VERSION)"
  (cd "$src/cmd/pulumi-resource-kubernetes" && VERSION=$KUBERNETES_VERSION "$GO" run -mod=readonly generate.go)
  echo "[kubernetes] build"
  (cd "$src" && CGO_ENABLED=0 go_build -mod=readonly \
    -ldflags "-s -w -X $KUBERNETES_MODULE/pkg/version.Version=$KUBERNETES_VERSION" \
    -o "$out/pulumi-resource-kubernetes" ./cmd/pulumi-resource-kubernetes)
  echo "[kubernetes] built $(du -h "$out/pulumi-resource-kubernetes" | cut -f1)"
}

mkdir -p "$ENGINE_DIR/parts"
total_start=$SECONDS
part "cli-$version" "$(inputs_hash "$HERE/go.mod" "$HERE/go.sum" "$HERE/tools.go" "$LANGUAGE_HOST_SRC")" build_cli
cli=$PART_DIR
part "command-$COMMAND_VERSION" "$(inputs_hash "$COMMAND_SRC")" build_command
command_provider=$PART_DIR/pulumi-resource-command
part "docker-$DOCKER_VERSION" "$(inputs_hash "$DOCKER_SRC")" build_docker
docker_provider=$PART_DIR/pulumi-resource-docker
providers=("command $COMMAND_VERSION $command_provider" "docker $DOCKER_VERSION $docker_provider")
if ! $CORE; then
  part "kubernetes-$KUBERNETES_VERSION" "$(inputs_hash "$KUBERNETES_PIN")" build_kubernetes
  providers+=("kubernetes $KUBERNETES_VERSION $PART_DIR/pulumi-resource-kubernetes")
fi

# The engine: the CLI's bin and a PULUMI_HOME holding exactly its providers.
engine="$ENGINE_DIR/engine-$(printf '%s\n' "${STATUS[@]}" | jq -r .dir | sha256sum | cut -c1-12)"
if [[ ! -f "$engine/.complete" ]]; then
  rm -rf "$engine.tmp"
  mkdir -p "$engine.tmp/home"
  ln -s "$cli/bin" "$engine.tmp/bin"
  for plugin in "${providers[@]}"; do
    read -r name plugin_version file <<<"$plugin"
    PULUMI_HOME="$engine.tmp/home" PULUMI_SKIP_UPDATE_CHECK=1 \
      "$cli/bin/pulumi" plugin install resource "$name" "$plugin_version" --file "$file" >/dev/null 2>&1 \
      || die "pulumi plugin install resource $name $plugin_version --file $file failed"
  done
  touch "$engine.tmp/.complete"
  rm -rf "$engine"
  mv "$engine.tmp" "$engine"
fi
plugins=$(PULUMI_HOME="$engine/home" PULUMI_SKIP_UPDATE_CHECK=1 "$engine/bin/pulumi" plugin ls --json)
printf '%s\n' "${STATUS[@]}" | jq -s --arg version "$version" --arg dir "$engine" \
  --argjson seconds "$((SECONDS - total_start))" --argjson plugins "$plugins" \
  '{pulumi: $version, dir: $dir, seconds: $seconds, parts: .,
    plugins: [$plugins[] | {name, kind, version}]}' >"$engine/status.json"
ln -sfn "$engine" "$ENGINE_DIR/current"
log "engine ready in $((SECONDS - total_start)) s: pulumi $version, command $COMMAND_VERSION, docker $DOCKER_VERSION$($CORE || echo ", kubernetes $KUBERNETES_VERSION") ($engine)"
echo "$engine/bin"
