"""Provenance: the manifest from which a reader can repeat the run, beside the job's log.

create: the program's part (`facts`: pins, images, serving, stack; components/provenance.py)
plus what only the Harbor host has: the config Harbor resolved for the job (saved by the
preflight) and the compose override as written. Written atomically; kept on destroy, like the
results. Outputs: provenance_path, sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .step import HostError, emit, verb


@dataclass(frozen=True)
class Inputs:
    out: str
    facts: dict[str, Any]
    # The preflight's resolved-config file and the rendered compose override (None: not known).
    resolved_config: str | None
    compose_path: str | None


@verb(Inputs)
def create(inputs: Inputs) -> None:
    if not inputs.out.startswith("/"):
        raise HostError(f"out must be an absolute path, got '{inputs.out}'")
    if not inputs.facts:
        raise HostError("facts is empty: the component must pass it")
    manifest = dict(inputs.facts)
    manifest["created_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    resolved, compose = inputs.resolved_config, inputs.compose_path
    try:
        manifest["harbor_config"] = json.loads(Path(resolved).read_text()) if resolved else None
    except (OSError, ValueError) as exc:
        raise HostError(f"cannot read the resolved Harbor config {resolved}: {exc}") from None
    try:
        manifest["compose_override"] = Path(compose).read_text() if compose else None
    except OSError as exc:
        raise HostError(f"cannot read the compose override {compose}: {exc}") from None
    out = Path(inputs.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out)
    emit({"provenance_path": str(out), "sha256": hashlib.sha256(out.read_bytes()).hexdigest()})
