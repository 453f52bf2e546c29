"""Terminal report with rich: summary, categories, adjudications and the non-passing trials."""

from __future__ import annotations

import io

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import audit.output.render.time_plane as time_plane
from audit.output.render.text import board_cell, headline, merge_headline, policy_cell, reward
from audit.read import provenance as prov
from audit.score.merge import Merge
from audit.score.report import Report

_STYLE = {
    "passed": "green",
    "agent_error": "red",
    "agent_timeout": "yellow",
    "verifier_timeout": "magenta",
    "infra": "bold cyan",
    "cancelled": "dim",
    "insufficient_evidence": "bold yellow",
}


def render(report: Report, width: int | None = None, color: bool = False) -> str:
    """The report as text; ANSI colors only when asked (stdout is a terminal)."""
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width or 120,
        force_terminal=color,
        color_system="standard" if color else None,
    )
    console.print(_pairs(f"Audit of {report.job.name}", headline(report), fold=False))
    console.print(f"Scoring rule: {escape(report.scoring_rule)}")
    for table in (_categories(report), _signatures(report), _adjudications(report),
                  _disagreements(report), _trials(report)):
        if table is not None:
            console.print(table)
    _time(console, report)
    if report.merge:
        _merge(console, report.merge, report.convention)
    if report.provenance is not None:
        console.print(_pairs(
            "Provenance (the full manifest: --format json, or --out writes provenance.json)",
            prov.key_facts(report.provenance)))
    for problem in report.problems:
        console.print(f"[yellow]evidence problem:[/] {escape(problem)}", highlight=False)
    return buf.getvalue()


def _pairs(title: str, pairs: list[tuple[str, str]], fold: bool = True) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold" if fold else "ellipsis")
    for key, value in pairs:
        table.add_row(key, escape(value))
    return table


def _table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> Table:
    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _categories(report: Report) -> Table:
    cats = Table(title="Outcomes by category")
    cats.add_column("category")
    cats.add_column("trials", justify="right")
    for cat, n in report.categories.items():
        cats.add_row(f"[{_STYLE[cat]}]{cat}[/]", str(n))
    return cats


def _signatures(report: Report) -> Table | None:
    if not report.signatures:
        return None
    sigs = Table(title="Signatures")
    sigs.add_column("signature")
    sigs.add_column("trials", justify="right")
    sigs.add_column("meaning", overflow="fold")
    for sig, n in report.signatures.items():
        sigs.add_row(sig, str(n), escape(report.signature_meanings.get(sig, "")))
    return sigs


def _adjudications(report: Report) -> Table | None:
    if not report.adjudications:
        return None
    return _table("Adjudications (change the adjusted score only)",
                  ("task", "decision", "raw outcome", "reason"),
                  [(escape(a.task), a.decision, ", ".join(a.raw_outcome), escape(a.reason))
                   for a in report.adjudications])


def _disagreements(report: Report) -> Table | None:
    if not report.disagreements:
        return None
    return _table("Where the board and the audit disagree",
                  ("trial", "exception", "category", "board", "audit"),
                  [(escape(d.trial), d.exception or "", d.category, escape(d.board),
                    escape(d.audit)) for d in report.disagreements])


def _trials(report: Report) -> Table | None:
    rows = [t for t in report.trials if t.category != "passed" or t.adjudication]
    if not rows:
        return None
    return _table(
        "Trials that did not pass cleanly",
        ("task", "reward", "exception", "category", "signature", "model reached", "counted",
         "board", "Harbor 0.26", "evidence"),
        [(escape(t.task), reward(t.reward), t.exception or "",
          f"[{_STYLE[t.category]}]{t.category}[/]", t.signature or "", t.model_reached,
          t.counted_as, escape(board_cell(t)), policy_cell(t),
          escape(t.evidence[0]) if t.evidence else "") for t in rows])


def _time(console: Console, report: Report) -> None:
    """Time per trial, and what each agent timeout waited on."""
    if not report.trials:
        return
    times = Table(title="Time per trial")
    for col in time_plane.HEADER:
        times.add_column(col, overflow="fold")
    for t in report.trials:
        times.add_row(*(escape(c) for c in time_plane.cells(t)))
    console.print(times)
    for line in time_plane.timeout_lines(report.trials):
        console.print(f"agent timeout: {escape(line)}", highlight=False)


def _merge(console: Console, m: Merge, convention: str) -> None:
    console.print(_pairs("Merged with reruns", merge_headline(m, convention)))
    console.print(f"Merge rule: {escape(m.rule)}")
    tasks = Table(title="Attempts per task, in merge order")
    for col in ("task", "attempts", "merged", "counted"):
        tasks.add_column(col, overflow="fold")
    for t in m.tasks:
        chain = "\n".join(
            f"{i}. {escape(a.job)}/{escape(a.trial)} [{_STYLE[a.category]}]{a.category}[/] "
            f"reward {reward(a.reward)} ({a.status})"
            + (f": {escape(a.evidence[0])}" if a.evidence and a.category != "passed" else "")
            for i, a in enumerate(t.attempts, 1)
        )
        style = _STYLE.get(t.outcome)
        outcome = f"[{style}]{t.outcome}[/]" if style else t.outcome
        tasks.add_row(escape(t.task), chain, outcome, t.counted_as)
    console.print(tasks)
    for problem in m.problems:
        console.print(f"[yellow]merge problem:[/] {escape(problem)}", highlight=False)
