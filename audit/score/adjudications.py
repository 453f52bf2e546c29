"""The user's adjudications: human decisions that change the adjusted score, each with a reason.

File format (YAML), a list of entries (or a mapping with an `adjudications:` list):

    - task: build-pov-ray
      decision: exclude          # pass | fail | exclude
      reason: task is broken upstream (Cloudflare 403 on the source)

`task` is what Harbor's `-i` filter takes (the task dir name) or the full task name
(`terminal-bench/build-pov-ray`). A decision applies to every trial of that task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Adjudication(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task: str = Field(min_length=1)
    decision: Literal["pass", "fail", "exclude"]
    reason: str = Field(min_length=3)


def parse_adjudications(text: str, origin: str) -> list[Adjudication]:
    """Parse and validate; errors name the file, the entry and the key to fix."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{origin}: not valid YAML: {exc}") from exc
    if isinstance(data, dict) and "adjudications" in data:
        data = data["adjudications"]
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError(
            f"{origin}: expected a list of {{task, decision, reason}} entries, "
            f"got {type(data).__name__}"
        )
    out: list[Adjudication] = []
    for i, entry in enumerate(data):
        try:
            out.append(Adjudication.model_validate(entry))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"]) or "entry"
            label = entry.get("task") if isinstance(entry, dict) else None
            raise ValueError(
                f"{origin}: entry {i + 1}{f' ({label})' if label else ''}: {key}: {err['msg']}"
            ) from exc
    seen: dict[str, int] = {}
    for i, adj in enumerate(out):
        if adj.task in seen:
            raise ValueError(
                f"{origin}: task {adj.task!r} is adjudicated twice (entries {seen[adj.task] + 1} "
                f"and {i + 1}); keep one decision per task"
            )
        seen[adj.task] = i
    return out


def load_adjudications(path: Path) -> list[Adjudication]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read adjudications file {path}: {exc.strerror}") from exc
    return parse_adjudications(text, str(path))
