"""The machine setup's defaults as the tests read them: setup/defaults.env (the operator's) and
tests/env/defaults.env (the tests' own), each overridden by an environment variable of the same
name, as setup/lib.sh does for the scripts; and where the team's shared material is."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS_FILES = (ROOT / "setup" / "defaults.env", ROOT / "tests" / "env" / "defaults.env")
# The team's read-only material beside the clone (the dev set, the reference, the engine's
# vendored sources): the one place the tests name it.
SHARED = ROOT.parent / "shared"


def link_shared(project: Path) -> None:
    """A copy of the project finds the shared material where a clone does, beside it (the stack
    files and the engine build point at ../shared)."""
    beside = project.parent / SHARED.name
    if not beside.exists():
        beside.symlink_to(SHARED)


def _defaults() -> dict[str, str]:
    values = {}
    for path in DEFAULTS_FILES:
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, _, value = line.partition("=")
                values.setdefault(key, value)
    return values


DEFAULTS = _defaults()


def setting(key: str) -> str:
    """`BENCHSTACK_<key>` from the environment, else from the defaults files."""
    name = f"BENCHSTACK_{key}"
    if name not in DEFAULTS:
        raise KeyError(f"{name} is not a default of {' or '.join(map(str, DEFAULTS_FILES))}")
    return os.environ.get(name) or DEFAULTS[name]
