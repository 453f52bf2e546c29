"""A submission's scores: its trials, as they are and as the audit settles them, in every
registered convention (audit/score/conventions.py computes each number; this module only says
what each trial is to a convention).

A submission is every job dir of one run (`audit JOB [JOB...]`): the board pools the counted
trials of an agent version across jobs, and so does the leaderboard convention here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from audit.score import conventions as conv
from audit.score.conventions import ConventionResult, TrialFacts
from audit.score.rows import Counted, TrialRow
from audit.score.scores import Out
from contracts import harbor_profiles as hp

# The verdicts that take a trial out of the model's account: an outside cause proven, listed
# for rerun (audit/RULES.md).
RERUN = ("infra", "cancelled")
# What an adjudication sets a trial's reward to.
DECIDED = {"pass": 1.0, "fail": 0.0}


def _reward_valid(row: TrialRow) -> bool:
    """Harbor 0.26 counts the trial: its own reward_valid, or its table's verdict on it."""
    if row.harbor_policy is not None:
        return row.harbor_policy.reward_valid
    return row.reward is not None and row.reward_valid is not False


def facts(row: TrialRow) -> TrialFacts:
    """The trial as it is: what every convention's rule reads."""
    return TrialFacts(
        task=row.task, trial=row.trial, reward=row.reward, reward_key=row.reward_key,
        has_result=row.has_result, exception_recorded=row.exception_recorded,
        exception=row.exception, reward_valid=_reward_valid(row), agent=row.agent,
        agent_version=row.agent_version, models=tuple(row.models))


def settled(row: TrialRow) -> TrialFacts:
    """The trial as the audit settles it: an adjudication decides it, else a rerun verdict
    takes it out."""
    base = facts(row)
    decision = row.adjudication["decision"] if row.adjudication else None
    if decision == "exclude":
        return replace(base, dropped="its task is excluded by an adjudication")
    if decision in DECIDED:
        return replace(base, settled=DECIDED[decision])
    if row.category in RERUN:
        return replace(base, dropped=f"the audit lists it for rerun ({row.category})")
    return base


def score(rows: Sequence[TrialRow], *, unrun: int = 0,
          dataset_tasks: int | None = None) -> dict[str, ConventionResult]:
    """Every registered convention over `rows`, raw and adjusted."""
    return conv.score_all([facts(r) for r in rows], [settled(r) for r in rows], unrun=unrun,
                          dataset_tasks=dataset_tasks)


def mark_counted(rows: Sequence[TrialRow], convention: str = hp.LEADERBOARD) -> None:
    """Each row says whether `convention` counts it as it is, and why."""
    c = conv.get(convention)
    for r in rows:
        counted, why = conv.counts(c, facts(r))
        r.leaderboard = Counted(convention=convention, counted=counted, why=why)


class Disagreement(Out):
    """A trial the board counts and the audit takes out, or the reverse: where a reproduction
    and the board can disagree."""

    trial: str
    task: str
    exception: str | None
    category: str
    board: str  # "counts" or "leaves out", and why
    audit: str  # what the audit's verdict does with it


def disagreements(rows: Sequence[TrialRow]) -> list[Disagreement]:
    out = []
    for r in rows:
        if r.leaderboard is None:
            continue
        audit_counts = r.category not in RERUN
        if r.leaderboard.counted == audit_counts:
            continue
        out.append(Disagreement(
            trial=r.trial, task=r.task, exception=r.exception, category=r.category,
            board=("counts it" if r.leaderboard.counted else "leaves it out") + ": "
            + r.leaderboard.why,
            audit=("lists it for rerun: an outside cause is proven" if not audit_counts
                   else "counts it: nothing in its files shows an outside cause"
                   if r.category == "insufficient_evidence"
                   else f"counts it: judged on the model ({r.category})")))
    return out


def reported_convention(mean: float | None, scores: dict[str, ConventionResult],
                        schema_version: object) -> tuple[str | None, str]:
    """Which convention a job's own reported mean was computed in, and why we say so."""
    if schema_version is not None:
        return hp.HARBOR_0_26, "the job's result.json has schema_version (Harbor 0.26+)"
    if mean is None:
        return None, "the job's result.json reports no single mean to compare with"
    close = [name for name in (hp.HARBOR_0_21, hp.HARBOR_0_26)
             if (value := _mean_of(scores.get(name))) is not None and abs(value - mean) < 1e-6]
    if len(close) == 1 or (close and len({_mean_of(scores[n]) for n in close}) == 1):
        return close[0], f"its reported mean {mean:.4f} matches the {close[0]} rule"
    if not close:
        return None, f"its reported mean {mean:.4f} matches neither Harbor rule (trials missing?)"
    return None, f"its reported mean {mean:.4f} matches both Harbor rules"


def _mean_of(result: ConventionResult | None) -> float | None:
    """The job mean (a fraction) of a one-row convention, over its trials without the unrun."""
    if result is None or not result.rows:
        return None
    return result.rows[0].raw.fraction
