#!/usr/bin/env bash
# Builds the Pulumi engine the real-CLI tests run, from Go modules with this machine's Go, once
# per machine: a second run finds the binary for the same go.mod/go.sum and only checks it.
#
# What it builds and where (ENGINE_DIR/pulumi-<version>-<hash of go.mod+go.sum>/):
#   bin/pulumi    the CLI, github.com/pulumi/pulumi/pkg/v3/cmd/pulumi at this module's pin
#   bin/python-deps  the language host's dependency install, from the same SDK (cmd/python-deps)
#   home/         an isolated PULUMI_HOME for the tests: no plugin is ever downloaded into it
#   status.json   what was built, the build seconds, and the engine parts the module proxy
#                 refuses (see below), for the tests and the README
# ENGINE_DIR/current points at the newest build.
#
# Two parts of a full engine are probed, not built, because the module proxy here refuses them:
# the Python language host (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3,
# a nested module with no tag of its own) and the pulumi-command provider
# (github.com/pulumi/pulumi-command/provider, also untagged; tried at the commit of pulumi-command's
# v1.2.1 tag). The probe asks again on every run, so the day either is served it shows here.
#
# Inputs (environment, with defaults):
#   BENCHSTACK_ENGINE_DIR   where builds go                      (/var/lib/benchstack-engine)
#   GO                      the go command                        (go)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ENGINE_DIR=${BENCHSTACK_ENGINE_DIR:-/var/lib/benchstack-engine}
GO=${GO:-go}
LANGUAGE_HOST=github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3
COMMAND_PROVIDER=github.com/pulumi/pulumi-command/provider
# pulumi-command v1.2.1 (the pulumi-command SDK pin): its tag's commit, as the proxy's .info for
# the repository root module names it.
COMMAND_PROVIDER_VERSIONS=(v1.2.1 v0.0.0-20260303235922-7f3eb6f3b77c)

log() { printf '[engine] %s\n' "$*" >&2; }
die() { printf 'engine: %s\n' "$*" >&2; exit 1; }

command -v "$GO" >/dev/null || die "no Go toolchain ('$GO' not found): install Go >= 1.26"
version=$(awk '$1 == "require" { $0 = substr($0, 9) } $1 == "github.com/pulumi/pulumi/pkg/v3" { print $2; exit }' "$HERE/go.mod")
[[ -n "$version" ]] || die "no pulumi/pkg/v3 require in $HERE/go.mod"
key=$(cat "$HERE/go.mod" "$HERE/go.sum" "$HERE"/cmd/*/*.go | sha256sum | cut -c1-12)
dest="$ENGINE_DIR/pulumi-$version-$key"
mkdir -p "$ENGINE_DIR"

built=false
seconds=0
if [[ ! -x "$dest/bin/pulumi" ]] || [[ "$("$dest/bin/pulumi" version 2>/dev/null)" != "$version" ]]; then
  log "building the Pulumi CLI $version from Go modules (once per machine; minutes on 2 cores)"
  rm -rf "$dest.tmp"
  mkdir -p "$dest.tmp/bin" "$dest.tmp/home"
  start=$SECONDS
  # -trimpath/-buildvcs=false: the binary does not depend on where the repository is checked out.
  (cd "$HERE" && "$GO" build -trimpath -buildvcs=false -mod=readonly \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
    -o "$dest.tmp/bin/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) >"$ENGINE_DIR/build.log" 2>&1 \
    || die "go build of the Pulumi CLI failed; see $ENGINE_DIR/build.log"
  (cd "$HERE" && "$GO" build -trimpath -buildvcs=false -mod=readonly -ldflags "-s -w" \
    -o "$dest.tmp/bin/python-deps" ./cmd/python-deps) >>"$ENGINE_DIR/build.log" 2>&1 \
    || die "go build of python-deps failed; see $ENGINE_DIR/build.log"
  seconds=$((SECONDS - start))
  got=$("$dest.tmp/bin/pulumi" version) || die "the built pulumi does not run; see $ENGINE_DIR/build.log"
  [[ "$got" == "$version" ]] || die "the built pulumi says $got, not $version"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  built=true
  log "built pulumi $version in ${seconds} s"
fi
ln -sfn "$dest" "$ENGINE_DIR/current"

# Ask the module proxy for the parts it refused before; one line each, no build.
probe() {
  local module=$1 version=$2 dir out
  dir=$(mktemp -d)
  printf 'module probe\n\ngo 1.26\n' >"$dir/go.mod"
  if out=$(cd "$dir" && GOFLAGS=-mod=mod "$GO" mod download -json "$module@$version" 2>&1); then
    echo "served"
  elif grep -q "not available" <<<"$out"; then
    echo "refused by the module proxy"
  else
    echo "not fetched: $(jq -r '.Error // empty' <<<"$out" 2>/dev/null | tail -n1 | sed -E 's#https?://[^ ]*##g')"
  fi
  rm -rf "$dir"
}
language_host=$(probe "$LANGUAGE_HOST" "$version")
provider="refused"
for v in "${COMMAND_PROVIDER_VERSIONS[@]}"; do
  answer=$(probe "$COMMAND_PROVIDER" "$v")
  if [[ "$answer" == served ]]; then provider="served at $v"; break; fi
  provider="$answer (tried ${COMMAND_PROVIDER_VERSIONS[*]})"
done
jq -n --arg version "$version" --arg dir "$dest" --argjson built "$built" --argjson seconds "$seconds" \
  --arg lh "$LANGUAGE_HOST@$version: ${language_host:-refused}" \
  --arg cp "$COMMAND_PROVIDER: ${provider:-refused}" \
  '{pulumi: $version, dir: $dir, built_now: $built, build_seconds: $seconds,
    language_host_python: $lh, command_provider: $cp}' >"$dest/status.json"
$built || log "pulumi $version cached in $dest"
log "pulumi-language-python: ${language_host:-refused}; pulumi-command provider: ${provider:-refused}"
echo "$dest/bin/pulumi"
