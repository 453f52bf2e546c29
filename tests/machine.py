"""The machine setup's defaults as the tests read them: setup/defaults.env (the one place they
are written), each overridden by an environment variable of the same name, as setup/lib.sh
does for the scripts."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS_FILE = ROOT / "setup" / "defaults.env"


def _defaults() -> dict[str, str]:
    values = {}
    for line in DEFAULTS_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            values[key] = value
    return values


DEFAULTS = _defaults()


def setting(key: str) -> str:
    """`BENCHSTACK_<key>` from the environment, else from setup/defaults.env."""
    name = f"BENCHSTACK_{key}"
    if name not in DEFAULTS:
        raise KeyError(f"{name} is not a default of {DEFAULTS_FILE}")
    return os.environ.get(name) or DEFAULTS[name]
