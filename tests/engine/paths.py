"""Where tests/env/engine/build.sh put the Pulumi engine (shared by the tests and inline.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

ENGINE_DIR = Path(os.environ.get("BENCHSTACK_ENGINE_DIR", "/var/lib/benchstack-engine"))


def engine_root() -> Path:
    """The build's root: `bin/pulumi` and `home/` (the tests' PULUMI_HOME) live under it."""
    return (ENGINE_DIR / "current").resolve()


def engine_status() -> dict:
    return json.loads((engine_root() / "status.json").read_text())
