"""HarborJob configs: the rendered Harbor job config and Docker Compose override on the Harbor
host (seed: "Create the Harbor and Docker Compose configs"). The texts are rendered by
components/harbor_config.py; this only places them.

create: writes both files atomically (same text, same file: idempotent). Outputs: config_path,
compose_path, config_sha256, compose_sha256.

delete: removes both files. The job dir keeps Harbor's own config.json and the logs keep the
resolved config, so nothing of what ran is lost. Outputs: removed (list of paths).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .step import HostError, emit, log, verb

NAME = "harbor_configs"


@dataclass(frozen=True)
class Inputs:
    config_path: str
    compose_path: str
    job_config_yaml: str
    compose_yaml: str


@dataclass(frozen=True)
class DeleteInputs:
    config_path: str
    compose_path: str


def place(path: Path, text: str) -> None:
    """Write atomically, so a reader never sees half a file (with a final newline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, path)
    log(NAME, f"wrote {path}")


@verb(Inputs)
def create(inputs: Inputs) -> None:
    for key in ("config_path", "job_config_yaml"):
        if not getattr(inputs, key):
            raise HostError(f"{key} is empty: the component must pass it")
    # No compose override (trials as pods) is both empty; one without the other is a bug.
    if bool(inputs.compose_path) != bool(inputs.compose_yaml):
        raise HostError("compose_path and compose_yaml: give both or neither")
    for key in ("config_path", "compose_path"):
        value = getattr(inputs, key)
        if value and not value.startswith("/"):
            raise HostError(f"{key} must be an absolute path (Harbor stores paths verbatim): "
                            f"{value}")
    config = Path(inputs.config_path)
    place(config, inputs.job_config_yaml)
    compose_sha256 = ""
    if inputs.compose_path:
        compose = Path(inputs.compose_path)
        place(compose, inputs.compose_yaml)
        compose_sha256 = hashlib.sha256(compose.read_bytes()).hexdigest()
    emit({
        "config_path": str(config), "compose_path": inputs.compose_path,
        "config_sha256": hashlib.sha256(config.read_bytes()).hexdigest(),
        "compose_sha256": compose_sha256,
    })


@verb(DeleteInputs)
def delete(inputs: DeleteInputs) -> None:
    removed = []
    for path in (Path(inputs.config_path), Path(inputs.compose_path)):
        if path.is_file():
            path.unlink()
            removed.append(str(path))
    for parent in dict.fromkeys((Path(inputs.config_path).parent,
                                 Path(inputs.compose_path).parent)):
        try:
            parent.rmdir()
        except OSError:
            pass
    emit({"removed": removed})
