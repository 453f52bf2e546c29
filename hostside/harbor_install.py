"""HarborJob install: Harbor in its own venv on the Harbor host, from a sha256-checked wheel.

Seed step "Install Harbor 0.21.0". Where the venv is and how Harbor runs: harbor.py.

create: a venv whose stamp names the same wheel hash is kept as is (idempotent); otherwise the
wheel (`wheel_path`, or `pip download` with `python`) is checked against `wheel_sha256`, installed
into a fresh venv by uv with the host's pip settings (uv_installer.py: seconds where pip takes
a minute; pip where the host's index has no uv), and `pip freeze` is saved beside the logs. A
failed install leaves no venv.
Outputs: harbor_bin, venv, python, version, wheel_sha256, freeze.

delete: removes the venv and the downloaded wheel; the freeze list stays with the logs (it says
what ran). Outputs: removed (list of paths).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from contracts import jobdir
from contracts.hostlayout import harbor_venv, venvs_dir

from .harbor import harbor_env
from .step import HostError, emit, log, verb
from .uv_installer import UV_VERSION, uv_command, uv_python

NAME = "harbor_install"
DOWNLOAD_TIMEOUT_S = 600
INSTALL_TIMEOUT_S = 1200
STAMP = ".benchstack-wheel-sha256"


def wheel_file(workspace: str, version: str) -> str:
    return f"{workspace.rstrip('/')}/wheels/harbor-{version}-py3-none-any.whl"


def freeze_file(workspace: str, version: str) -> str:
    return f"{jobdir.log_dir(workspace)}/harbor-{version}-freeze.txt"


@dataclass(frozen=True)
class Inputs:
    workspace: str
    version: str
    wheel_sha256: str
    # The interpreter for the venv, Python >= 3.12 (harbor.python).
    python: str
    # A wheel already on the host; None: `pip download` it.
    wheel_path: str | None
    # Packages Harbor imports only for some environments (the `kubernetes` client of its ack
    # environment), installed beside it; part of the stamp, so a changed pin installs again.
    extras: list[str]


@dataclass(frozen=True)
class DeleteInputs:
    workspace: str
    version: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(argv: list[str], timeout: float | None = None, env: dict[str, str] | None = None,
         **kwargs) -> subprocess.CompletedProcess:
    """A child with its output on our stderr (progress), as the step's own; `env`: variables
    beside Harbor's environment."""
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, env=harbor_env(env),
                              timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, stderr=str(exc))


def python_version(python: str) -> str:
    """`python`'s major.minor, checked to be >= 3.12."""
    if shutil.which(python) is None:
        raise HostError(f"harbor.python={python} not found on this host: point it at a "
                        "Python >= 3.12")
    probe = _run([python, "-c", 'import sys; print("%d.%d" % sys.version_info[:2])'],
                 capture_output=True, text=True, timeout=60)
    version = (probe.stdout or "").strip()
    if probe.returncode != 0 or not re.fullmatch(r"[0-9]+\.[0-9]+", version):
        raise HostError(f"harbor.python={python} does not run: point it at a working "
                        "Python >= 3.12")
    return version


@verb(Inputs)
def create(inputs: Inputs) -> None:
    version, want = inputs.version, inputs.wheel_sha256
    if not re.fullmatch(r"[0-9a-f]{64}", want):
        raise HostError(f"harbor.wheel_sha256 must be 64 lowercase hex digits, got '{want}'")
    pyver = python_version(inputs.python)
    major, minor = (int(part) for part in pyver.split("."))
    if (major, minor) < (3, 12):
        raise HostError(f"harbor.python={inputs.python} is Python {pyver}; Harbor {version} "
                        "needs >= 3.12: set harbor.python")

    venv = Path(harbor_venv(inputs.workspace, version))
    freeze = Path(freeze_file(inputs.workspace, version))
    stamp = venv / STAMP
    wheels = Path(wheel_file(inputs.workspace, version)).parent
    wheels.mkdir(parents=True, exist_ok=True)
    freeze.parent.mkdir(parents=True, exist_ok=True)
    outputs = {
        "harbor_bin": str(venv / "bin" / "harbor"), "venv": str(venv),
        "python": str(venv / "bin" / "python"), "version": version, "wheel_sha256": want,
        "freeze": str(freeze),
    }
    try:
        stamped = stamp.read_text().strip()
    except OSError:
        stamped = ""
    harbor = venv / "bin" / "harbor"
    stamp_text = "\n".join([want, *inputs.extras])
    if stamped == stamp_text and harbor.is_file() and os.access(harbor, os.X_OK):
        log(NAME, f"Harbor {version} already installed in {venv}")
        emit(outputs)
        return

    wheel = Path(inputs.wheel_path or wheel_file(inputs.workspace, version))
    if not inputs.wheel_path and not (wheel.is_file() and wheel.stat().st_size > 0):
        log(NAME, f"downloading harbor=={version}")
        done = _run([inputs.python, "-m", "pip", "download", "-q", "--no-deps",
                     "--only-binary=:all:", "-d", str(wheels), f"harbor=={version}"],
                    timeout=DOWNLOAD_TIMEOUT_S, stdout=2)
        if done.returncode != 0:
            raise HostError(f"pip could not download harbor=={version}: check the host's pip "
                            "index settings or set harbor.wheel_path")
    if not (wheel.is_file() and wheel.stat().st_size > 0):
        raise HostError(f"wheel {wheel} does not exist: give the path of the Harbor wheel "
                        "(harbor.wheel_path)")
    got = sha256_of(wheel)
    if got != want:
        raise HostError(f"wheel {wheel} has sha256 {got}, expected {want}: use the pinned wheel "
                        "or fix harbor.wheel_sha256")

    log(NAME, f"installing Harbor {version} into {venv} (Python {pyver})")
    # A venv without the stamp is half-built (an interrupted install): start over. On failure the
    # partial venv is removed, so the host is left as it was found.
    shutil.rmtree(venv, ignore_errors=True)
    try:
        # The hash in the requirement: uv checks it again, and the freeze records it.
        pinned = f"harbor @ {wheel.resolve().as_uri()}#sha256={want}"
        install(inputs.python, venv, pinned, freeze, inputs.extras, venvs_dir(inputs.workspace))
        stamp.write_text(stamp_text + "\n")
    except BaseException:
        shutil.rmtree(venv, ignore_errors=True)
        raise
    log(NAME, f"Harbor {version} ready; pip freeze saved to {freeze}")
    emit(outputs)


def install(python: str, venv: Path, pinned: str, freeze: Path, extras: list[str],
            venvs: str) -> None:
    # A venv of its own python with pip in it: the freeze below, and an operator's own pip.
    if _run([python, "-m", "venv", str(venv)], stdout=2).returncode != 0:
        raise HostError(f"could not create a venv with {python}: install its venv module")
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    packages = [pinned, *extras]
    uv = uv_python(venvs, step=NAME)
    if uv is not None:
        log(NAME, f"installing with uv {UV_VERSION}")
        argv, env = uv_command(uv, pip[0], packages)
    else:
        argv, env = [*pip, "install", "-q", "--disable-pip-version-check", *packages], {}
    if _run(argv, timeout=INSTALL_TIMEOUT_S, env=env, stdout=2).returncode != 0:
        raise HostError(f"could not install {' '.join(packages)} (see above): check the "
                        "host's pip index settings")
    harbor = venv / "bin" / "harbor"
    if _run([str(harbor), "--version"], capture_output=True, timeout=300).returncode != 0:
        raise HostError(f"the installed harbor does not run from {harbor}")
    with freeze.open("w") as out:
        if _run([*pip, "freeze", "--disable-pip-version-check"], stdout=out,
                timeout=300).returncode != 0:
            raise HostError(f"pip freeze failed in {venv}")


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    venv = Path(harbor_venv(inputs.workspace, inputs.version))
    wheel = Path(wheel_file(inputs.workspace, inputs.version))
    removed = []
    # Only a venv is removed: a directory of that name that is not one is someone else's.
    if (venv / "pyvenv.cfg").is_file():
        shutil.rmtree(venv)
        removed.append(str(venv))
    if wheel.is_file():
        wheel.unlink()
        removed.append(str(wheel))
    try:
        wheel.parent.rmdir()
    except OSError:
        pass
    log(f"{NAME}.delete", f"removed {' '.join(removed) or 'nothing'}")
    emit({"removed": removed})
