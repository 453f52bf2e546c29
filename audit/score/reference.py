"""The published score a reproduction is compared with, in the convention it was published in.

A reference carries its convention (default: the board's) and its ± when known
(`--reference-score 73.0 --reference-plus-minus 2.1 --reference-convention leaderboard`, or
`harbor.reference_score` in the stack file). The comparison is made in that convention only:
each row's raw and adjusted score there, the difference in points, whether the reference lies
inside our interval and ours inside its. With the published per-task table (`--reference-tasks
FILE`: task -> p̂), the tasks that account for most of the difference are named.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import Field

from audit.score import conventions as conv
from audit.score.conventions import ConventionResult, ConventionScore
from audit.score.scores import Out
from contracts import harbor_profiles as hp

# At most this many tasks are named as accounting for a difference.
MAX_TASKS = 10


class PublishedScore(Out):
    score: float = Field(ge=0, le=100)  # percent
    plus_minus: float | None = Field(default=None, ge=0)  # points, as published (board: 1.96 SE)
    convention: str = hp.LEADERBOARD
    tasks: dict[str, float] = {}  # task -> p̂ (0..1), when the per-task table was published
    source: str = ""

    def shown(self) -> str:
        pm = f" ± {self.plus_minus:.1f}" if self.plus_minus is not None else ""
        return f"{self.score:.1f}{pm} ({self.convention})"


class TaskDifference(Out):
    task: str
    ours: float | None  # p̂, 0..1
    published: float | None
    points: float  # its share of the difference, in points of the score


class Comparison(Out):
    convention: str
    row: str
    which: str  # "raw" or "adjusted"
    ours: float | None
    ours_plus_minus: float | None
    difference: float | None  # ours - reference, points
    reference_inside_ours: bool | None
    ours_inside_reference: bool | None
    verdict: str
    # The tasks that account for most of the difference (with a published per-task table).
    tasks: list[TaskDifference] = []
    tasks_note: str = ""


class ReferenceResult(Out):
    published: PublishedScore | None = None
    comparisons: list[Comparison] = []


def published(score: float | None, *, plus_minus: float | None = None,
              convention: str | None = None, tasks: dict[str, float] | None = None,
              source: str = "") -> PublishedScore | None:
    """A checked reference; ValueError naming what is wrong (an unknown convention, a per-task
    table for a convention that does not average over tasks)."""
    if score is None:
        if plus_minus is not None or tasks:
            raise ValueError("a reference's ± or per-task table needs its score "
                             "(--reference-score)")
        return None
    name = convention or hp.LEADERBOARD
    if not conv.get(name).per_task and tasks:
        raise ValueError(f"a per-task table compares only in a per-task convention; {name} "
                         "averages over trials")
    return PublishedScore(score=score, plus_minus=plus_minus, convention=name,
                          tasks=tasks or {}, source=source)


def load_tasks(path: Path) -> dict[str, float]:
    """A published per-task table: a JSON or YAML mapping task -> p̂ in [0, 1]."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"cannot read --reference-tasks {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"--reference-tasks {path}: not JSON or YAML: {exc}") from exc
    if not isinstance(data, dict) or not data:
        raise ValueError(f"--reference-tasks {path}: expected a mapping task -> p̂ (0..1)")
    out: dict[str, float] = {}
    for task, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ValueError(f"--reference-tasks {path}: task {task!r}: {json.dumps(value)} is "
                             "not a p̂ between 0 and 1")
        out[str(task)] = float(value)
    return out


def compare(ref: PublishedScore | None, scores: dict[str, ConventionResult]) -> ReferenceResult:
    if ref is None:
        return ReferenceResult()
    result = scores.get(ref.convention)
    comparisons = [
        _compare(ref, row.label(), which, score)
        for row in (result.rows if result else [])
        for which, score in (("raw", row.raw), ("adjusted", row.adjusted))
    ]
    return ReferenceResult(published=ref, comparisons=comparisons)


def _compare(ref: PublishedScore, row: str, which: str, ours: ConventionScore) -> Comparison:
    diff = round(ours.score - ref.score, 2) if ours.score is not None else None
    inside_ours = ours.contains(ref.score)
    inside_ref = (abs(diff) <= ref.plus_minus
                  if diff is not None and ref.plus_minus is not None else None)
    tasks, note = _tasks(ref, ours, diff)
    return Comparison(
        convention=ref.convention, row=row, which=which, ours=ours.score,
        ours_plus_minus=ours.plus_minus, difference=diff, reference_inside_ours=inside_ours,
        ours_inside_reference=inside_ref, verdict=_verdict(ref, which, ours, diff, inside_ours,
                                                           inside_ref),
        tasks=tasks, tasks_note=note)


def _side(inside: bool | None, whose: str) -> str:
    return {True: f"inside {whose}", False: f"OUTSIDE {whose}",
            None: f"not compared ({whose}: none)"}[inside]


def _verdict(ref: PublishedScore, which: str, ours: ConventionScore, diff: float | None,
             inside_ours: bool | None, inside_ref: bool | None) -> str:
    if diff is None:
        return f"{which}: no score to compare ({ref.convention})"
    return (f"{which} {ours.shown} vs published {ref.shown()}: {diff:+.2f} points; the "
            f"reference is {_side(inside_ours, 'our interval')}, ours "
            f"{_side(inside_ref, 'its ±')}")


def _tasks(ref: PublishedScore, ours: ConventionScore, diff: float | None
           ) -> tuple[list[TaskDifference], str]:
    if not ref.tasks or diff is None or not ours.per_task:
        return [], ""
    names = sorted(set(ours.per_task) | set(ref.tasks))
    n = len(names)
    rows = [
        TaskDifference(
            task=t, ours=ours.per_task[t].mean if t in ours.per_task else None,
            published=ref.tasks.get(t),
            points=round(100 * ((ours.per_task[t].mean if t in ours.per_task else 0.0)
                                - ref.tasks.get(t, 0.0)) / n, 3))
        for t in names
    ]
    sign = 1 if diff >= 0 else -1
    rows.sort(key=lambda d: -sign * d.points)
    named: list[TaskDifference] = []
    for d in rows:
        if len(named) == MAX_TASKS or sign * sum(x.points for x in named) >= abs(diff) / 2 \
                or sign * d.points <= 0:
            break
        named.append(d)
    missing = [t for t in names if t not in ours.per_task or t not in ref.tasks]
    note = (f"{len(named)} tasks account for {sum(d.points for d in named):+.2f} of the "
            f"{diff:+.2f} points (each task weighs 1/{n})")
    if missing:
        note += f"; in one table only (counted as 0 where absent): {', '.join(missing)}"
    return named, note
