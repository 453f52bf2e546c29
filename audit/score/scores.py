"""A pass rate with its 95% Wilson interval: the one score shape every part of the report uses.

Its own module so that the report and the models it holds (the merge of a job with its reruns)
can share it without importing each other.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict

from audit.score.stats import wilson

CI_LEVEL = 0.95


class Out(BaseModel):
    """Base of every report model: an unknown field is a bug in the audit, not in the input."""

    model_config = ConfigDict(extra="forbid")


class Score(Out):
    passed: int
    total: int
    score: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    @classmethod
    def of(cls, passed: int, total: int, **extra) -> Self:
        ci = wilson(passed, total, CI_LEVEL)
        return cls(
            passed=passed,
            total=total,
            score=pct(passed, total),
            ci_low=round(100 * ci[0], 2) if ci else None,
            ci_high=round(100 * ci[1], 2) if ci else None,
            **extra,
        )

    def contains(self, value: float | None) -> bool | None:
        if value is None or self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low <= value <= self.ci_high


class AdjustedScore(Score):
    excluded: list[str]


def pct(passed: int, total: int) -> float | None:
    return round(100.0 * passed / total, 2) if total else None


def minus_reference(score: Score, reference: float | None) -> float | None:
    """score - reference in points, when both are known."""
    if score.score is None or reference is None:
        return None
    return round(score.score - reference, 2)
