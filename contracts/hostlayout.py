"""Where benchstack keeps its own things on a host, and where a task container sees the tools.

The program declares these paths before any step has made them (a stack output, a step's input,
the compose override), and the host side makes and reads them: one owner for both.
"""

from __future__ import annotations

# `<workspace>/.benchstack` is benchstack's own on every host: the code (HostCode copies it),
# and the venvs steps cache beside it (readiness probe, model staging, Harbor's installer). The
# last delete on the host removes it.
OWN_DIR = ".benchstack"
CODE_DIR = f"{OWN_DIR}/code"

# Where the compose override mounts the tool bundle inside task containers: the bundle's
# wrappers default to this root, and the canary check mounts it there too.
TOOLS_MOUNT = "/opt/harbor-tools"


def venvs_dir(workspace: str) -> str:
    """Where steps cache their venvs on a host (the probe's, model staging's, the installer's):
    beside the code, in benchstack's own directory, which the host's last delete removes
    (components/host_code.py)."""
    return f"{workspace.rstrip('/')}/{OWN_DIR}"


def harbor_venv(workspace: str, version: str) -> str:
    """Harbor's venv on the Harbor host, one per version (the install makes it)."""
    return f"{workspace.rstrip('/')}/harbor-{version}"


def harbor_bin(workspace: str, version: str) -> str:
    """The harbor executable the install makes (known from the config before it runs)."""
    return f"{harbor_venv(workspace, version)}/bin/harbor"
