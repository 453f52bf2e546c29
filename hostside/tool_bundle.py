"""ToolBundle on the host: the read-only tmux + python + asciinema bundle that task containers
mount, so Terminus-2's setup finds both tools and downloads nothing (seed: "Prepare tmux and
asciinema for the task containers").

The bundle is the host's tmux and python, run through the bundle's own dynamic loader and
libraries (so the image's libc does not matter), the asciinema 2.4.0 wheel (sha256-checked), the
host's glibc C.UTF-8 locale for images without locale data (musl-based or static ones), and
terminfo entries. Every file in it is readable, and every program executable, by any uid: a
task image may run as any USER.

create is idempotent: the bundle carries a stamp with the hash of every input; when it matches,
nothing is rebuilt (the host check still runs, and a new canary image is checked against the
bundle as it stands). A rebuild is staged beside `tools_dir` and swapped in only after it passed
every check (on the host, and inside `canary_image` when given), so a failure leaves the
previous bundle (or no bundle) as it was. Running containers keep the old tree they mounted.
delete removes only a directory that carries the stamp.

Outputs: create: tools_dir, tmux_version, asciinema_version, input_hash, rebuilt, canary_image
(the image the bundle was validated in, "" if none), canary_validated; delete: removed,
tools_dir.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .step import HostError, emit, log, verb
from .step import run as _run

MODULE = "tool_bundle"
# Bumped whenever the bundle layout, its modes or the wrappers change, so old bundles are rebuilt.
BUNDLE_FORMAT = "benchstack-tool-bundle-5"
ASCIINEMA = "asciinema==2.4.0"
TERMINFO_NAMES = ("xterm", "xterm-256color", "xterm-color", "screen", "screen-256color", "tmux",
                  "tmux-256color", "linux", "vt100", "dumb")
TERMINFO_DIRS = ("/etc/terminfo", "/lib/terminfo", "/usr/share/terminfo")
LOCALES = ("/usr/lib/locale/C.utf8", "/usr/lib/locale/C.UTF-8")
STDLIB_SKIP = ("site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo")
STAMP = ".benchstack-stamp"
CANARY_RECORD = ".benchstack-canary"
LOADER = "ld-linux-x86-64.so.2"


@dataclass(frozen=True)
class Inputs:
    tools_dir: str
    asciinema_sha256: str
    # Where containers mount the bundle; baked into the wrappers.
    bundle_root: str
    # An image without tmux and python to validate in; None: the host check only.
    canary_image: str | None
    # What to bundle; None: found on this host (tmux on PATH; /usr/bin/python3, else python3 on
    # PATH; glibc's C.utf8 locale).
    host_tmux: str | None
    host_python: str | None
    host_locale: str | None
    # A local asciinema 2.4.0 wheel (air-gapped hosts); None: `host_python -m pip download` it.
    asciinema_wheel: str | None


@dataclass(frozen=True)
class DeleteInputs:
    tools_dir: str


def tmux_wrapper(bundle_root: str) -> str:
    return f"""#!/bin/sh
# benchstack tool bundle: host tmux run through the bundle's own loader and libraries.
set -eu
bundle_root=${{HARBOR_TMUX_ROOT:-{bundle_root}}}
# Appended after the image's own terminfo (empty entry = system default) for images without it.
export TERMINFO_DIRS="${{TERMINFO_DIRS:-}}:$bundle_root/terminfo"
# tmux will not start without a UTF-8 LC_CTYPE. An image with no glibc locale data (musl,
# static) gets the bundle's C.UTF-8; tmux's shells inherit LOCPATH, harmless there (musl ignores
# it, a glibc program has no locale data of its own). An image with locale data keeps using it:
# LOCPATH would hide its locale-archive from every program run in the panes.
if [ -z "${{LOCPATH:-}}" ] && [ ! -e /usr/lib/locale/locale-archive ] \\
  && [ ! -e /usr/lib/locale/C.utf8/LC_CTYPE ] && [ ! -e /usr/lib/locale/C.UTF-8/LC_CTYPE ]; then
  export LOCPATH="$bundle_root/locale"
fi
exec "$bundle_root/lib/{LOADER}" --library-path "$bundle_root/lib" --argv0 tmux \\
  "$bundle_root/bin/tmux.real" "$@"
"""


def asciinema_wrapper(bundle_root: str) -> str:
    # -I instead of the seed's exported PYTHONHOME/PYTHONPATH: asciinema rec runs the agent's
    # shell as its child, and inherited PYTHONHOME would break every python the agent starts.
    return f"""#!/bin/sh
# benchstack tool bundle: asciinema on the bundle's python, loader and libraries.
set -eu
bundle_root=${{HARBOR_TOOLS_ROOT:-{bundle_root}}}
exec "$bundle_root/lib/{LOADER}" --library-path "$bundle_root/lib" \\
  "$bundle_root/python/bin/python3" -I "$bundle_root/python/asciinema_main.py" "$@"
"""


ASCIINEMA_MAIN = '''"""benchstack tool bundle: asciinema from the bundle's site-packages."""
import locale
import os
import runpy
import sys
import uuid

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
# asciinema writes an install id under its config home ($HOME/.config/asciinema) at every start,
# and stops when it cannot: a task image's user may have no writable home (USER 1000:1000 with no
# passwd entry gets HOME=/). Its config then gets a throwaway id (only uploads use it), in a copy
# of the environment: the shell asciinema records inherits nothing.
import asciinema.config as config

_load = config.load


def load(env=None):
    env = dict(os.environ if env is None else env)
    if not any(env.get(k) for k in ("ASCIINEMA_CONFIG_HOME", "XDG_CONFIG_HOME", "HOME")):
        env["ASCIINEMA_CONFIG_HOME"] = os.devnull
    try:
        return _load(env)
    except OSError:
        env["ASCIINEMA_INSTALL_ID"] = str(uuid.uuid4())
        return _load(env)


config.load = load
sys.argv[0] = "asciinema"
runpy.run_module("asciinema", run_name="__main__", alter_sys=True)
'''

# Shell helpers for the checks below and the tests' own sessions. A pane or a cast is waited for
# against a deadline (bash's SECONDS), not a count of short sleeps: on a loaded host tmux and
# asciinema start seconds late, and a check that reads too early fails there and passes elsewhere.
SHELL_WAITS = r'''
fail() { echo "$1" >&2; exit "$2"; }
wait_until() {  # wait_until SECONDS COMMAND...: true once COMMAND is, false at the deadline
  # SECONDS counts whole seconds: one more makes the wait at least the time asked, never less.
  local deadline=$((SECONDS + $1 + 1)); shift
  until "$@"; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 0.2; done
}
'''

# What Terminus-2 does with the bundle, inside the canary (sh from the image, under `bash
# --login` as Terminus-2's pane runs, because Debian's /etc/profile resets PATH). The marker
# carries a non-ASCII character: tmux must read and return the pane as UTF-8.
CANARY_CHECKS = SHELL_WAITS + r'''
set -eu
export TERM=xterm-256color SHELL=/bin/bash
tmux -V >/dev/null
asciinema --version >/dev/null
tmux new-session -x 160 -y 40 -d -s canary "bash --login"
tmux send-keys -t canary "printf \"CANARY_\\303\\251_%s\\n\" \$((6*7))" Enter
mark="^CANARY_$(printf "\303\251")_42"
shows() { tmux capture-pane -p -t canary | grep -q "$mark"; }
wait_until 45 shows || fail "capture-pane showed no UTF-8 marker within 45 s" 3
cast=/tmp/canary.cast
shell="echo CAST_\\\$((6*7)); env | grep ^PYTHON || echo NO_PYTHON_ENV"
tmux send-keys -t canary "asciinema rec --stdin -q -c \"$shell\" $cast" Enter
recorded() { [ -s $cast ] && grep -q NO_PYTHON_ENV $cast; }
wait_until 45 recorded || true  # the reads below name what the cast lacks
head -n1 $cast | grep -q "\"version\": 2" || fail "asciinema rec wrote no v2 cast" 4
grep -q "CAST_42" $cast || fail "cast lacks the recorded output" 5
grep -q NO_PYTHON_ENV $cast || fail "PYTHON* variables leak into recorded shells" 6
tmux kill-server
'''




def _last_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[-1]


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Sources:
    """What the bundle is made of, as found on this host."""

    tmux: str
    python: str
    python_version: str  # "python3.11"
    stdlib: str
    locale: str
    libs: tuple[str, ...]
    terminfo: tuple[tuple[str, str], ...]  # (name, file)


def _executable(given: str | None, found: str | None, what: str, install: str) -> str:
    if given is None and found is None:
        raise HostError(f"{what} not found on this host: {install}")
    path = os.path.realpath(given if given is not None else str(found))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise HostError(f"host_{what}={given or found} is not an executable file: {install} or "
                        f"point host_{what} at its binary")
    return path


def ldd_libs(binaries: list[str]) -> tuple[str, ...]:
    """Every library the loader maps for these binaries, as `ldd` lists them."""
    found: set[str] = set()
    for binary in binaries:
        out = _run(["ldd", binary]).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[1] == "=>" and fields[2].startswith("/"):
                found.add(fields[2])
            elif fields and fields[0].startswith("/"):
                found.add(fields[0])
    return tuple(sorted(found))


def terminfo_files() -> tuple[tuple[str, str], ...]:
    found = []
    for name in TERMINFO_NAMES:
        for directory in TERMINFO_DIRS:
            path = os.path.join(directory, name[0], name)
            if os.path.isfile(path):
                found.append((name, path))
                break
    return tuple(found)


def find_host(inputs: Inputs) -> Sources:
    tmux = _executable(inputs.host_tmux, shutil.which("tmux"), "tmux", "install tmux")
    if not is_elf(tmux):
        raise HostError(f"host_tmux={tmux} is not an ELF binary: point host_tmux at the real "
                        "tmux")
    default_python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
        else shutil.which("python3")
    python = _executable(inputs.host_python, default_python, "python", "install python3")
    # A pyenv shim is a shell script that would not run inside a container.
    if not is_elf(python):
        raise HostError(f"host_python={python} is not an ELF binary (a shim?): point "
                        "host_python at the real interpreter, e.g. /usr/bin/python3")
    locale = inputs.host_locale or next((p for p in LOCALES if os.path.isdir(p)), LOCALES[1])
    # tmux needs a UTF-8 LC_CTYPE; musl and static images carry no glibc locale data for it.
    if not os.path.isfile(os.path.join(locale, "LC_CTYPE")):
        raise HostError(f"no glibc C.UTF-8 locale at host_locale={locale}: install libc-bin or "
                        "point host_locale at a C.utf8 directory")
    try:
        info = _run([python, "-c", "import sys, sysconfig; "
                     "print(f'python{sys.version_info[0]}.{sys.version_info[1]}'); "
                     "print(sysconfig.get_paths()['stdlib'])"], timeout=60)
    except (OSError, HostError):
        info = None
    if info is None or info.returncode != 0 or len(info.stdout.split("\n")) < 2:
        raise HostError(f"host_python={python} does not run: point host_python at a working "
                        "python3")
    version, stdlib = info.stdout.split("\n")[:2]
    if not os.path.isfile(os.path.join(stdlib, "os.py")):
        raise HostError(f"stdlib of {python} not found at {stdlib}: point host_python at a "
                        "complete python3 install")
    if shutil.which("ldd") is None:
        raise HostError("ldd not found on this host: install libc-bin")
    dynload = os.path.join(stdlib, "lib-dynload")
    extensions = sorted(str(p) for p in Path(dynload).rglob("*.so") if p.is_file())
    libs = ldd_libs([tmux, python, *extensions])
    return Sources(tmux=tmux, python=python, python_version=version, stdlib=stdlib, locale=locale,
                libs=libs, terminfo=terminfo_files())


def _files(root: str, *, follow: bool, skip: tuple[str, ...] = ()) -> Iterator[str]:
    """Every file under `root` (its path relative to root), sorted; `skip`: top-level names."""
    for top, dirs, files in os.walk(root, followlinks=follow):
        if top == root:
            dirs[:] = [d for d in dirs if d not in skip]
        dirs.sort()
        for name in sorted(files):
            yield os.path.relpath(os.path.join(top, name), root)


def input_hash(host: Sources, inputs: Inputs) -> str:
    digest = hashlib.sha256()

    def line(text: str) -> None:
        digest.update(text.encode() + b"\n")

    line(f"{BUNDLE_FORMAT} {inputs.bundle_root} {inputs.asciinema_sha256} "
         f"{host.python_version}")
    for path in (host.tmux, host.python, *host.libs):
        line(f"{file_digest(path)} {path}")
    for rel in _files(host.locale, follow=True):
        line(f"{file_digest(os.path.join(host.locale, rel))} locale/{rel}")
    # A listing (path, size, mtime) is enough to notice a python upgrade, without hashing 50 MB.
    for rel in _files(host.stdlib, follow=False, skip=("site-packages", "dist-packages")):
        st = os.lstat(os.path.join(host.stdlib, rel))
        line(f"{rel} {st.st_size} {st.st_mtime_ns}")
    for name, path in host.terminfo:
        line(f"{file_digest(path)} terminfo/{name}")
    for text in (tmux_wrapper(inputs.bundle_root), asciinema_wrapper(inputs.bundle_root),
                 ASCIINEMA_MAIN):
        line(text)
    return digest.hexdigest()


def check_on_host(bundle: str, host: Sources) -> tuple[str, str]:
    """The bundle at `bundle` run on the host: tmux's and asciinema's versions."""
    def version(root_var: str, tool: str, timeout: float) -> str:
        try:
            proc = subprocess.run(["env", f"{root_var}={bundle}", f"{bundle}/bin/{tool}",
                                   "--version" if tool == "asciinema" else "-V"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"!no answer within {timeout:g}s"
        return proc.stdout.strip() if proc.returncode == 0 else f"!{_last_line(proc.stdout)}"

    tmux = version("HARBOR_TMUX_ROOT", "tmux", 20)
    if tmux.startswith("!"):
        raise HostError(f"bundled tmux does not run on the host ({tmux[1:]}): check "
                        f"host_tmux={host.tmux}")
    asciinema = version("HARBOR_TOOLS_ROOT", "asciinema", 30)
    if asciinema.startswith("!"):
        raise HostError(f"bundled asciinema does not run on the host ({asciinema[1:]}): check "
                        f"host_python={host.python}")
    if "tmux" not in tmux:
        raise HostError(f"bundled tmux -V printed '{tmux}': check host_tmux={host.tmux}")
    if not asciinema.startswith("asciinema 2.4.0"):
        raise HostError(f"bundled asciinema --version printed '{asciinema}', expected "
                        "asciinema 2.4.0")
    return tmux, asciinema


def require_image(image: str) -> None:
    if _run(["docker", "image", "inspect", image]).returncode != 0:
        raise HostError(f"canary_image={image} is not present in the Docker engine: pull it or "
                        "change tools.canary_image")


def check_in_canary(bundle: str, image: str, bundle_root: str) -> None:
    """The bundle, mounted read-only into `image` with no network (as the Harbor compose
    override mounts it), does everything Terminus-2 does with it, as the image's own user."""
    log(MODULE, f"validating inside {image} (no network, bundle mounted read-only)")
    started = _run(["docker", "run", "-d", "--network", "none", "--entrypoint", "sh",
                    "-v", f"{bundle}:{bundle_root}:ro",
                    "-v", f"{bundle}/bin/tmux:/usr/bin/tmux:ro",
                    "-v", f"{bundle}/bin/asciinema:/usr/bin/asciinema:ro",
                    image, "-c", "sleep 600"])
    if started.returncode != 0:
        raise HostError(f"cannot start a container from canary_image={image} "
                        f"({_last_line(started.stderr)})")
    container = started.stdout.strip()
    try:
        try:
            proc = subprocess.run(["docker", "exec", container, "bash", "--login", "-c",
                                   CANARY_CHECKS], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=120)
            failed = _last_line(proc.stdout) if proc.returncode != 0 else ""
        except subprocess.TimeoutExpired:
            failed = "no answer within 120s"
        if failed:
            raise HostError(f"bundle failed inside canary_image={image}: {failed}")
        log(MODULE, "canary check passed: tmux session, capture-pane and asciinema rec work "
            f"in {image}")
    finally:
        _run(["docker", "rm", "-f", container])


def open_to_all(root: str) -> None:
    """Every directory and file readable, every program executable, by any uid: a task image may
    run as any USER (the bundle is mounted read-only, so this is its one chance). Only root can
    write. Symlinks keep theirs."""
    for top, _, files in os.walk(root):
        os.chmod(top, 0o755)
        for name in files:
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, 0o755 if mode & 0o111 else 0o644)


def _copy_stdlib(src: str, dst: str) -> None:
    # Keep __pycache__: the bundle is mounted read-only, so python could never write it there.
    def ignore(directory: str, names: list[str]) -> list[str]:
        return [n for n in names if n in STDLIB_SKIP] if directory == src else []

    shutil.copytree(src, dst, symlinks=True, ignore=ignore)


def _install(src: str, dst: str, mode: int) -> None:
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def _runs(argv: list[str]) -> bool:
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pip_of(python: str, scratch: str) -> list[str]:
    """A pip to download with: `python -m pip`, or, where that python has no pip (a server with
    only Debian's `python3`, as the seed installs it), the pip of a throwaway venv of it in
    `scratch` (ensurepip, from python3-venv)."""
    if _runs([python, "-m", "pip", "--version"]):
        return [python, "-m", "pip"]
    venv = os.path.join(scratch, "pip-venv")
    log(MODULE, f"{python} has no pip: downloading with the pip of a venv of it")
    if _runs([python, "-m", "venv", venv]):
        pip = [os.path.join(venv, "bin", "python"), "-m", "pip"]
        if _runs([*pip, "--version"]):
            return pip
    raise HostError(f"{python} has no pip and makes no venv with one: install python3-pip or "
                    "python3-venv on this host")


def fetch_wheel(inputs: Inputs, host: Sources, scratch: str) -> str:
    wheel = inputs.asciinema_wheel
    if wheel is None:
        log(MODULE, f"downloading {ASCIINEMA} with {host.python}'s pip")
        target = os.path.join(scratch, "wheel")
        pip = pip_of(host.python, scratch)
        try:
            proc = subprocess.run([*pip, "download", "-q", "--no-deps",
                                   "--only-binary=:all:", "-d", target, ASCIINEMA],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=300)
            why = _last_line(proc.stdout) if proc.returncode != 0 else ""
        except subprocess.TimeoutExpired:
            why = "no answer within 300s"
        found = glob.glob(os.path.join(target, "asciinema-2.4.0-*.whl"))
        if why or not found:
            raise HostError(f"pip download of {ASCIINEMA} failed ({why or 'no wheel'}): check "
                            "the host's pip index and proxy settings")
        wheel = found[0]
    if not os.path.isfile(wheel):
        raise HostError(f"asciinema_wheel={wheel} does not exist: give the path of "
                        "asciinema-2.4.0-py3-none-any.whl")
    got = file_digest(wheel)
    if got != inputs.asciinema_sha256:
        raise HostError(f"asciinema wheel {wheel} has sha256 {got}, expected "
                        f"{inputs.asciinema_sha256} (tools.asciinema_sha256): use the genuine "
                        "asciinema 2.4.0 wheel")
    return wheel


def build(stage: str, host: Sources, inputs: Inputs) -> None:
    log(MODULE, f"building {inputs.tools_dir} from tmux {host.tmux} and {host.python_version} "
        f"{host.python}")
    for rel in ("bin", "lib", "python/bin", "python/site-packages", "terminfo", "locale"):
        os.makedirs(os.path.join(stage, rel))
    shutil.copytree(host.locale, os.path.join(stage, "locale", "C.utf8"))
    _install(host.tmux, os.path.join(stage, "bin", "tmux.real"), 0o755)
    _install(host.python, os.path.join(stage, "python", "bin", "python3"), 0o755)
    _copy_stdlib(host.stdlib, os.path.join(stage, "python", "lib", host.python_version))
    for lib in host.libs:
        _install(lib, os.path.join(stage, "lib", os.path.basename(lib)), 0o644)
    loader = os.path.join(stage, "lib", LOADER)
    if not os.path.isfile(loader):
        raise HostError(f"no {LOADER} in ldd output of {host.tmux}: only x86-64 glibc hosts are "
                        "supported")
    os.chmod(loader, 0o755)
    for name, path in host.terminfo:
        os.makedirs(os.path.join(stage, "terminfo", name[0]), exist_ok=True)
        _install(path, os.path.join(stage, "terminfo", name[0], name), 0o644)
    site = os.path.join(stage, "python", "site-packages")
    with tempfile.TemporaryDirectory(prefix="benchstack-wheel-") as scratch:
        with zipfile.ZipFile(fetch_wheel(inputs, host, scratch)) as wheel:
            wheel.extractall(site)
    # Bytecode beside the sources, whatever this environment's PYTHONPYCACHEPREFIX says (which
    # would put it in a tree on this host that no task container sees).
    compiled = _run(["env", "-u", "PYTHONPYCACHEPREFIX", host.python, "-m", "compileall", "-q",
                     site], timeout=300)
    if compiled.returncode != 0:
        raise HostError(f"{host.python} -m compileall failed on the asciinema wheel "
                        f"({_last_line(compiled.stdout + compiled.stderr)})")
    for rel, text in (("bin/tmux", tmux_wrapper(inputs.bundle_root)),
                      ("bin/asciinema", asciinema_wrapper(inputs.bundle_root)),
                      ("python/asciinema_main.py", ASCIINEMA_MAIN)):
        Path(stage, rel).write_text(text)
    os.chmod(os.path.join(stage, "bin", "tmux"), 0o755)
    os.chmod(os.path.join(stage, "bin", "asciinema"), 0o755)
    open_to_all(stage)


def _check_inputs(inputs: Inputs) -> None:
    if not (len(inputs.asciinema_sha256) == 64
            and all(c in "0123456789abcdef" for c in inputs.asciinema_sha256)):
        raise HostError("tools.asciinema_sha256 must be 64 lowercase hex digits, got "
                        f"'{inputs.asciinema_sha256}'")
    for key in ("bundle_root", "tools_dir"):
        value = getattr(inputs, key)
        if not value.startswith("/"):
            raise HostError(f"{key} must be an absolute path, got '{value}'")


def _outputs(inputs: Inputs, versions: tuple[str, str], digest: str, rebuilt: bool,
             canary: str) -> dict:
    return {"tools_dir": inputs.tools_dir, "tmux_version": versions[0],
            "asciinema_version": versions[1], "input_hash": digest, "rebuilt": rebuilt,
            "canary_image": canary, "canary_validated": bool(canary)}


def _up_to_date(inputs: Inputs, host: Sources, tools: str, digest: str) -> None:
    """The bundle built from the same inputs, checked on the host again; a canary image it was
    not proven in yet is checked against it as it stands, without a rebuild (the canary result
    of the build that produced it still holds)."""
    log(MODULE, f"bundle at {tools} is up to date (input hash {digest}): not rebuilt")
    versions = check_on_host(tools, host)
    canary = inputs.canary_image or ""
    record = Path(tools, CANARY_RECORD)
    checked = record.read_text().strip() if record.is_file() else ""
    if canary and canary != checked:
        require_image(canary)
        check_in_canary(tools, canary, inputs.bundle_root)
        record.write_text(canary + "\n")
        record.chmod(0o644)
        checked = canary
    emit(_outputs(inputs, versions, digest, False, checked))


def _refuse_foreign(tools: str, stamp: str) -> None:
    """Never replace a directory that is not a bundle of ours (tools_dir=/opt would lose /opt)."""
    if not os.path.lexists(tools) or os.path.isfile(stamp):
        return
    try:
        empty = not os.listdir(tools)
    except OSError:
        empty = False
    if not empty:
        raise HostError(f"tools_dir={tools} exists and is not a benchstack tool bundle: "
                        "choose a new or empty directory")


def _stage_dir(tools: str) -> str:
    """A fresh stage beside tools_dir (the swap is a rename on one filesystem)."""
    parent = os.path.dirname(tools)
    try:
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix=os.path.basename(tools) + ".stage.", dir=parent)
    except OSError:
        raise HostError(f"cannot write next to tools_dir={tools}: choose a writable "
                        "tools_dir") from None


def _build_and_prove(stage: str, host: Sources, inputs: Inputs, digest: str) -> tuple[str, str]:
    """The bundle built in `stage`, checked on the host and in the canary, stamped, opened to
    every user; the host's tmux and asciinema versions."""
    canary = inputs.canary_image or ""
    build(stage, host, inputs)
    versions = check_on_host(stage, host)
    log(MODULE, f"host check: {versions[0]} / {versions[1]}")
    if canary:
        check_in_canary(stage, canary, inputs.bundle_root)
    Path(stage, STAMP).write_text(digest + "\n")
    if canary:
        Path(stage, CANARY_RECORD).write_text(canary + "\n")
    open_to_all(stage)
    return versions


def _swap_in(stage: str, tools: str, old: str) -> None:
    """The checked bundle in place of the old one; running containers keep the tree they
    mounted. A failed swap puts the old one back."""
    if os.path.lexists(tools):
        os.rename(tools, old)
    try:
        os.rename(stage, tools)
    except OSError:
        if os.path.lexists(old):
            os.rename(old, tools)
        raise


@verb(Inputs)
def create(inputs: Inputs) -> None:
    host = find_host(inputs)
    _check_inputs(inputs)
    tools = inputs.tools_dir.rstrip("/") or "/"
    digest = input_hash(host, inputs)
    stamp = os.path.join(tools, STAMP)
    if os.path.isfile(stamp) and Path(stamp).read_text().strip() == digest:
        _up_to_date(inputs, host, tools, digest)
        return
    _refuse_foreign(tools, stamp)
    if inputs.canary_image:
        require_image(inputs.canary_image)
    stage = _stage_dir(tools)
    old = f"{tools}.old.{os.getpid()}"
    try:
        versions = _build_and_prove(stage, host, inputs, digest)
        _swap_in(stage, tools, old)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    log(MODULE, f"bundle ready at {tools}")
    emit(_outputs(inputs, versions, digest, True, inputs.canary_image or ""))


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    tools = inputs.tools_dir.rstrip("/")
    if not tools.startswith("/"):
        raise HostError("tools_dir must be an absolute path other than /, got "
                        f"'{inputs.tools_dir}'")
    removed = False
    if os.path.isfile(os.path.join(tools, STAMP)):
        shutil.rmtree(tools)
        removed = True
        log(MODULE, f"removed {tools}")
    elif os.path.lexists(tools):
        raise HostError(f"tools_dir={tools} is not a benchstack tool bundle (no {STAMP}): left "
                        "alone, remove it by hand if intended")
    else:
        log(MODULE, f"{tools} is already gone")
    # Leftovers of an interrupted build (staging dirs) are ours too.
    for leftover in glob.glob(f"{glob.escape(tools)}.stage.*") + glob.glob(
            f"{glob.escape(tools)}.old.*"):
        shutil.rmtree(leftover, ignore_errors=True)
    emit({"removed": removed, "tools_dir": inputs.tools_dir})
