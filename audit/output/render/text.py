"""Small formatting helpers shared by the renderers."""

from __future__ import annotations

from audit.output.report import Report, Score, TrialRow
from audit.score.attempts import Attempts
from audit.score.conformance import line as conformance_line
from audit.score.merge import Merge


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    if h:
        return f"{h} h {m} min"
    if m:
        return f"{m} min {s} s"
    return f"{s} s"


def score(s: Score) -> str:
    value = "n/a" if s.score is None else f"{s.score:.2f}"
    return f"{s.passed}/{s.total} = {value}"


def interval(s: Score) -> str:
    if s.ci_low is None or s.ci_high is None:
        return "n/a (no trials)"
    return f"{s.ci_low:.2f} - {s.ci_high:.2f}"


def _yes_no(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "NO")


def reward(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def headline(report: Report) -> list[tuple[str, str]]:
    """The summary lines every format shows, in order."""
    ref = report.reference
    ref_text = (
        "not given"
        if ref.score is None
        else f"{ref.score:.2f} (adjusted - reference = {ref.difference:+.2f})"
        if ref.difference is not None
        else f"{ref.score:.2f}"
    )
    excluded = ", ".join(report.adjusted.excluded) or "none"
    den = report.denominators
    job = report.job
    return [
        ("job", job.name),
        ("location", job.location),
        ("finished", "yes" if job.finished else "NO (finished_at is null)"),
        ("wall time", f"{duration(job.wall_seconds)} ({job.wall_source or 'no timestamps'})"),
        ("trials", f"{job.n_trials}" + (f" of {job.n_planned} planned" if job.n_planned else "")),
        ("raw score", score(report.raw)),
        ("raw score 95% CI (Wilson)", interval(report.raw)),
        ("adjusted score", f"{score(report.adjusted)} (excluded: {excluded})"),
        ("adjusted score 95% CI (Wilson)", interval(report.adjusted)),
        ("reference score", ref_text),
        (
            "reference inside the 95% CI",
            "no reference given"
            if ref.score is None
            else f"raw: {_yes_no(ref.inside_raw_ci)}, adjusted: {_yes_no(ref.inside_adjusted_ci)}",
        ),
        (
            "score, leaderboard convention",
            f"{score(den.harbor_0_21)} (every trial counts, no reward = 0; Harbor 0.21's)",
        ),
        (
            "score, valid rewards only",
            f"{score(den.harbor_0_26)} (trials whose reward is not valid are left out; "
            "Harbor 0.26's)",
        ),
        (
            "convention the job used",
            f"{den.job_used or 'unknown'} ({den.job_used_reason})",
        ),
        ("Harbor 0.26 error policy", policy_line(report)),
        ("model reached (trials)", reached(report.model_reached)),
        ("verdicts on Harbor's record alone", record_alone(report)),
        *quotable_lines(report),
        ("input tokens", f"{report.tokens.input:,}"),
        ("cache tokens", f"{report.tokens.cache:,}"),
        ("output tokens", f"{report.tokens.output:,}"),
        ("rerun", " ".join(report.rerun_args) if report.rerun else "none"),
        ("attempts per task", attempts_per_task(report.attempts)),
        ("pass@k, leaderboard", pass_at_k(report.attempts)),
        ("pass@k, valid only", at_k(den.pass_at_k_0_26)),
        (
            "leaderboard conformance",
            conformance_line(report.conformance) if report.conformance else "not checked",
        ),
    ]


def record_alone(report: Report) -> str:
    """How many non-pass verdicts rest on Harbor's record alone (no log of the agent's own, no
    serving record): there an owner is given only where the record decides it."""
    non_passes = [t for t in report.trials if t.category != "passed"]
    alone = sum(1 for t in non_passes if t.record_alone)
    return f"{alone} of {len(non_passes)} non-passes"


def families(t: TrialRow) -> str:
    """A trial's evidence families, in one line."""
    had = ", ".join(t.evidence_families) or "none"
    return had + (" (Harbor's record alone)" if t.record_alone else "")


def reached(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "no trials"


def _share(n: int, of: int, share: float | None) -> str:
    return f"{n} of {of} non-passes" + (f" ({100 * share:.1f}%)" if share is not None else "")


def quotable_lines(report: Report) -> list[tuple[str, str]]:
    """Raw (every trial counts) and adjusted, the doubtful non-passes, and the verdict."""
    q = report.quotable
    if q is None:
        return []
    return [
        ("non-passes infra or cancelled", _share(q.outside, q.non_passes, q.outside_share)),
        ("non-passes unexplained", _share(q.unexplained, q.non_passes, q.unexplained_share)),
        ("raw score quotable", q.verdict),
        ("quotable threshold", q.threshold),
    ]


def trial_reached(detail: str) -> str:
    """The per-trial cell: the answer, then the line it rests on."""
    return detail or "unknown"


def attempts_per_task(a: Attempts) -> str:
    if a.n_min is None:
        return "no trials"
    span = f"{a.n_min}" if a.n_min == a.n_max else f"{a.n_min} to {a.n_max}"
    config = f", config n_attempts {a.n_attempts_config}" if a.n_attempts_config else ""
    return f"{span} over {len(a.per_task)} tasks{config}"


def at_k(values: dict[str, float]) -> str:
    if not values:
        return "n/a (no trials)"
    return ", ".join(f"pass@{k} = {v:.2f}" for k, v in values.items())


def pass_at_k(a: Attempts) -> str:
    text = at_k(a.pass_at_k)
    return f"{text} ({a.note})" if a.pass_at_k and a.note else text


def policy_line(report: Report) -> str:
    """Harbor 0.26's error policy beside the audit's verdicts, in one line."""
    p = report.harbor_policy
    if p is None:
        return "not read"
    return (f"from {p.source}: agrees with the audit on whether {p.agree} trials count, differs "
            f"on {p.differ}" + (f" ({', '.join(sorted(p.differences))})" if p.differ else "")
            + "; Harbor's table never overrides the proof rule")


def policy_cell(t: TrialRow) -> str:
    """A trial's Harbor 0.26 verdict, short: does its score count the trial, and is that the
    audit's view too."""
    p = t.harbor_policy
    if p is None:
        return ""
    return ("counts" if p.reward_valid else "leaves out") + (" (differs)" if p.differs else "")


def policy_detail(t: TrialRow) -> str:
    """A trial's Harbor 0.26 verdict in full, and why the audit's differs."""
    p = t.harbor_policy
    if p is None:
        return ""
    verdict = "counts it" if p.reward_valid else "leaves it out"
    return f"Harbor 0.26 ({p.source}) {verdict}." + (f" Differs: {p.differs}" if p.differs else "")


def merge_headline(m: Merge) -> list[tuple[str, str]]:
    """The merged score beside the main job's own, for every format's merge section."""
    ref = m.reference
    ref_text = (
        "not given"
        if ref.score is None
        else f"{ref.score:.2f} (merged adjusted - reference = {ref.difference:+.2f}, inside "
        f"the merged adjusted 95% CI: {_yes_no(ref.inside_adjusted_ci)})"
        if ref.difference is not None
        else f"{ref.score:.2f}"
    )
    jobs = "; ".join(f"{j.role} {j.name} ({j.n_trials} trials)" for j in m.jobs)
    excluded = ", ".join(m.adjusted.excluded) or "none"
    return [
        ("jobs, in merge order", jobs),
        (
            "original raw score (main job)",
            f"{score(m.original_raw)}, 95% CI {interval(m.original_raw)}",
        ),
        (
            "original adjusted score (main job)",
            f"{score(m.original_adjusted)}, 95% CI {interval(m.original_adjusted)}",
        ),
        ("merged raw score", f"{score(m.raw)}, 95% CI {interval(m.raw)}"),
        (
            "merged adjusted score",
            f"{score(m.adjusted)}, 95% CI {interval(m.adjusted)} (excluded: {excluded})",
        ),
        ("reference score", ref_text),
        ("main attempts superseded by a rerun", str(m.superseded)),
        ("tasks with more than one attempt", str(sum(1 for t in m.tasks if len(t.attempts) > 1))),
        ("counted attempts (slots) per task", attempts_per_task(m.attempts)),
        ("merged pass@k", pass_at_k(m.attempts)),
        ("still to rerun", " ".join(m.rerun_args) if m.rerun else "none"),
    ]
