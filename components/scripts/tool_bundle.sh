#!/usr/bin/env bash
# ToolBundle create: build the read-only tmux + python + asciinema bundle that task containers
# mount, so Terminus-2's setup finds both tools and downloads nothing (seed: "Prepare tmux and
# asciinema for the task containers").
#
# Inputs (environment, with defaults):
#   TOOLS_DIR         bundle directory on the host            ($HOME/benchstack/harbor-tools-amd64)
#   HOST_TMUX         tmux binary to bundle                    (command -v tmux)
#   HOST_PYTHON       python binary to bundle (an ELF, not a pyenv shim)
#                                                              (/usr/bin/python3, else command -v python3)
#   HOST_LOCALE       glibc C.UTF-8 locale directory to bundle, for images without locale data
#                                                              (/usr/lib/locale/C.utf8, else C.UTF-8)
#   ASCIINEMA_WHEEL   local asciinema-2.4.0 wheel; empty = `HOST_PYTHON -m pip download` it  ("")
#   ASCIINEMA_SHA256  expected sha256 of that wheel   (249ccf10...a6423104, asciinema 2.4.0)
#   BUNDLE_ROOT       where containers mount the bundle; baked into the wrappers (/opt/harbor-tools)
#   CANARY_IMAGE      image without tmux/python to validate in; empty = host validation only ("")
#   FORCE_REBUILD     1 = rebuild even when the stamp matches the input hash  (0)
#   DOCKER_HOST       Docker socket used for the canary (docker's own default)
# Outputs (last stdout line, JSON):
#   tools_dir, tmux_version, asciinema_version, input_hash, rebuilt (bool),
#   canary_image (image the bundle was validated in, "" if none), canary_validated (bool)
# Delete: tool_bundle.delete.sh with the same TOOLS_DIR.
# Idempotent: the bundle carries a stamp with the hash of every input; when it matches, nothing
# is rebuilt (the host check still runs). A rebuild is staged beside TOOLS_DIR and swapped in only
# after it passed every check, so a failure leaves the previous bundle (or no bundle) as it was.
set -euo pipefail

TOOLS_DIR=${TOOLS_DIR:-$HOME/benchstack/harbor-tools-amd64}
HOST_TMUX=${HOST_TMUX:-$(command -v tmux || true)}
if [[ -z "${HOST_PYTHON:-}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then HOST_PYTHON=/usr/bin/python3; else HOST_PYTHON=$(command -v python3 || true); fi
fi
if [[ -z "${HOST_LOCALE:-}" ]]; then
  HOST_LOCALE=/usr/lib/locale/C.utf8
  [[ -d "$HOST_LOCALE" ]] || HOST_LOCALE=/usr/lib/locale/C.UTF-8
fi
ASCIINEMA_WHEEL=${ASCIINEMA_WHEEL:-}
ASCIINEMA_SHA256=${ASCIINEMA_SHA256:-249ccf108509d643ddaf38979dac48c99e9e251f597173d8553a30d7a6423104}
BUNDLE_ROOT=${BUNDLE_ROOT:-/opt/harbor-tools}
CANARY_IMAGE=${CANARY_IMAGE:-}
FORCE_REBUILD=${FORCE_REBUILD:-0}
# Bumped whenever the bundle layout or the wrappers change, so old bundles are rebuilt.
BUNDLE_FORMAT=benchstack-tool-bundle-4
TERMINFO_NAMES=(xterm xterm-256color xterm-color screen screen-256color tmux tmux-256color linux vt100 dumb)

log() { printf '[tool_bundle] %s\n' "$*" >&2; }
die() { printf 'tool_bundle: %s\n' "$*" >&2; exit 1; }

is_elf() { [[ -f "$1" ]] && [[ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" == '177ELF' ]]; }

[[ -n "$HOST_TMUX" ]] || die "tmux not found on this host: install tmux or set HOST_TMUX to its binary"
HOST_TMUX=$(readlink -f "$HOST_TMUX" 2>/dev/null || true)
[[ -n "$HOST_TMUX" && -x "$HOST_TMUX" ]] || die "HOST_TMUX=${HOST_TMUX:-?} is not an executable file: install tmux or point HOST_TMUX at its binary"
is_elf "$HOST_TMUX" || die "HOST_TMUX=$HOST_TMUX is not an ELF binary: point HOST_TMUX at the real tmux"
[[ -n "$HOST_PYTHON" ]] || die "python3 not found on this host: install python3 or set HOST_PYTHON"
HOST_PYTHON=$(readlink -f "$HOST_PYTHON" 2>/dev/null || true)
[[ -n "$HOST_PYTHON" && -x "$HOST_PYTHON" ]] || die "HOST_PYTHON is not an executable file: point HOST_PYTHON at a python3 binary"
# A pyenv shim is a shell script that would not run inside a container.
is_elf "$HOST_PYTHON" || die "HOST_PYTHON=$HOST_PYTHON is not an ELF binary (a shim?): set HOST_PYTHON to the real interpreter, e.g. /usr/bin/python3"
# tmux needs a UTF-8 LC_CTYPE; musl and static images carry no glibc locale data for it.
[[ -f "$HOST_LOCALE/LC_CTYPE" ]] \
  || die "no glibc C.UTF-8 locale at HOST_LOCALE=$HOST_LOCALE: install libc-bin or point HOST_LOCALE at a C.utf8 directory"
[[ "$ASCIINEMA_SHA256" =~ ^[0-9a-f]{64}$ ]] || die "ASCIINEMA_SHA256 must be 64 lowercase hex digits, got '$ASCIINEMA_SHA256'"
[[ "$BUNDLE_ROOT" == /* ]] || die "BUNDLE_ROOT must be an absolute path, got '$BUNDLE_ROOT'"
[[ "$TOOLS_DIR" == /* ]] || die "TOOLS_DIR must be an absolute path, got '$TOOLS_DIR'"

py_info=$("$HOST_PYTHON" -c 'import sys, sysconfig; print(f"python{sys.version_info[0]}.{sys.version_info[1]}"); print(sysconfig.get_paths()["stdlib"])') \
  || die "HOST_PYTHON=$HOST_PYTHON does not run: point HOST_PYTHON at a working python3"
PYTHON_VERSION=$(sed -n 1p <<<"$py_info")
PYTHON_STDLIB=$(sed -n 2p <<<"$py_info")
[[ -f "$PYTHON_STDLIB/os.py" ]] || die "stdlib of $HOST_PYTHON not found at $PYTHON_STDLIB: set HOST_PYTHON to a complete python3 install"
DYNLOAD="$PYTHON_STDLIB/lib-dynload"

shared_libs() {
  # Every library the loader would map for tmux, python and the stdlib extension modules.
  { ldd "$HOST_TMUX"; ldd "$HOST_PYTHON"
    if [[ -d "$DYNLOAD" ]]; then find "$DYNLOAD" -type f -name '*.so' -exec ldd {} \; ; fi
  } 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
}

terminfo_file() {
  local name=$1 dir
  for dir in /etc/terminfo /lib/terminfo /usr/share/terminfo; do
    [[ -f "$dir/${name:0:1}/$name" ]] && { echo "$dir/${name:0:1}/$name"; return 0; }
  done
  return 1
}

tmux_wrapper() {
  cat <<EOF
#!/bin/sh
# benchstack tool bundle: host tmux run through the bundle's own loader and libraries.
set -eu
bundle_root=\${HARBOR_TMUX_ROOT:-$BUNDLE_ROOT}
# Appended after the image's own terminfo (empty entry = system default) for images without it.
export TERMINFO_DIRS="\${TERMINFO_DIRS:-}:\$bundle_root/terminfo"
# tmux will not start without a UTF-8 LC_CTYPE. An image with no glibc locale data (musl,
# static) gets the bundle's C.UTF-8; tmux's shells inherit LOCPATH, harmless there (musl ignores
# it, a glibc program has no locale data of its own). An image with locale data keeps using it:
# LOCPATH would hide its locale-archive from every program run in the panes.
if [ -z "\${LOCPATH:-}" ] && [ ! -e /usr/lib/locale/locale-archive ] \\
  && [ ! -e /usr/lib/locale/C.utf8/LC_CTYPE ] && [ ! -e /usr/lib/locale/C.UTF-8/LC_CTYPE ]; then
  export LOCPATH="\$bundle_root/locale"
fi
exec "\$bundle_root/lib/ld-linux-x86-64.so.2" --library-path "\$bundle_root/lib" --argv0 tmux \\
  "\$bundle_root/bin/tmux.real" "\$@"
EOF
}

asciinema_wrapper() {
  # -I instead of the seed's exported PYTHONHOME/PYTHONPATH: asciinema rec runs the agent's shell
  # as its child, and inherited PYTHONHOME would break every python the agent starts there.
  cat <<EOF
#!/bin/sh
# benchstack tool bundle: asciinema on the bundle's python, loader and libraries.
set -eu
bundle_root=\${HARBOR_TOOLS_ROOT:-$BUNDLE_ROOT}
exec "\$bundle_root/lib/ld-linux-x86-64.so.2" --library-path "\$bundle_root/lib" \\
  "\$bundle_root/python/bin/python3" -I "\$bundle_root/python/asciinema_main.py" "\$@"
EOF
}

asciinema_main() {
  cat <<'EOF'
"""benchstack tool bundle: asciinema from the bundle's site-packages."""
import locale
import os
import runpy
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "python", "site-packages"))
# asciinema refuses a non-UTF-8 LC_CTYPE, and musl or static images have no glibc locale data.
# The bundle's C.UTF-8 is loaded for this process only: LOCPATH is put back before any child
# (the shell asciinema records) could inherit it.
if locale.nl_langinfo(locale.CODESET).upper() not in ("UTF-8", "UTF8"):
    saved = os.environ.get("LOCPATH")
    os.environ["LOCPATH"] = os.path.join(root, "locale")
    try:
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
    except locale.Error:
        pass  # asciinema itself then names the encoding problem
    if saved is None:
        del os.environ["LOCPATH"]
    else:
        os.environ["LOCPATH"] = saved
sys.argv[0] = "asciinema"
runpy.run_module("asciinema", run_name="__main__", alter_sys=True)
EOF
}

input_hash() {
  {
    echo "$BUNDLE_FORMAT $BUNDLE_ROOT $ASCIINEMA_SHA256 $PYTHON_VERSION"
    sha256sum "$HOST_TMUX" "$HOST_PYTHON"
    find -L "$HOST_LOCALE/" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
    shared_libs | xargs -r sha256sum
    # A listing (path, size, mtime) is enough to notice a python upgrade, without hashing 50 MB.
    find "$PYTHON_STDLIB" -path "$PYTHON_STDLIB/site-packages" -prune -o \
      -path "$PYTHON_STDLIB/dist-packages" -prune -o -type f -printf '%P %s %T@\n' | LC_ALL=C sort
    local name f
    for name in "${TERMINFO_NAMES[@]}"; do f=$(terminfo_file "$name") && sha256sum "$f"; done
    tmux_wrapper; asciinema_wrapper; asciinema_main
  } | sha256sum | cut -d' ' -f1
}

bundle_check_host() {
  # Sets TMUX_VERSION and ASCIINEMA_VERSION from the bundle at $1, run on the host.
  local dir=$1
  TMUX_VERSION=$(HARBOR_TMUX_ROOT="$dir" timeout 20 "$dir/bin/tmux" -V 2>&1) \
    || die "bundled tmux does not run on the host ($TMUX_VERSION): check HOST_TMUX=$HOST_TMUX"
  ASCIINEMA_VERSION=$(HARBOR_TOOLS_ROOT="$dir" timeout 30 "$dir/bin/asciinema" --version 2>&1) \
    || die "bundled asciinema does not run on the host ($ASCIINEMA_VERSION): check HOST_PYTHON=$HOST_PYTHON"
  [[ "$TMUX_VERSION" == *tmux* ]] || die "bundled tmux -V printed '$TMUX_VERSION': check HOST_TMUX=$HOST_TMUX"
  [[ "$ASCIINEMA_VERSION" =~ ^asciinema\ 2\.4\.0 ]] \
    || die "bundled asciinema --version printed '$ASCIINEMA_VERSION', expected asciinema 2.4.0"
}

canary_check() {
  # The bundle at $1, mounted read-only into CANARY_IMAGE with no network, must do everything
  # Terminus-2 does with it. Dies with the failing step.
  local dir=$1 out checks
  log "validating inside $CANARY_IMAGE (no network, bundle mounted read-only)"
  # Mounted exactly as the Harbor compose override mounts it; checks run under `bash --login`
  # because that is what Terminus-2's pane runs, and Debian's /etc/profile resets PATH.
  CANARY=$(docker run -d --network none --entrypoint sh \
    -v "$dir:$BUNDLE_ROOT:ro" -v "$dir/bin/tmux:/usr/bin/tmux:ro" \
    -v "$dir/bin/asciinema:/usr/bin/asciinema:ro" \
    "$CANARY_IMAGE" -c 'sleep 600') || die "cannot start a container from CANARY_IMAGE=$CANARY_IMAGE"
  # shellcheck disable=SC2016  # expanded inside the container
  checks='
set -eu
export TERM=xterm-256color SHELL=/bin/bash
tmux -V >/dev/null
asciinema --version >/dev/null
tmux new-session -x 160 -y 40 -d -s canary "bash --login"
# The marker carries a non-ASCII character: tmux must read and return the pane as UTF-8.
tmux send-keys -t canary "printf \"CANARY_\\303\\251_%s\\n\" \$((6*7))" Enter
mark="^CANARY_$(printf "\303\251")_42"
for _ in $(seq 1 50); do tmux capture-pane -p -t canary | grep -q "$mark" && break; sleep 0.2; done
tmux capture-pane -p -t canary | grep -q "$mark" || { echo "capture-pane never showed the UTF-8 marker" >&2; exit 3; }
tmux send-keys -t canary "asciinema rec --stdin -q -c \"echo CAST_\\\$((6*7)); env | grep ^PYTHON || echo NO_PYTHON_ENV\" /tmp/canary.cast" Enter
for _ in $(seq 1 75); do [ -s /tmp/canary.cast ] && grep -q NO_PYTHON_ENV /tmp/canary.cast && break; sleep 0.2; done
head -n1 /tmp/canary.cast | grep -q "\"version\": 2" || { echo "asciinema rec wrote no v2 cast" >&2; exit 4; }
grep -q "CAST_42" /tmp/canary.cast || { echo "cast lacks the recorded output" >&2; exit 5; }
grep -q NO_PYTHON_ENV /tmp/canary.cast || { echo "PYTHON* variables leak into recorded shells" >&2; exit 6; }
tmux kill-server
'
  out=$(timeout 120 docker exec "$CANARY" bash --login -c "$checks" 2>&1) \
    || die "bundle failed inside CANARY_IMAGE=$CANARY_IMAGE: $(tail -n1 <<<"$out")"
  log "canary check passed: tmux session, capture-pane and asciinema rec work in $CANARY_IMAGE"
  docker rm -f "$CANARY" >/dev/null 2>&1 || true
  CANARY=""
}

json_out() {
  jq -cn --arg tools_dir "$TOOLS_DIR" --arg tv "$1" --arg av "$2" --arg h "$3" \
    --argjson rebuilt "$4" --arg canary "$5" --argjson validated "$6" \
    '{tools_dir: $tools_dir, tmux_version: $tv, asciinema_version: $av, input_hash: $h,
      rebuilt: $rebuilt, canary_image: $canary, canary_validated: $validated}'
}

command -v jq >/dev/null || die "jq not found on this host: install jq"
command -v ldd >/dev/null || die "ldd not found on this host: install libc-bin"
CANARY=""
STAGE=""
cleanup() {
  if [[ -n "$CANARY" ]]; then docker rm -f "$CANARY" >/dev/null 2>&1 || true; fi
  if [[ -n "$STAGE" ]]; then rm -rf "$STAGE" "$TOOLS_DIR.old.$$"; fi
}
trap cleanup EXIT
HASH=$(input_hash)
STAMP="$TOOLS_DIR/.benchstack-stamp"

if [[ "$FORCE_REBUILD" != 1 && -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]]; then
  log "bundle at $TOOLS_DIR is up to date (input hash $HASH): not rebuilt"
  bundle_check_host "$TOOLS_DIR"
  # The canary result of the build that produced this bundle still holds (same inputs); a new
  # canary image is checked against the bundle as it stands, without a rebuild.
  prev_canary=$(cat "$TOOLS_DIR/.benchstack-canary" 2>/dev/null || true)
  if [[ -n "$CANARY_IMAGE" && "$CANARY_IMAGE" != "$prev_canary" ]]; then
    docker image inspect "$CANARY_IMAGE" >/dev/null 2>&1 \
      || die "CANARY_IMAGE=$CANARY_IMAGE is not present in the Docker engine: pull it or change CANARY_IMAGE"
    canary_check "$TOOLS_DIR"
    echo "$CANARY_IMAGE" >"$TOOLS_DIR/.benchstack-canary"
    prev_canary=$CANARY_IMAGE
  fi
  json_out "$TMUX_VERSION" "$ASCIINEMA_VERSION" "$HASH" false "$prev_canary" \
    "$([[ -n "$prev_canary" ]] && echo true || echo false)"
  exit 0
fi

# Never replace a directory that is not a bundle of ours (TOOLS_DIR=/opt would lose /opt).
if [[ -e "$TOOLS_DIR" && ! -f "$STAMP" ]] && [[ -n "$(ls -A "$TOOLS_DIR" 2>/dev/null || echo x)" ]]; then
  die "TOOLS_DIR=$TOOLS_DIR exists and is not a benchstack tool bundle: choose a new or empty directory"
fi
if [[ -n "$CANARY_IMAGE" ]]; then
  docker image inspect "$CANARY_IMAGE" >/dev/null 2>&1 \
    || die "CANARY_IMAGE=$CANARY_IMAGE is not present in the Docker engine: pull it or change CANARY_IMAGE"
fi

mkdir -p "$(dirname "$TOOLS_DIR")" 2>/dev/null \
  || die "cannot create the parent of TOOLS_DIR=$TOOLS_DIR: choose a writable TOOLS_DIR"
STAGE=$(mktemp -d "$TOOLS_DIR.stage.XXXXXX") || die "cannot write next to TOOLS_DIR=$TOOLS_DIR: choose a writable TOOLS_DIR"

log "building $TOOLS_DIR from tmux $HOST_TMUX and $PYTHON_VERSION $HOST_PYTHON"
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/python/bin" "$STAGE/python/lib/$PYTHON_VERSION" \
  "$STAGE/python/site-packages" "$STAGE/terminfo" "$STAGE/locale"
cp -RL "$HOST_LOCALE" "$STAGE/locale/C.utf8"
install -m 755 "$HOST_TMUX" "$STAGE/bin/tmux.real"
install -m 755 "$HOST_PYTHON" "$STAGE/python/bin/python3"
# Keep __pycache__: the bundle is mounted read-only, so python could never write it there.
tar -C "$PYTHON_STDLIB" --exclude=./site-packages --exclude=./dist-packages --exclude=./test \
  --exclude=./idlelib --exclude=./tkinter --exclude=./turtledemo -cf - . \
  | tar -C "$STAGE/python/lib/$PYTHON_VERSION" -xf -
while IFS= read -r lib; do
  install -m 644 "$lib" "$STAGE/lib/$(basename "$lib")"
done < <(shared_libs)
[[ -f "$STAGE/lib/ld-linux-x86-64.so.2" ]] || die "no ld-linux-x86-64.so.2 in ldd output of $HOST_TMUX: only x86-64 glibc hosts are supported"
chmod 755 "$STAGE/lib/ld-linux-x86-64.so.2"
for name in "${TERMINFO_NAMES[@]}"; do
  if f=$(terminfo_file "$name"); then
    mkdir -p "$STAGE/terminfo/${name:0:1}" && install -m 644 "$f" "$STAGE/terminfo/${name:0:1}/$name"
  fi
done

if [[ -z "$ASCIINEMA_WHEEL" ]]; then
  log "downloading asciinema 2.4.0 with $HOST_PYTHON -m pip"
  timeout 300 "$HOST_PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/.wheel" \
    asciinema==2.4.0 >&2 \
    || die "pip download of asciinema==2.4.0 failed: give a local wheel in ASCIINEMA_WHEEL"
  ASCIINEMA_WHEEL=$(ls "$STAGE"/.wheel/asciinema-2.4.0-*.whl)
fi
[[ -f "$ASCIINEMA_WHEEL" ]] || die "ASCIINEMA_WHEEL=$ASCIINEMA_WHEEL does not exist: give the path of asciinema-2.4.0-py3-none-any.whl"
got=$(sha256sum "$ASCIINEMA_WHEEL" | cut -d' ' -f1)
[[ "$got" == "$ASCIINEMA_SHA256" ]] \
  || die "asciinema wheel $ASCIINEMA_WHEEL has sha256 $got, expected $ASCIINEMA_SHA256 (ASCIINEMA_SHA256): use the genuine asciinema 2.4.0 wheel"
"$HOST_PYTHON" -m zipfile -e "$ASCIINEMA_WHEEL" "$STAGE/python/site-packages"
"$HOST_PYTHON" -m compileall -q "$STAGE/python/site-packages" >/dev/null
rm -rf "$STAGE/.wheel"

tmux_wrapper >"$STAGE/bin/tmux"
asciinema_wrapper >"$STAGE/bin/asciinema"
asciinema_main >"$STAGE/python/asciinema_main.py"
chmod 755 "$STAGE/bin/tmux" "$STAGE/bin/asciinema"

bundle_check_host "$STAGE"
log "host check: $TMUX_VERSION / $ASCIINEMA_VERSION"

validated=false
if [[ -n "$CANARY_IMAGE" ]]; then canary_check "$STAGE"; validated=true; fi

echo "$HASH" >"$STAGE/.benchstack-stamp"
if [[ "$validated" == true ]]; then echo "$CANARY_IMAGE" >"$STAGE/.benchstack-canary"; fi
chmod 755 "$STAGE"
# Swap in the checked bundle; running containers keep the old inode they mounted.
if [[ -e "$TOOLS_DIR" ]]; then mv "$TOOLS_DIR" "$TOOLS_DIR.old.$$"; fi
mv "$STAGE" "$TOOLS_DIR"
log "bundle ready at $TOOLS_DIR"
json_out "$TMUX_VERSION" "$ASCIINEMA_VERSION" "$HASH" true "$CANARY_IMAGE" "$validated"
