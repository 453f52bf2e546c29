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

    summary = Table(title=f"Audit of {report.job.name}", show_header=False)
    summary.add_column(style="bold")
    summary.add_column()
    for key, value in headline(report):
        summary.add_row(key, escape(value))
    console.print(summary)
    console.print(f"Scoring rule: {escape(report.scoring_rule)}")

    cats = Table(title="Outcomes by category")
    cats.add_column("category")
    cats.add_column("trials", justify="right")
    for cat, n in report.categories.items():
        cats.add_row(f"[{_STYLE[cat]}]{cat}[/]", str(n))
    console.print(cats)

    if report.signatures:
        sigs = Table(title="Signatures")
        sigs.add_column("signature")
        sigs.add_column("trials", justify="right")
        sigs.add_column("meaning", overflow="fold")
        for sig, n in report.signatures.items():
            sigs.add_row(sig, str(n), escape(report.signature_meanings.get(sig, "")))
        console.print(sigs)

    if report.adjudications:
        adj = Table(title="Adjudications (change the adjusted score only)")
        for col in ("task", "decision", "raw outcome", "reason"):
            adj.add_column(col, overflow="fold")
        for a in report.adjudications:
            adj.add_row(escape(a.task), a.decision, ", ".join(a.raw_outcome), escape(a.reason))
        console.print(adj)

    if report.disagreements:
        dis = Table(title="Where the board and the audit disagree")
        for col in ("trial", "exception", "category", "board", "audit"):
            dis.add_column(col, overflow="fold")
        for d in report.disagreements:
            dis.add_row(escape(d.trial), d.exception or "", d.category, escape(d.board),
                        escape(d.audit))
        console.print(dis)

    rows = [t for t in report.trials if t.category != "passed" or t.adjudication]
    if rows:
        trials = Table(title="Trials that did not pass cleanly")
        cols = ("task", "reward", "exception", "category", "signature", "model reached",
                "counted", "board", "Harbor 0.26", "evidence")
        for col in cols:
            trials.add_column(col, overflow="fold")
        for t in rows:
            trials.add_row(
                escape(t.task),
                reward(t.reward),
                t.exception or "",
                f"[{_STYLE[t.category]}]{t.category}[/]",
                t.signature or "",
                t.model_reached,
                t.counted_as,
                escape(board_cell(t)),
                policy_cell(t),
                escape(t.evidence[0]) if t.evidence else "",
            )
        console.print(trials)
    _time(console, report)
    if report.merge:
        _merge(console, report.merge, report.convention)
    if report.provenance is not None:
        facts = Table(
            title="Provenance (the full manifest: --format json, or --out writes provenance.json)",
            show_header=False,
        )
        facts.add_column(style="bold")
        facts.add_column(overflow="fold")
        for key, value in prov.key_facts(report.provenance):
            facts.add_row(key, escape(value))
        console.print(facts)
    for problem in report.problems:
        console.print(f"[yellow]evidence problem:[/] {escape(problem)}", highlight=False)
    return buf.getvalue()


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
    summary = Table(title="Merged with reruns", show_header=False)
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    for key, value in merge_headline(m, convention):
        summary.add_row(key, escape(value))
    console.print(summary)
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
