"""A job dir (or one of its files) on a remote Harbor host, copied to this machine over SSH: the
one copy that both the program's rerun audit (components/seam/audit.py, at program time) and the
audit's `--stack` (audit/read/remote.py) make, so that a job is audited here from what its host
holds.

The copy lands in `~/.cache/benchstack/jobs/<host>/<name>` (XDG_CACHE_HOME honoured). A copy its
caller calls final (a finished job, which no longer changes) gets the mark `.copied` and is not
made again; any other is made afresh at every call. The host only runs `tar -czf -` (read-only
there). How it is reached is the stack's own answer (`Host.ssh_access()`, also the `harbor_ssh`
stack output): the target, the port and the seam's ssh options, host-key policy included; this
module decides no policy. The key is the ssh agent's or a `-i` file among the options, or the
identity file a caller gives for the call (the program's secret key, which its bash writes from
standard input to a private temp file).

Standard library only, and imports nothing of the project (a contract); runs as a script too,
printing the copy's path (the program runs it that way with its own python, in an invoke):

    python3 -I job_copy.py '{"host": H, "access": {...}, "path": P, "final": true}' [IDENTITY]
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

FINAL_MARK = ".copied"
COPY_TIMEOUT_S = 3600


class CopyError(ValueError):
    """The copy could not be made: one line naming the host and why."""


def cache_dir(host: str, path: str) -> Path:
    """Where the copy of `path` (a job dir, or a file) of `host` lands here."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "benchstack" / "jobs" / host / PurePosixPath(path).name


def ssh_argv(access: Mapping, remote: str, identity: str | None = None) -> list[str]:
    """The local ssh call that runs `remote` on the host `access` describes."""
    try:
        options = [str(o) for o in access["options"]]
        port, target = str(int(access["port"])), str(access["target"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CopyError(f"the host's ssh access is not target, port and options ({exc!r}): run "
                        "`pulumi up` with this version of benchstack") from None
    key = ["-i", identity] if identity else []
    return ["ssh", "-n", *options, *key, "-p", port, target, remote]


def _fetch(host: str, access: Mapping, path: str, into: Path, identity: str | None) -> None:
    """`path` of the host unpacked into the empty dir `into`, or a CopyError saying why not."""
    parent, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
    ssh = ssh_argv(access, f"tar -C {shlex.quote(parent)} -czf - -- {shlex.quote(name)}",
                   identity)
    said = into / ".ssh-stderr"
    pipe = (f"set -o pipefail; {shlex.join(ssh)} 2>{shlex.quote(str(said))} | "
            f"tar -xzf - -C {shlex.quote(str(into))}")
    try:
        proc = subprocess.run(["bash", "-c", pipe], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=COPY_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise CopyError(f"copying {path} from the Harbor host {host} took over "
                        f"{COPY_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        # ssh's own last words (unreachable, refused key or login), else tar's.
        ssh_said = said.read_text(errors="replace") if said.is_file() else ""
        lines = [ln for ln in ssh_said.splitlines() if ln.strip()] or [
            ln for ln in proc.stderr.splitlines() if ln.strip()]
        why = lines[-1].strip() if lines else f"exit {proc.returncode}"
        raise CopyError(f"could not copy {path} from the Harbor host {host} "
                        f"({access.get('target')}): {why}")


def _replace(dest: Path, got: Path) -> None:
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    elif dest.exists() or dest.is_symlink():
        dest.unlink()
    got.rename(dest)


def copy(
    host: str, access: Mapping, path: str, *, final: bool | Callable[[Path], bool],
    identity: str | None = None, dest: Path | None = None,
) -> Path:
    """The local copy of `path` (a dir or a file) on the host `host`: at `dest`, by default
    `cache_dir(host, path)`. `final` (or `final(copy)`, asked of the new copy): the copy is
    final and will not be made again."""
    dest = dest or cache_dir(host, path)
    if (dest / FINAL_MARK).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    name = PurePosixPath(path).name
    print(f"copying {host}:{path} to {dest}", file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))
    try:
        _fetch(host, access, path, scratch, identity)
        _replace(dest, scratch / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if dest.is_dir() and (final(dest) if callable(final) else final):
        (dest / FINAL_MARK).touch()
    return dest


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: job_copy.py SPEC_JSON [IDENTITY_FILE]", file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    try:
        got = copy(spec["host"], spec["access"], spec["path"], final=bool(spec["final"]),
                   identity=argv[1] if len(argv) == 2 else None,
                   dest=Path(spec["dest"]) if spec.get("dest") else None)
    except CopyError as exc:
        print(f"job_copy: {exc}", file=sys.stderr)
        return 1
    print(got)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
