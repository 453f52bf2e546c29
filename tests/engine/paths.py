"""Where setup/engine/build.sh put the Pulumi engine (shared by the tests and the benchmarks)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.machine import setting

ENGINE_DIR = Path(setting("ENGINE_DIR"))


def engine_root() -> Path:
    """The build's root: `bin/pulumi` and `home/` (the tests' PULUMI_HOME) live under it."""
    return (ENGINE_DIR / "current").resolve()


def engine_status() -> dict:
    return json.loads((engine_root() / "status.json").read_text())
