"""uv as the installer of a big venv (Harbor's: about 90 packages), with the host's pip settings.

pip takes a minute or more to install Harbor on two cores, half of it compiling bytecode; uv
installs the same pins in seconds from its cache (the same place on the host for every
workspace, as pip's own cache is). uv comes from a pinned venv built by pip (pinned_venv.py), so
it reaches the index the way pip does on this host; where pip cannot get uv (a mirror without
it), the caller installs with pip as before, only slower.

uv reads no pip.conf and no PIP_* variable: the settings an operator gave pip for this host (an
index mirror, a proxy, a CA bundle; `pip config list`, files and environment alike) are handed
to uv as its own flags and the variables it reads.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .pinned_venv import pinned_venv
from .step import HostError, child_env, log

# The uv the installer venv pins.
UV_VERSION = "0.13.9"
VENV_NAME = f"installer-uv-{UV_VERSION}"
PIP_TIMEOUT_S = 300

# pip's settings that uv takes as a flag, one flag per value (a pip value may list several).
FLAGS = {
    "index-url": "--default-index",
    "extra-index-url": "--index",
    "find-links": "--find-links",
    "trusted-host": "--allow-insecure-host",
}
# pip's settings that uv takes from the environment.
VARIABLES = {"proxy": ("HTTPS_PROXY", "HTTP_PROXY"), "cert": ("SSL_CERT_FILE",)}
# Where pip looks last to first: its environment wins over its install section over its global.
SECTIONS = ("global", "install", ":env:")
LINE = re.compile(r"^(?P<section>[^.]+)\.(?P<key>[a-z-]+)='(?P<value>.*)'$")


def pip_settings(config_list: str) -> dict[str, str]:
    """The values pip would use for its install, from `pip config list` output."""
    found: dict[str, dict[str, str]] = {}
    for line in config_list.splitlines():
        match = LINE.match(line.strip())
        if match and match["section"] in SECTIONS:
            found.setdefault(match["section"], {})[match["key"]] = match["value"]
    settings: dict[str, str] = {}
    for section in SECTIONS:
        settings.update(found.get(section, {}))
    return settings


def uv_arguments(settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """uv's flags and environment for pip's `settings`."""
    flags: list[str] = []
    for key, flag in FLAGS.items():
        for value in settings.get(key, "").split():
            flags += [flag, value]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        flags.append("--no-index")
    env = {name: settings[key] for key, names in VARIABLES.items() if settings.get(key)
           for name in names}
    return flags, env


def uv_python(venvs_dir: str, *, step: str) -> str | None:
    """The python of the installer venv (built once), or None where pip cannot install uv."""
    try:
        return pinned_venv(Path(venvs_dir) / VENV_NAME, "uv", f"uv=={UV_VERSION}",
                           pip_timeout_s=PIP_TIMEOUT_S, pip_args=[], step=step)
    except HostError as exc:
        log(step, f"no uv here ({exc}): installing with pip, which takes longer")
        return None


def uv_command(uv: str, venv_python: str, packages: Sequence[str]
               ) -> tuple[list[str], dict[str, str]]:
    """The command line installing `packages` into the venv of `venv_python` with the installer
    venv's uv (`uv`: its python), and the variables it runs with: the host's pip settings, read
    from that venv's pip."""
    listed = subprocess.run([venv_python, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, env=child_env(), timeout=120,
                            check=False)
    flags, env = uv_arguments(pip_settings(listed.stdout))
    return [uv, "-m", "uv", "pip", "install", "--quiet", "--python", venv_python, *flags,
            *packages], env
