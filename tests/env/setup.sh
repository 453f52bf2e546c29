#!/usr/bin/env bash
# The tests' own peers and builds, beyond what setup/ gives every local stack (run by
# setup/dev.sh, `make setup`, after setup/'s own parts, which these need): the project's venv
# with its test extras, an SSH server on loopback, Harbor in venvs of the tests' own, the two
# hosts' image.
#
#   setup.sh --packages the tests' own Debian packages (sshd, shellcheck, static busybox/bash)
#   setup.sh --peers    the venv, the sshd, the Harbor venvs
#   setup.sh --builds   the two-host rehearsal's image
#
# Defaults: setup/defaults.env, then tests/env/defaults.env. Idempotent: a second run only checks
# that each peer answers.
set -euo pipefail
# shellcheck source=setup/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../setup/lib.sh"

case "${1:-}" in
  --packages|--peers|--builds) part=${1#--} ;;
  *) die "usage: tests/env/setup.sh --packages | --peers | --builds (all of them: setup/dev.sh)" ;;
esac
load_defaults "$ROOT/tests/env/defaults.env"
STATE=$BENCHSTACK_TEST_STATE
mkdir -p "$STATE" "$BENCHSTACK_STATE"
HARBOR_VENV=$STATE/harbor-$BENCHSTACK_HARBOR_VERSION

if [[ $part == packages ]]; then
  # The SSH server and client, shellcheck for `make lint`, and the static busybox/bash the
  # host-plane tests copy into images.
  install_packages openssh-client openssh-server shellcheck bash-static busybox-static
fi

if [[ $part == peers ]]; then
  bash "$ROOT/tests/env/venv.sh"

  # --- An SSH server on loopback (the SSH seam's peer: probe, host keys, Docker over ssh) ------
  SSHD_DIR="$STATE/sshd"
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$BENCHSTACK_SSHD_PORT") 2>/dev/null; then
    mkdir -p "$SSHD_DIR" /run/sshd
    [[ -s "$SSHD_DIR/host_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/host_ed25519"
    [[ -s "$SSHD_DIR/id_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$SSHD_DIR/id_ed25519"
    install -m 600 "$SSHD_DIR/id_ed25519.pub" "$SSHD_DIR/authorized_keys"
    cat >"$SSHD_DIR/sshd_config" <<CONF
Port $BENCHSTACK_SSHD_PORT
ListenAddress 127.0.0.1
HostKey $SSHD_DIR/host_ed25519
AuthorizedKeysFile $SSHD_DIR/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
PidFile $SSHD_DIR/sshd.pid
CONF
    log "starting sshd on 127.0.0.1:$BENCHSTACK_SSHD_PORT"
    /usr/sbin/sshd -f "$SSHD_DIR/sshd_config" -E "$SSHD_DIR/sshd.log" || die "sshd did not start; see $SSHD_DIR/sshd.log"
    within 30 answers 127.0.0.1 "$BENCHSTACK_SSHD_PORT" ||
      die "sshd did not answer on 127.0.0.1:$BENCHSTACK_SSHD_PORT within 30 s; see $SSHD_DIR/sshd.log"
  fi

  # --- Harbor on Python >= 3.12, from its sha256-checked wheel (the Harbor tests' own venvs) --
  # One per pinned profile (setup/defaults.env): 0.21.0, and 0.26.0 for its rehearsal. The stamp
  # holds the wheel's sha256: a warm run installs nothing, a changed pin installs again.
  ensure_test_harbor() {
    local version=$1 sha=$2 venv=$STATE/harbor-$1 wheels=$STATE/wheels wheel got
    if [[ "$(cat "$venv/.benchstack-complete" 2>/dev/null)" != "$sha" ]]; then
      mkdir -p "$wheels"
      wheel="$wheels/harbor-$version-py3-none-any.whl"
      if [[ ! -s "$wheel" ]]; then
        "$BENCHSTACK_HARBOR_PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" \
          "harbor==$version" >>"$STATE/pip.log" 2>&1
      fi
      got=$(sha256sum "$wheel" | cut -d' ' -f1)
      [[ "$got" == "$sha" ]] || die "harbor $version wheel sha256 $got, expected $sha"
      log "installing Harbor $version into $venv"
      # A half-built venv from an interrupted run is not trusted: start over.
      rm -rf "$venv"
      "$BENCHSTACK_HARBOR_PYTHON" -m venv "$venv"
      "$venv/bin/pip" install -q "$wheel" >>"$STATE/pip.log" 2>&1 || die "harbor $version install failed; see $STATE/pip.log"
      echo "$sha" >"$venv/.benchstack-complete"
    fi
    [[ "$(HARBOR_TELEMETRY=0 "$venv/bin/harbor" --version)" == "$version" ]] || die "harbor $version does not run from $venv"
  }
  ensure_test_harbor "$BENCHSTACK_HARBOR_VERSION" "$BENCHSTACK_HARBOR_WHEEL_SHA256"
  ensure_test_harbor "$BENCHSTACK_HARBOR_LATEST_VERSION" "$BENCHSTACK_HARBOR_LATEST_WHEEL_SHA256"
  # The stamp holds the pin: a changed pin installs again.
  k8s_stamp="$HARBOR_VENV/.benchstack-k8s-client"
  if [[ "$(cat "$k8s_stamp" 2>/dev/null)" != "$BENCHSTACK_HARBOR_K8S_CLIENT" ]]; then
    log "installing $BENCHSTACK_HARBOR_K8S_CLIENT into $HARBOR_VENV (Harbor's ack environment)"
    "$HARBOR_VENV/bin/pip" install -q "$BENCHSTACK_HARBOR_K8S_CLIENT" >>"$STATE/pip.log" 2>&1 \
      || die "pip install $BENCHSTACK_HARBOR_K8S_CLIENT failed; see $STATE/pip.log"
    echo "$BENCHSTACK_HARBOR_K8S_CLIENT" >"$k8s_stamp"
  fi
  log "peers ready: docker $(docker version -f '{{.Server.Version}}'), registry $BENCHSTACK_REGISTRY, proxy $BENCHSTACK_PROXY (setup/), sshd 127.0.0.1:$BENCHSTACK_SSHD_PORT, harbor $HARBOR_VENV and $STATE/harbor-$BENCHSTACK_HARBOR_LATEST_VERSION"
fi

if [[ $part == builds ]]; then
  # The a100 rehearsal's two hosts' image (tests/env/hosts; its test starts and stops the hosts).
  bash "$ROOT/tests/env/hosts/build.sh" >/dev/null || die "the two-host rehearsal's image did not build"
fi
