"""Report renderers: terminal table, Markdown, JSON and a self-contained HTML page."""

from __future__ import annotations

from collections.abc import Callable

from audit.score.report import Report

FORMATS = ("table", "json", "markdown", "html")


def render(report: Report, fmt: str, width: int | None = None, color: bool = False) -> str:
    from audit.output.render import html, markdown, table

    renderers: dict[str, Callable[[Report], str]] = {
        "json": lambda r: r.model_dump_json(indent=2) + "\n",
        "markdown": markdown.render,
        "html": html.render,
        "table": lambda r: table.render(r, width=width, color=color),
    }
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderers[fmt](report)
