"""How Harbor is installed and run on a host: where its venv is, and the environment it runs in.

The install (harbor_install.py) makes the venv here; the program asks `harbor_bin` for the path
it declares before the install has run; the preflight and the launch run Harbor in `harbor_env`.
"""

from __future__ import annotations

from .step import child_env


def venv_dir(workspace: str, version: str) -> str:
    return f"{workspace.rstrip('/')}/harbor-{version}"


def harbor_bin(workspace: str, version: str) -> str:
    """The harbor executable the install makes (known from the config before it runs)."""
    return f"{venv_dir(workspace, version)}/bin/harbor"


def compose_flags(compose_path: str) -> list[str]:
    """`harbor run`'s compose override flag; none for trials as pods (Harbor refuses it there)."""
    return ["--extra-docker-compose", compose_path] if compose_path else []


def harbor_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment Harbor (and its venv's pip) runs in: no telemetry."""
    return child_env({"HARBOR_TELEMETRY": "0", **(extra or {})})
