"""How Harbor runs on a host: its compose flag and the environment it runs in.

Where its venv is belongs to contracts/hostlayout.py (the program declares the path before the
install, harbor_install.py, has made it); the preflight and the launch run Harbor in
`harbor_env`.
"""

from __future__ import annotations

from .step import child_env


def compose_flags(compose_path: str) -> list[str]:
    """`harbor run`'s compose override flag; none for trials as pods (Harbor refuses it there)."""
    return ["--extra-docker-compose", compose_path] if compose_path else []


def harbor_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment Harbor (and its venv's pip) runs in: no telemetry."""
    return child_env({"HARBOR_TELEMETRY": "0", **(extra or {})})
