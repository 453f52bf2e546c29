"""Can the raw score be quoted? Every report says, with the numbers it rests on.

The raw score counts every trial (the leaderboard's convention: a trial without a reward is a
0). Trials whose failure was not judged on the model (infra and cancelled: outside causes
proven; insufficient_evidence: nothing proven either way) are in it as failures. Had they run
cleanly, some might have passed: at most all of them, which would raise the raw score by
`doubtful / total`.

The threshold: the raw score can be quoted when that largest possible shift is no larger than
half the width of the raw score's own 95% Wilson interval, i.e. when the doubtful trials cannot
move it by more than the sampling uncertainty it already carries. A small job has a wide
interval and tolerates a few doubtful trials; a job of thousands of trials tolerates few, in
proportion. With no trial at all there is nothing to quote.
"""

from __future__ import annotations

from audit.score.scores import AdjustedScore, Out, Score

OUTSIDE = ("infra", "cancelled")
UNEXPLAINED = ("insufficient_evidence",)

THRESHOLD = (
    "quotable when the trials not judged on the model (infra, cancelled, insufficient "
    "evidence), had they all passed, would move the raw score by no more than half the width "
    "of its 95% Wilson interval"
)


class Quotable(Out):
    raw: Score  # every trial counts
    adjusted: AdjustedScore
    non_passes: int
    outside: int  # infra + cancelled
    unexplained: int  # insufficient_evidence
    outside_share: float | None  # of the non-passes
    unexplained_share: float | None
    largest_shift: float | None  # points the raw score would gain if every doubtful trial passed
    tolerance: float | None  # half the width of the raw score's 95% CI, in points
    quotable: bool
    verdict: str
    threshold: str = THRESHOLD


def judge(
    raw: Score, adjusted: AdjustedScore, categories: dict[str, int], missing: int = 0
) -> Quotable:
    """`missing`: planned trials that never got a trial dir (never run: not judged either)."""
    passed = categories.get("passed", 0)
    total = sum(categories.values()) + missing
    non_passes = total - passed
    outside = sum(categories.get(c, 0) for c in OUTSIDE) + missing
    unexplained = sum(categories.get(c, 0) for c in UNEXPLAINED)
    doubtful = outside + unexplained
    shift = round(100 * doubtful / raw.total, 2) if raw.total else None
    tolerance = (
        round((raw.ci_high - raw.ci_low) / 2, 2)
        if raw.ci_low is not None and raw.ci_high is not None
        else None
    )
    if shift is None or tolerance is None:
        ok, verdict = False, "no: no trials to score"
    elif shift <= tolerance:
        ok = True
        verdict = (
            f"yes: the {doubtful} trials not judged on the model could move the raw score by "
            f"at most {shift:.2f} points, within its own uncertainty (+/- {tolerance:.2f})"
        )
    else:
        ok = False
        verdict = (
            f"NO: {doubtful} trials not judged on the model ({outside} infra or cancelled, "
            f"{unexplained} unexplained) could move the raw score by up to {shift:.2f} points, "
            f"more than its own uncertainty (+/- {tolerance:.2f}): rerun them, or quote the "
            "adjusted score with this report"
        )
    return Quotable(
        raw=raw,
        adjusted=adjusted,
        non_passes=non_passes,
        outside=outside,
        unexplained=unexplained,
        outside_share=round(outside / non_passes, 4) if non_passes else None,
        unexplained_share=round(unexplained / non_passes, 4) if non_passes else None,
        largest_shift=shift,
        tolerance=tolerance,
        quotable=ok,
        verdict=verdict,
    )
