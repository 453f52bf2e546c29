"""Can the raw score be quoted? Every report says, in a named convention, with the numbers it
rests on.

Trials whose failure was not judged on the model (infra and cancelled: outside causes proven;
insufficient_evidence: nothing proven either way), and planned trials that never ran, are in the
raw score as failures, or out of it. Had they run cleanly, some might have passed: at most all of
them, which would raise the raw score by the `largest_shift` the convention computes
(audit/score/conventions.py) with every one of them a pass.

The threshold: the raw score can be quoted when that largest possible shift is no larger than
half the width of its own interval, i.e. when the doubtful trials cannot move it by more than the
sampling uncertainty it already carries. The verdict is made in the headline convention (the
board's) when it has an interval, else in Harbor 0.21's (the board gives none while a task has a
single counted trial), and names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from audit.score import conventions as conv
from audit.score.conventions import ConventionResult, ConventionScore, TrialFacts
from audit.score.rows import TrialRow
from audit.score.scores import Out
from audit.score.submission import facts
from contracts import harbor_profiles as hp

OUTSIDE = ("infra", "cancelled")
UNEXPLAINED = ("insufficient_evidence",)

THRESHOLD = (
    "quotable when the trials not judged on the model (infra, cancelled, insufficient "
    "evidence, never run), had they all passed, would move the raw score by no more than half "
    "the width of its interval"
)


class Quotable(Out):
    convention: str  # the one the verdict is made in
    raw: ConventionScore
    non_passes: int
    outside: int  # infra + cancelled + never run
    unexplained: int  # insufficient_evidence
    outside_share: float | None  # of the non-passes
    unexplained_share: float | None
    largest_shift: float | None  # points the raw score would gain if every doubtful trial passed
    tolerance: float | None  # half the width of the raw score's interval, in points
    quotable: bool
    verdict: str
    threshold: str = THRESHOLD


def _best_case(rows: Sequence[TrialRow], unrun: int, convention: conv.Convention
               ) -> list[TrialFacts]:
    """Every trial as it is, except the doubtful ones: each a pass."""
    doubtful = OUTSIDE + UNEXPLAINED
    out = [replace(facts(r), settled=1.0) if r.category in doubtful else facts(r) for r in rows]
    if convention.unrun_as_zero:
        out += [TrialFacts(task=f"(never run {i})", trial="", settled=1.0) for i in range(unrun)]
    return out


def _pick(scores: dict[str, ConventionResult], headline: str) -> tuple[str, ConventionScore]:
    for name in (headline, hp.HARBOR_0_21):
        result = scores.get(name)
        if result and result.rows and result.rows[0].raw.plus_minus is not None:
            return name, result.rows[0].raw
    result = scores.get(headline)
    empty = ConventionScore(convention=headline, score=None)
    return headline, result.rows[0].raw if result and result.rows else empty


def judge(rows: Sequence[TrialRow], scores: dict[str, ConventionResult], *, unrun: int = 0,
          headline: str = hp.LEADERBOARD) -> Quotable:
    """`unrun`: planned trials that never got a trial dir (never run: not judged either)."""
    name, raw = _pick(scores, headline)
    convention = conv.get(name)
    best = conv.score_rows(convention, _best_case(rows, unrun, convention),
                           _best_case(rows, unrun, convention))
    best_score = best.rows[0].raw.score if best.rows else None
    outside = sum(1 for r in rows if r.category in OUTSIDE) + unrun
    unexplained = sum(1 for r in rows if r.category in UNEXPLAINED)
    non_passes = len(rows) + unrun - sum(1 for r in rows if r.category == "passed")
    shift = (round(best_score - raw.score, 2)
             if best_score is not None and raw.score is not None else None)
    tolerance = raw.plus_minus
    ok, verdict = _verdict(name, shift, tolerance, outside, unexplained)
    return Quotable(
        convention=name, raw=raw, non_passes=non_passes, outside=outside,
        unexplained=unexplained,
        outside_share=round(outside / non_passes, 4) if non_passes else None,
        unexplained_share=round(unexplained / non_passes, 4) if non_passes else None,
        largest_shift=shift, tolerance=tolerance, quotable=ok, verdict=verdict)


def _verdict(name: str, shift: float | None, tolerance: float | None, outside: int,
             unexplained: int) -> tuple[bool, str]:
    doubtful = outside + unexplained
    if shift is None or tolerance is None:
        return False, f"no: no score with an interval to quote ({name})"
    if shift <= tolerance:
        return True, (
            f"yes ({name}): the {doubtful} trials not judged on the model could move the raw "
            f"score by at most {shift:.2f} points, within its own uncertainty (+/- "
            f"{tolerance:.2f})")
    return False, (
        f"NO ({name}): {doubtful} trials not judged on the model ({outside} infra, cancelled "
        f"or never run, {unexplained} unexplained) could move the raw score by up to "
        f"{shift:.2f} points, more than its own uncertainty (+/- {tolerance:.2f}): rerun them, "
        "or quote the adjusted score with this report")
