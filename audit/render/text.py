"""Small formatting helpers shared by the renderers."""

from __future__ import annotations

from audit.report import Report, Score


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
            "score, Harbor 0.21 rule",
            f"{score(den.harbor_0_21)} (every trial counts, no reward = 0)",
        ),
        (
            "score, Harbor 0.26 rule",
            f"{score(den.harbor_0_26)} (only trials with a valid reward count)",
        ),
        ("rule the job's result.json used", f"{den.job_used or 'unknown'} ({den.job_used_reason})"),
        ("input tokens", f"{report.tokens.input:,}"),
        ("cache tokens", f"{report.tokens.cache:,}"),
        ("output tokens", f"{report.tokens.output:,}"),
        ("rerun", " ".join(report.rerun_args) if report.rerun else "none"),
    ]
