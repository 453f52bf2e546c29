"""Small formatting helpers shared by the renderers."""

from __future__ import annotations

from audit.score.attempts import Attempts
from audit.score.conformance import line as conformance_line
from audit.score.conventions import ConventionResult, ConventionScore, ScoreRow, printed
from audit.score.merge import Merge
from audit.score.reference import ReferenceResult
from audit.score.report import Report
from audit.score.rows import JobInfo, TrialRow


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


def reward(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _label(result: ConventionResult, row: ScoreRow, which: str) -> str:
    who = f" ({row.label()})" if len(result.rows) > 1 or row.agent is not None else ""
    return f"{result.convention}, {which}{who}"


def _validity(s: ConventionScore) -> str:
    if s.valid:
        return "yes"
    head = "cannot tell" if s.valid is None else "NO"
    return f"{head}: {'; '.join(s.invalid)}"


def _left_out(counts: dict[str, int]) -> str:
    if not counts:
        return "none"
    return f"{sum(counts.values())} ({'; '.join(f'{why}: {n}' for why, n in counts.items())})"


def ordered(scores: dict[str, ConventionResult], headline: str) -> list[ConventionResult]:
    """The conventions a report prints (every one is in the JSON), the headline's first."""
    return [scores[n] for n in printed(headline) if n in scores]


def convention_lines(result: ConventionResult, excluded: list[str] | None = None
                     ) -> list[tuple[str, str]]:
    """One convention's rows, raw and adjusted, whether each is a row it would show, and the
    trials it does not count."""
    out: list[tuple[str, str]] = []
    if not result.rows:
        out.append((f"{result.convention}, raw", "no trial"))
    for row in result.rows:
        extra = f" (excluded: {', '.join(excluded)})" if excluded else ""
        out.append((_label(result, row, "raw"), row.raw.shown))
        out.append((_label(result, row, "adjusted"), row.adjusted.shown + extra))
        if result.row_rule:
            out.append((_label(result, row, "a row it would show"),
                        f"raw: {_validity(row.raw)} | adjusted: {_validity(row.adjusted)}"))
    out.append((f"{result.convention}, not counted",
                f"raw {_left_out(result.left_out)}; adjusted "
                f"{_left_out(result.left_out_adjusted)}"))
    return out


def score_lines(scores: dict[str, ConventionResult], headline: str,
                excluded: list[str] | None = None) -> list[tuple[str, str]]:
    return [line for result in ordered(scores, headline)
            for line in convention_lines(result, excluded)]


def pass_at_k_lines(scores: dict[str, ConventionResult], headline: str
                    ) -> list[tuple[str, str]]:
    return [(f"pass@k, {r.convention}", at_k(r.rows[0].raw.pass_at_k) if r.rows else "n/a")
            for r in ordered(scores, headline)]


def reference_lines(ref: ReferenceResult) -> list[tuple[str, str]]:
    if ref.published is None:
        return [("reference", "not given")]
    out = [("reference", f"{ref.published.shown()}"
            + (f" from {ref.published.source}" if ref.published.source else ""))]
    for c in ref.comparisons:
        out.append((f"reference vs {c.which} ({c.row})", c.verdict))
        if c.tasks:
            named = ", ".join(f"{d.task} {d.points:+.2f}" for d in c.tasks)
            out.append((f"tasks behind the {c.which} difference", f"{named} ({c.tasks_note})"))
    if not ref.comparisons:
        out.append(("reference compared", f"no {ref.published.convention} score to compare"))
    return out


def jobs_line(report: Report) -> str:
    return "; ".join(f"{j.name} ({j.n_trials} trials)" for j in report.jobs)


def reported_line(job: JobInfo) -> str:
    return f"{job.reported_convention or 'unknown'} ({job.reported_reason})"


def disagreement_line(report: Report) -> str:
    d = report.disagreements
    if not d:
        return "none: the board counts exactly the trials the audit judges on the model"
    return f"{len(d)} trials: " + "; ".join(f"{x.trial} ({x.exception or 'no exception'}, "
                                            f"{x.category}: board {x.board.split(':')[0]})"
                                            for x in d)


def headline(report: Report) -> list[tuple[str, str]]:
    """The summary lines every format shows, in order: the headline convention's number first."""
    job = report.job
    several = len(report.jobs) > 1
    return [
        *score_lines(report.scores, report.convention, report.adjusted_excluded()),
        (
            "leaderboard conformance",
            conformance_line(report.conformance) if report.conformance else "not checked",
        ),
        *reference_lines(report.reference),
        ("job" if not several else "jobs (one submission)",
         job.name if not several else jobs_line(report)),
        ("location", job.location),
        ("finished", "yes" if all(j.finished for j in report.jobs)
         else "NO (finished_at is null)"),
        ("wall time", f"{duration(job.wall_seconds)} ({job.wall_source or 'no timestamps'})"),
        ("trials", f"{sum(j.n_trials for j in report.jobs)}"
         + (f" of {sum(j.n_planned or 0 for j in report.jobs)} planned"
            if any(j.n_planned for j in report.jobs) else "")),
        ("board and audit disagree on", disagreement_line(report)),
        *[(f"convention {j.name}'s result.json used" if several
           else "convention the job's result.json used", reported_line(j)) for j in report.jobs],
        ("Harbor 0.26 error policy", policy_line(report)),
        ("model reached (trials)", reached(report.model_reached)),
        ("verdicts on Harbor's record alone", record_alone(report)),
        *quotable_lines(report),
        ("input tokens", f"{report.tokens.input:,}"),
        ("cache tokens", f"{report.tokens.cache:,}"),
        ("output tokens", f"{report.tokens.output:,}"),
        ("rerun", " ".join(report.rerun_args) if report.rerun else "none"),
        ("attempts per task", attempts_per_task(report.attempts)),
        *pass_at_k_lines(report.scores, report.convention),
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
    """The doubtful non-passes, and whether the raw score can be quoted (in a named
    convention)."""
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
    note = f" ({a.note})" if a.note else ""
    return f"{span} over {len(a.per_task)} tasks{config}{note}"


def at_k(values: dict[str, float]) -> str:
    if not values:
        return "n/a (no trials)"
    return ", ".join(f"pass@{k} = {v:.2f}" for k, v in values.items())


def policy_line(report: Report) -> str:
    """Harbor 0.26's error policy beside the audit's verdicts, in one line."""
    p = report.harbor_policy
    if p is None:
        return "not read"
    return (f"from {p.source}: agrees with the audit on whether {p.agree} trials count, differs "
            f"on {p.differ}" + (f" ({', '.join(sorted(p.differences))})" if p.differ else "")
            + "; Harbor's table never overrides the proof rule")


def board_cell(t: TrialRow) -> str:
    """Whether the headline convention (the board's) counts the trial, and why."""
    if t.leaderboard is None:
        return ""
    return ("counts" if t.leaderboard.counted else "leaves out") + f": {t.leaderboard.why}"


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


def merge_headline(m: Merge, headline: str) -> list[tuple[str, str]]:
    """The merged scores, for every format's merge section (the main job's own are the report's
    headline)."""
    jobs = "; ".join(f"{j.role} {j.name} ({j.n_trials} trials"
                     + (f", {j.raw.shown}" if j.raw else "") + ")" for j in m.jobs)
    excluded = sorted({t.task for t in m.tasks if t.counted_as == "excluded"})
    return [
        ("jobs, in merge order", jobs),
        *[(f"merged {k}", v) for k, v in score_lines(m.scores, headline, excluded)],
        *[(k.replace("reference", "merged reference", 1), v)
          for k, v in reference_lines(m.reference)],
        ("main attempts superseded by a rerun", str(m.superseded)),
        ("tasks with more than one attempt", str(sum(1 for t in m.tasks if len(t.attempts) > 1))),
        ("counted attempts (slots) per task", attempts_per_task(m.attempts)),
        *[(f"merged {k}", v) for k, v in pass_at_k_lines(m.scores, headline)],
        ("still to rerun", " ".join(m.rerun_args) if m.rerun else "none"),
    ]
