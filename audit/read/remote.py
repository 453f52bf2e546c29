"""A job dir (or file) on a remote Harbor host, copied here over SSH so that `--stack` audits it
from the operator's machine (found by the two-host rehearsal: the audit of a stack whose Harbor
host is not this machine stopped at "not readable here").

How the host is reached is the stack's own answer (the `harbor_ssh` output, contracts/outputs.py:
the target, the port and the ssh options every SSH path of the stack uses, host-key policy
included): this module runs the local `ssh` with them and never decides a policy itself. The key
comes from the ssh agent or `hosts[].ssh_key_path` (among the options), as for the stack's
Docker provider: the stack's secret never leaves the stack.

A copy lands in `~/.cache/benchstack/jobs/<host>/<name>` (XDG_CACHE_HOME honoured), the place the
program's own rerun audit uses; a finished job's copy is final (`.copied`, as there) and is not
copied again, an unfinished job's is made afresh at every call.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from contracts import jobdir

FINAL_MARK = ".copied"
COPY_TIMEOUT_S = 3600


class RemoteError(ValueError):
    """The copy could not be made: one line naming the host and why."""


def cache_dir(host: str, path: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "benchstack" / "jobs" / host / PurePosixPath(path).name


def _finished(copy: Path) -> bool:
    return jobdir.finished(jobdir.read_json(copy / jobdir.JOB_RESULT))


def _ssh_argv(access: dict, remote: str) -> list[str]:
    try:
        options = [str(o) for o in access["options"]]
        return ["ssh", "-n", *options, "-p", str(int(access["port"])), str(access["target"]),
                remote]
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteError(f"the stack's harbor_ssh output is not usable ({exc!r}): run `pulumi "
                          "up` with this version of benchstack") from None


def copy_here(host: str, access: dict, path: str) -> Path:
    """The local copy of `path` (a dir or a file) on the Harbor host `host`."""
    dest = cache_dir(host, path)
    if (dest / FINAL_MARK).is_file():
        return dest
    parent, name = str(PurePosixPath(path).parent), PurePosixPath(path).name
    ssh = _ssh_argv(access, f"tar -C {shlex.quote(parent)} -czf - -- {shlex.quote(name)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))
    said = scratch / ".ssh-stderr"
    pipe = (f"set -o pipefail; {shlex.join(ssh)} 2>{shlex.quote(str(said))} | "
            f"tar -xzf - -C {shlex.quote(str(scratch))}")
    try:
        try:
            proc = subprocess.run(["bash", "-c", pipe], stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=COPY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"copying {path} from the Harbor host {host} took over "
                              f"{COPY_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            # ssh's own last words (unreachable, refused key or login), else tar's.
            ssh_said = said.read_text(errors="replace") if said.is_file() else ""
            lines = [ln for ln in ssh_said.splitlines() if ln.strip()] or [
                ln for ln in proc.stderr.splitlines() if ln.strip()]
            why = lines[-1].strip() if lines else f"exit {proc.returncode}"
            raise RemoteError(f"could not copy {path} from the Harbor host {host} "
                              f"({access.get('target')}): {why}")
        got = scratch / name
        if dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        elif dest.exists():
            dest.unlink()
        got.rename(dest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if dest.is_dir() and _finished(dest):
        (dest / FINAL_MARK).touch()
    return dest
