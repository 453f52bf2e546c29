"""Attempts per task (what the leaderboard conformance reads), and the pass@k estimator (the
unbiased one of Chen et al., 2021) each score convention applies to its counted trials
(audit/score/conventions.py).

For a task with n attempts of which c passed, pass@k = 1 - C(n-c, k) / C(n, k): the chance
that at least one of k attempts drawn without replacement passes. A score's pass@k is the mean
over tasks, for k = 1 .. n_min (the fewest attempts of any task), where it is defined for every
task; pass@1 is the mean of c/n.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

from audit.score.scores import Out


class TaskAttempts(Out):
    attempts: int
    passed: int


class Attempts(Out):
    per_task: dict[str, TaskAttempts] = {}
    n_min: int | None = None
    n_max: int | None = None
    n_attempts_config: int | None = None  # the job config's n_attempts, when it says
    note: str = ""


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Exact pass@k of one task; k must be 1..n."""
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n and 0 <= c <= n, got n={n} c={c} k={k}")
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def attempts_of(
    outcomes: list[tuple[str, bool]], n_attempts_config: int | None = None, note: str = ""
) -> Attempts:
    """`outcomes` is one (task, passed) per attempt, in any order."""
    per_task: dict[str, list[int]] = {}
    for task, passed in outcomes:
        acc = per_task.setdefault(task, [0, 0])
        acc[0] += 1
        acc[1] += int(passed)
    if not per_task:
        return Attempts(n_attempts_config=n_attempts_config, note=note)
    counts = [n for n, _ in per_task.values()]
    return Attempts(
        per_task={t: TaskAttempts(attempts=n, passed=c) for t, (n, c) in sorted(per_task.items())},
        n_min=min(counts),
        n_max=max(counts),
        n_attempts_config=n_attempts_config,
        note=note,
    )
