"""A cached venv on the host holding one pinned package, for the host programs that need more than
the standard library (readiness.py: httpx; s3_fetch.py: boto3), and how a step runs them there.

The venv is built once: into a temporary directory beside it, renamed into place only once the
package imports from it, so a half-built venv (an interrupted pip, a full disk) is never where
the next run would trust it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .step import HostError, log

# Bound on one program run after its own bounds, to kill it (and to say so).
KILL_GRACE_S = 10


def imports(python: str, module: str) -> bool:
    """Whether `python` exists and imports `module`, isolated as `run_program` runs it."""
    try:
        proc = subprocess.run([python, "-I", "-c", f"import {module}"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def pinned_venv(
    venv: Path, module: str, requirement: str, *, pip_timeout_s: int, pip_args: Sequence[str],
    step: str,
) -> str:
    """The python of `venv`, built first (with `requirement`) when `module` does not import from
    it. Build output goes to stderr: a step's stdout is its outputs."""
    python = str(venv / "bin" / "python")
    if imports(python, module):
        return python
    log(step, f"building the venv {venv} ({requirement})")
    venv.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{venv.name}.tmp.", dir=venv.parent))
    try:
        # This host's python3 (the one running the step) makes the venv.
        made = subprocess.run([sys.executable, "-m", "venv", str(staging)],
                              stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
        if made.returncode != 0:
            raise HostError("python3 -m venv failed: install the python3-venv package on this host")
        try:
            installed = subprocess.run(
                [str(staging / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                 *pip_args, requirement],
                stdin=subprocess.DEVNULL, stdout=sys.stderr, timeout=pip_timeout_s, check=False,
            ).returncode == 0
        except subprocess.TimeoutExpired:
            installed = False
        if not installed:
            raise HostError(f"pip could not install {requirement}: check the host's pip "
                            "index/proxy or set serving.pip_args")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # A renamed venv keeps a working bin/python (only its scripts' shebangs go stale, and
    # nothing here runs them).
    shutil.rmtree(venv, ignore_errors=True)
    staging.rename(venv)
    if not imports(python, module):
        raise HostError(f"venv {venv} is broken: remove it and re-run")
    return python


def python_with(
    module: str, given: str | None, *, key: str, venv: Path, requirement: str,
    pip_timeout_s: int, pip_args: Sequence[str], step: str,
) -> str:
    """The python a program needing `module` runs with: `given` (the config's `key`, a python
    that already imports it), or the pinned venv's."""
    if given is None:
        return pinned_venv(venv, module, requirement, pip_timeout_s=pip_timeout_s,
                           pip_args=pip_args, step=step)
    if not imports(given, module):
        raise HostError(f"{key} {given} cannot import {module}: unset it to use the venv")
    return given


def run_program(
    python: str, program: str, args: Sequence[str] = (), *, stdin: str | None = None,
    timeout_s: float | None = None,
) -> int:
    """Run the package's standalone `program` (a file beside this one) with `python`, isolated
    (`-I`: neither the package's directory nor the environment's PYTHON* settings reach it), its
    stdout and stderr the step's own: its last stdout line is the step's outputs, its last
    stderr line the reason it failed. Returns its exit code; -1 when it outlived `timeout_s`
    and was killed."""
    path = Path(__file__).with_name(program)
    proc = subprocess.Popen([python, "-I", str(path), *args], stdin=subprocess.PIPE)
    try:
        proc.communicate((stdin or "").encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return -1
    return proc.returncode
