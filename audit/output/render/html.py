"""One self-contained HTML page: inline CSS and inline SVG charts, no script, no network.

Charts: outcomes by category, time per phase for each trial, tokens per task. Large jobs are
capped to the CHART_ROWS longest/largest rows so the page stays readable; the page says so.
"""

from __future__ import annotations

from html import escape

import audit.output.render.time_plane as time_plane
from audit.output.render.text import (
    board_cell,
    duration,
    families,
    headline,
    merge_headline,
    policy_detail,
    reward,
    trial_reached,
)
from audit.read import provenance as prov
from audit.read.models import PHASES
from audit.score.merge import Merge
from audit.score.report import Report

CHART_ROWS = 150

COLORS = {
    "passed": "#2e7d32",
    "agent_error": "#c62828",
    "agent_timeout": "#f9a825",
    "verifier_timeout": "#8e24aa",
    "infra": "#0277bd",
    "cancelled": "#757575",
    "insufficient_evidence": "#ef6c00",
}
PHASE_COLORS = {
    "environment_setup": "#90a4ae",
    "agent_setup": "#ffb74d",
    "agent_execution": "#42a5f5",
    "verifier": "#ab47bc",
}
TOKEN_COLORS = {"input": "#5c6bc0", "output": "#26a69a"}

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#212121;
max-width:1200px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top;
overflow-wrap:break-word}
table.trials{width:100%;table-layout:fixed}table.trials td{overflow-wrap:anywhere}
th{background:#f5f5f5}.k{font-weight:600;background:#fafafa}
.rule{background:#fff8e1;border-left:4px solid #f9a825;padding:8px 12px;font-size:13px}
.cat{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-size:12px}
.ev{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:11px;white-space:pre-wrap;
color:#424242}
svg text{font-family:system-ui,sans-serif;font-size:11px;fill:#212121}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.note{color:#616161;font-size:12px}
.att{margin:2px 0 4px}.att.superseded,.att.unused{opacity:.75}
details summary{cursor:pointer}pre.manifest{font-size:11px;background:#fafafa;padding:8px;
overflow-x:auto;white-space:pre-wrap}
"""


def render(report: Report) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Audit of {escape(report.job.name)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Audit of {escape(report.job.name)}</h1>",
        _summary(report),
        f'<p class="rule"><b>Scoring rule.</b> {escape(report.scoring_rule)}</p>',
    ]
    parts += ["<h2>Where the board and the audit disagree</h2>", _disagreements(report)]
    if report.merge:
        parts += ["<h2>Merged with reruns</h2>", _merge(report.merge, report.convention)]
    if report.provenance is not None:
        parts += ["<h2>Provenance</h2>", _provenance(report.provenance)]
    parts += [
        "<h2>Outcomes by category</h2>",
        _category_chart(report),
        _signatures(report),
        "<h2>Time per phase, per trial</h2>",
        _phase_chart(report),
        "<h2>Time per trial</h2>",
        time_plane.html(report.trials, report.serving, COLORS),
        "<h2>Tokens per task</h2>",
        _token_chart(report),
        "<h2>Adjudications</h2>",
        _adjudications(report),
        "<h2>Rerun (infra)</h2>",
        _rerun(report),
        "<h2>Trials</h2>",
        _trials(report),
    ]
    if report.problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in report.problems)
        parts += ["<h2>Evidence problems</h2>", f"<ul>{items}</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _summary(report: Report) -> str:
    rows = "".join(
        f'<tr><td class="k">{escape(k)}</td><td>{escape(v)}</td></tr>' for k, v in headline(report)
    )
    return f"<table>{rows}</table>"


def _legend(colors: dict[str, str]) -> str:
    items = "".join(
        f'<span><i style="background:{c}"></i>{escape(k)}</span>' for k, c in colors.items()
    )
    return f'<div class="legend">{items}</div>'


def _bars(
    rows: list[tuple[str, list[tuple[float, str, str]]]],
    unit: str,
    markers: list[str] | None = None,
) -> str:
    """Horizontal stacked bars: rows of (label, [(value, color, tooltip)]).

    `markers` optionally gives one color per row, drawn as a square before the label (the
    trial's category in the phase chart).
    """
    label_w, bar_w, row_h = 260, 640, 16
    total_max = max((sum(v for v, _, _ in segs) for _, segs in rows), default=0) or 1
    height = row_h * len(rows) + 24
    out = [f'<svg width="{label_w + bar_w + 90}" height="{height}" role="img">']
    for i, (label, segs) in enumerate(rows):
        y = i * row_h + 4
        short = label if len(label) <= 40 else label[:38] + "..."
        pad = 16 if markers else 6
        out.append(
            f'<text x="{label_w - pad}" y="{y + 11}" text-anchor="end">{escape(short)}</text>'
        )
        if markers:
            out.append(
                f'<rect x="{label_w - 12}" y="{y + 2}" width="8" height="8" fill="{markers[i]}"/>'
            )
        x = float(label_w)
        for value, color, tip in segs:
            w = bar_w * value / total_max
            if w <= 0:
                continue
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{row_h - 4}" '
                f'fill="{color}"><title>{escape(tip)}</title></rect>'
            )
            x += w
        total = sum(v for v, _, _ in segs)
        out.append(f'<text x="{x + 4:.1f}" y="{y + 11}">{escape(_fmt(total, unit))}</text>')
    axis_y = len(rows) * row_h + 8
    out.append(
        f'<line x1="{label_w}" y1="{axis_y}" x2="{label_w + bar_w}" y2="{axis_y}" '
        'stroke="#9e9e9e"/>'
    )
    out.append(
        f'<text x="{label_w + bar_w}" y="{axis_y + 13}" text-anchor="end">'
        f"{escape(_fmt(total_max, unit))}</text>"
    )
    out.append("</svg>")
    return "".join(out)


def _fmt(value: float, unit: str) -> str:
    return duration(value) if unit == "s" else f"{int(value):,}"


def _category_chart(report: Report) -> str:
    rows = [
        (cat, [(float(n), COLORS[cat], f"{cat}: {n} trials")])
        for cat, n in report.categories.items()
    ]
    return _bars(rows, "n")


def _phase_chart(report: Report) -> str:
    timed = [t for t in report.trials if any(v for v in t.durations.values())]
    if not timed:
        return '<p class="note">No phase timestamps in the trials.</p>'
    timed.sort(key=lambda t: -sum(v or 0 for v in t.durations.values()))
    note = ""
    if len(timed) > CHART_ROWS:
        note = f'<p class="note">The {CHART_ROWS} longest of {len(timed)} trials.</p>'
        timed = timed[:CHART_ROWS]
    rows = [
        (
            t.trial,
            [
                (t.durations.get(p) or 0.0, PHASE_COLORS[p], f"{p}: {duration(t.durations.get(p))}")
                for p in PHASES
            ],
        )
        for t in timed
    ]
    markers = [COLORS.get(t.category, "#000") for t in timed]
    legend = (
        _legend(PHASE_COLORS)
        + '<div class="legend"><span>square before a trial = its category:</span>'
        + "".join(
            f'<span><i style="background:{c}"></i>{escape(k)}</span>' for k, c in COLORS.items()
        )
        + "</div>"
    )
    return legend + note + _bars(rows, "s", markers)


def _token_chart(report: Report) -> str:
    per_task: dict[str, list[int]] = {}
    for t in report.trials:
        acc = per_task.setdefault(t.task, [0, 0])
        acc[0] += t.tokens.input
        acc[1] += t.tokens.output
    items = [(task, v) for task, v in per_task.items() if v[0] or v[1]]
    if not items:
        return '<p class="note">No token counts in the trials (oracle or nop agent).</p>'
    items.sort(key=lambda kv: -(kv[1][0] + kv[1][1]))
    note = ""
    if len(items) > CHART_ROWS:
        note = f'<p class="note">The {CHART_ROWS} largest of {len(items)} tasks.</p>'
        items = items[:CHART_ROWS]
    rows = [
        (
            task,
            [
                (float(i), TOKEN_COLORS["input"], f"input: {i:,}"),
                (float(o), TOKEN_COLORS["output"], f"output: {o:,}"),
            ],
        )
        for task, (i, o) in items
    ]
    return _legend(TOKEN_COLORS) + note + _bars(rows, "n")


def _signatures(report: Report) -> str:
    if not report.signatures:
        return ""
    rows = "".join(
        f"<tr><td>{escape(sig)}</td><td>{n}</td>"
        f"<td>{escape(report.signature_meanings.get(sig, ''))}</td></tr>"
        for sig, n in report.signatures.items()
    )
    return f"<table><tr><th>signature</th><th>trials</th><th>meaning</th></tr>{rows}</table>"


def _adjudications(report: Report) -> str:
    if not report.adjudications:
        return ('<p class="note">None: the adjusted scores apply the audit\'s verdicts '
                'alone.</p>')
    rows = "".join(
        f"<tr><td>{escape(a.task)}</td><td>{a.decision}</td>"
        f"<td>{escape(', '.join(a.raw_outcome))}</td><td>{escape(a.reason)}</td></tr>"
        for a in report.adjudications
    )
    head = "<tr><th>task</th><th>decision</th><th>raw outcome</th><th>reason</th></tr>"
    return f"<table>{head}{rows}</table>"


def _rerun(report: Report) -> str:
    if not report.rerun:
        return '<p class="note">No trial was classified infra.</p>'
    return f'<p>Harbor task filters:</p><p class="ev">{escape(" ".join(report.rerun_args))}</p>'


def _trials(report: Report) -> str:
    # Failures first (in category order), passes last: the reader is here for the failures.
    order = {c: i for i, c in enumerate(COLORS)}
    order["passed"] = len(order)
    trials = sorted(report.trials, key=lambda t: (order.get(t.category, 99), t.trial))
    head = (
        "<tr><th>task</th><th>trial</th><th>reward</th><th>exception</th><th>category</th>"
        "<th>signature</th><th>model reached</th><th>counted as</th><th>board</th>"
        "<th>explanation and evidence</th></tr>"
    )
    rows = []
    for t in trials:
        color = COLORS.get(t.category, "#000")
        details = escape(t.explanation) if t.category != "passed" else ""
        if t.adjudication:
            details += (
                f"<br><b>Adjudicated {escape(t.adjudication['decision'])}:</b> "
                f"{escape(t.adjudication['reason'])}"
            )
        if t.harbor_policy is not None and (t.category != "passed" or t.harbor_policy.differs):
            details += f"<br><i>{escape(policy_detail(t))}</i>"
        if t.category != "passed":
            details += f"<br><small>evidence: {escape(families(t))}</small>"
        if t.evidence:
            details += '<div class="ev">' + escape("\n".join(t.evidence)) + "</div>"
        rows.append(
            f"<tr><td>{escape(t.task)}</td><td>{escape(t.trial)}</td><td>{reward(t.reward)}</td>"
            f"<td>{escape(t.exception or '')}</td>"
            f'<td><span class="cat" style="background:{color}">{t.category}</span></td>'
            f"<td>{escape(t.signature or '')}</td>"
            f'<td title="{escape(trial_reached(t.model_reached_detail))}">'
            f"{escape(t.model_reached)}</td><td>{t.counted_as}</td>"
            f"<td>{escape(board_cell(t))}</td><td>{details}</td></tr>"
        )
    cols = "".join(f'<col style="width:{w}%">' for w in (10, 11, 5, 9, 9, 9, 6, 6, 9, 26))
    return f'<table class="trials"><colgroup>{cols}</colgroup>{head}{"".join(rows)}</table>'


def _merge(m: Merge, convention: str) -> str:
    facts = "".join(
        f'<tr><td class="k">{escape(k)}</td><td>{escape(v)}</td></tr>'
        for k, v in merge_headline(m, convention)
    )
    out = [
        f'<p class="rule"><b>Merge rule.</b> {escape(m.rule)}</p>',
        f"<table>{facts}</table>",
        "<h3>Attempts per task</h3>",
        _merged_tasks(m),
    ]
    if m.problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in m.problems)
        out += ["<h3>Merge problems</h3>", f"<ul>{items}</ul>"]
    return "\n".join(out)


def _disagreements(report: Report) -> str:
    if not report.disagreements:
        return ('<p class="note">None: the board counts exactly the trials the audit judges on '
                "the model.</p>")
    head = ("<tr><th>trial</th><th>task</th><th>exception</th><th>category</th><th>board</th>"
            "<th>audit</th></tr>")
    rows = "".join(
        f"<tr><td>{escape(d.trial)}</td><td>{escape(d.task)}</td>"
        f"<td>{escape(d.exception or '')}</td><td>{_badge(d.category)}</td>"
        f"<td>{escape(d.board)}</td><td>{escape(d.audit)}</td></tr>"
        for d in report.disagreements
    )
    return f"<table>{head}{rows}</table>"


def _badge(category: str) -> str:
    color = COLORS.get(category, "#000")
    return f'<span class="cat" style="background:{color}">{escape(category)}</span>'


def _merged_tasks(m: Merge) -> str:
    head = (
        "<tr><th>task</th><th>attempts, in merge order</th><th>merged outcome</th>"
        "<th>counted as</th></tr>"
    )
    rows = []
    for t in m.tasks:
        attempts = []
        for i, a in enumerate(t.attempts, 1):
            detail = escape(a.explanation)
            if a.evidence:
                detail += '<div class="ev">' + escape("\n".join(a.evidence)) + "</div>"
            sig = f" <code>{escape(a.signature)}</code>" if a.signature else ""
            summary = (
                f"{i}. {_badge(a.category)} {escape(a.job)} / {escape(a.trial)}, reward "
                f"{reward(a.reward)}, <i>{a.status}</i>{sig}"
            )
            if a.category == "passed" and not a.evidence:
                attempts.append(f'<div class="att {a.status}">{summary}</div>')
            else:
                attempts.append(
                    f'<div class="att {a.status}"><details><summary>{summary}</summary>'
                    f"{detail}</details></div>"
                )
        outcome = _badge(t.outcome) if t.outcome in COLORS else escape(t.outcome)
        rows.append(
            f"<tr><td>{escape(t.task)}</td><td>{''.join(attempts)}</td><td>{outcome}</td>"
            f"<td>{t.counted_as}</td></tr>"
        )
    cols = "".join(f'<col style="width:{w}%">' for w in (18, 64, 10, 8))
    return f'<table class="trials"><colgroup>{cols}</colgroup>{head}{"".join(rows)}</table>'


def _provenance(data: dict) -> str:
    facts = "".join(
        f'<tr><td class="k">{escape(k)}</td><td>{escape(v)}</td></tr>'
        for k, v in prov.key_facts(data)
    )
    table = f"<table>{facts}</table>" if facts else ""
    return (
        f"{table}<details><summary>Full manifest</summary>"
        f'<pre class="manifest">{escape(prov.dumps(data))}</pre></details>'
    )
