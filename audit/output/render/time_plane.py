"""Time per trial and the serving plane's timeline, in every format (the table, markdown and
HTML renderers call these; JSON carries the same fields).

Each trial's time is split into setup (environment and agent), waiting on the model, running
commands and verification (audit/score/time_split.py); each agent_timeout says what share of
its agent's time went to waiting on the model and what the serving plane did meanwhile. The
HTML page draws the serving plane over the job (running and queued requests summed over the
workers, failed requests, workers down) with each trial's window beneath it.
"""

from __future__ import annotations

from html import escape

from audit.output.render.text import duration
from audit.read.timing import clock, epoch
from audit.score.rows import TrialRow
from audit.score.time_split import ServingOut

HEADER = ("trial", "category", "setup", "waiting on the model", "running commands",
          "verification", "model share")
CHART_ROWS = 150


def share(value: float | None) -> str:
    return "" if value is None else f"{value * 100:.0f}%"


def cells(t: TrialRow) -> tuple[str, ...]:
    s = t.time
    if s is None:
        return (t.trial, t.category, "", "", "", "", "")
    return (t.trial, t.category, duration(s.setup_s), duration(s.model_s),
            duration(s.commands_s), duration(s.verification_s), share(s.model_share))


def timeout_lines(trials: list[TrialRow]) -> list[str]:
    """One line per agent_timeout: its waiting on the model, and the serving plane meanwhile."""
    out = []
    for t in trials:
        s = t.time
        if t.category != "agent_timeout" or s is None:
            continue
        waited = ("waiting on the model not recorded by the agent" if s.model_share is None
                  else f"waited on the model {share(s.model_share)} of its agent's time "
                  f"({s.calls} calls" + ("; the last one unanswered when time ran out)"
                                         if s.waiting_at_end else ")"))
        plane = s.serving or "no serving record beside the job"
        out.append(f"{t.trial}: {waited}; the serving plane meanwhile: {plane}")
    return out


def markdown(trials: list[TrialRow]) -> list[str]:
    out = ["## Time per trial", "", "| " + " | ".join(HEADER) + " |",
           "|---|---|---:|---:|---:|---:|---:|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(t)) + " |" for t in trials]
    lines = timeout_lines(trials)
    if lines:
        out += ["", "Agent timeouts:", ""] + [f"- {line}" for line in lines]
    return out


def html(trials: list[TrialRow], serving: ServingOut | None, colors: dict[str, str]) -> str:
    """The time table and, with a serving record, the timeline with the trials beneath."""
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADER)
    shown = trials[:CHART_ROWS]
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in cells(t)) + "</tr>"
                   for t in shown)
    note = (f'<p class="note">The first {CHART_ROWS} of {len(trials)} trials.</p>'
            if len(trials) > CHART_ROWS else "")
    lines = timeout_lines(trials)
    timeouts = ("<p><b>Agent timeouts</b></p><ul>" + "".join(
        f"<li>{escape(x)}</li>" for x in lines) + "</ul>") if lines else ""
    table = f"<table><tr>{head}</tr>{body}</table>{note}{timeouts}"
    return table + "<h2>The serving plane, with the trials</h2>" + timeline(trials, serving,
                                                                            colors)


def timeline(trials: list[TrialRow], serving: ServingOut | None,
             colors: dict[str, str]) -> str:
    if serving is None or not serving.points:
        return ('<p class="note">No serving record beside the job (a job without a serving '
                "plane, or one run before the stack kept it).</p>")
    windows = [(t, a, b) for t in trials
               if (a := epoch(t.started_at)) is not None and (b := epoch(t.finished_at))
               is not None]
    points = serving.points
    t0 = min([points[0]["t"], *[a for _, a, _ in windows]])
    t1 = max([points[-1]["t"] + serving.interval_s, *[b for _, _, b in windows]])
    span = max(t1 - t0, 1.0)
    left, width, plot_h, row_h = 200, 760, 140, 12
    rows = windows[:CHART_ROWS]
    height = plot_h + 40 + row_h * len(rows) + 20
    top = max([max(p["running"], p["queued"]) for p in points] + [1.0])

    def x(t: float) -> float:
        return left + width * (t - t0) / span

    def y(v: float) -> float:
        return 10 + (plot_h - 10) * (1 - v / top)

    out = [f'<svg width="{left + width + 20}" height="{height}" role="img">']
    for p in points:  # workers down: a red band over that read
        if p["down"]:
            out.append(f'<rect x="{x(p["t"]):.1f}" y="10" width="'
                       f'{max(1.0, width * serving.interval_s / span):.1f}" '
                       f'height="{plot_h - 10}" fill="#ffcdd2"><title>a worker down at '
                       f'{clock(p["t"])}</title></rect>')
    for key, color in (("running", "#1565c0"), ("queued", "#ef6c00")):
        path = " ".join(f"{x(p['t']):.1f},{y(p[key]):.1f}" for p in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                   'stroke-width="1.5"/>')
    for p in points:
        if p["errors"]:
            out.append(f'<line x1="{x(p["t"]):.1f}" y1="{plot_h}" x2="{x(p["t"]):.1f}" '
                       f'y2="{plot_h - 12}" stroke="#c62828" stroke-width="2"><title>'
                       f'{p["errors"]} failed requests at {clock(p["t"])}</title></line>')
    out.append(f'<text x="{left - 6}" y="18" text-anchor="end">{top:g} requests</text>')
    out.append(f'<text x="{left - 6}" y="{plot_h}" text-anchor="end">0</text>')
    out.append(f'<line x1="{left}" y1="{plot_h}" x2="{left + width}" y2="{plot_h}" '
               'stroke="#9e9e9e"/>')
    out.append(f'<text x="{left}" y="{plot_h + 14}">{clock(t0)}</text>')
    out.append(f'<text x="{left + width}" y="{plot_h + 14}" text-anchor="end">'
               f"{clock(t1)}</text>")
    for i, (t, a, b) in enumerate(rows):
        ry = plot_h + 30 + i * row_h
        label = t.trial if len(t.trial) <= 30 else t.trial[:28] + "..."
        out.append(f'<text x="{left - 6}" y="{ry + 9}" text-anchor="end">{escape(label)}'
                   "</text>")
        tip = f"{t.trial}: {t.category}, {clock(a)}-{clock(b)}"
        if t.time and t.time.model_share is not None:
            tip += f", waiting on the model {share(t.time.model_share)}"
        out.append(f'<rect x="{x(a):.1f}" y="{ry}" width="{max(1.0, x(b) - x(a)):.1f}" '
                   f'height="{row_h - 3}" fill="{colors.get(t.category, "#000")}">'
                   f"<title>{escape(tip)}</title></rect>")
    out.append("</svg>")
    legend = ('<div class="legend"><span><i style="background:#1565c0"></i>running requests'
              '</span><span><i style="background:#ef6c00"></i>queued requests</span><span>'
              '<i style="background:#c62828"></i>failed requests</span><span><i style="'
              'background:#ffcdd2"></i>a worker down</span><span>bars: each trial, start to '
              "end, in its category's color</span></div>")
    failures = "".join(
        f"<li>{escape(f.at)} {escape(f.kind)}: {escape(f.reading)} "
        f'<span class="ev">{escape(f.where)}: {escape(f.quote)}</span></li>'
        for f in serving.failures[:20])
    listed = f"<p><b>The plane's own failures</b></p><ul>{failures}</ul>" if failures else ""
    return legend + "".join(out) + listed
