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
    job = report.job
    return [
        ("job", job.name),
        ("location", job.location),
        ("finished", "yes" if job.finished else "NO (finished_at is null)"),
        ("wall time", f"{duration(job.wall_seconds)} ({job.wall_source or 'no timestamps'})"),
        ("trials", f"{job.n_trials}" + (f" of {job.n_planned} planned" if job.n_planned else "")),
        ("raw score", score(report.raw)),
        ("adjusted score", f"{score(report.adjusted)} (excluded: {excluded})"),
        ("reference score", ref_text),
        ("input tokens", f"{report.tokens.input:,}"),
        ("cache tokens", f"{report.tokens.cache:,}"),
        ("output tokens", f"{report.tokens.output:,}"),
        ("rerun", " ".join(report.rerun_args) if report.rerun else "none"),
    ]
