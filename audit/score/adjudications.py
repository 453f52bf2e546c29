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


class AdjudicationOut(BaseModel):
    """An adjudication as the report shows it: the trials it decided and what they did."""

    model_config = ConfigDict(extra="forbid")

    task: str
    decision: str
    reason: str
    trials: list[str]
    raw_outcome: list[str]


COUNTED_AS = {"pass": "pass", "fail": "fail", "exclude": "excluded"}


def apply(rows: list, adjudications: list[Adjudication], where: str) -> None:
    """Set each adjudicated row's decision; a task no row matches is an error naming it."""
    by_name: dict[str, list] = {}
    for r in rows:
        by_name.setdefault(r.task, []).append(r)
        if r.task_name and r.task_name != r.task:
            by_name.setdefault(r.task_name, []).append(r)
    for adj in adjudications:
        targets = by_name.get(adj.task)
        if not targets:
            sample = ", ".join(sorted({r.task for r in rows})[:5])
            raise ValueError(
                f"adjudication for task {adj.task!r} matches no trial in {where} "
                f"(task names here look like: {sample}); fix the task name in the "
                "adjudications file"
            )
        for r in targets:
            r.adjudication = {"decision": adj.decision, "reason": adj.reason}
            r.counted_as = COUNTED_AS[adj.decision]


def _outcome(reward: float | None) -> str:
    if reward is None:
        return "no reward"
    return "pass" if reward >= 1.0 else f"reward {reward:g}"


def summary(rows: list, adjudications: list[Adjudication]) -> list[AdjudicationOut]:
    out = []
    for adj in adjudications:
        hit = [r for r in rows if adj.task in (r.task, r.task_name)]
        out.append(AdjudicationOut(task=adj.task, decision=adj.decision, reason=adj.reason,
                                   trials=[r.trial for r in hit],
                                   raw_outcome=[_outcome(r.reward) for r in hit]))
    return out
