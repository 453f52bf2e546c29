"""Time per trial and the serving plane beside it, as every report gives them.

`time_split`: a trial's time split into environment setup, waiting on the model, running
commands and verification (audit/read/timing.py), with the share of the agent's time spent
waiting on the model. `annotate_timeouts`: for each `agent_timeout`, what the serving plane
did while its agent ran (queue depth, running requests, generation, failed requests, workers
down), from the plane's own record (audit/read/serving.py). `serving_out`: the record over the
job for the HTML timeline, and the plane's own failures with the reads that show them.
"""

from __future__ import annotations

from audit.read.serving import ServingRecord
from audit.read.timing import TrialTime
from audit.score.scores import Out as _Out


class TimeSplit(_Out):
    setup_s: float | None
    model_s: float | None
    commands_s: float | None
    verification_s: float | None
    # Of the agent's execution, the share spent waiting on the model (None: not recorded).
    model_share: float | None
    calls: int
    # The agent's time ran out while a model call was unanswered.
    waiting_at_end: bool
    source: str
    agent_start: float | None = None
    agent_end: float | None = None
    # For an agent_timeout: what the serving plane did while the agent ran.
    serving: str | None = None


class PlaneFailure(_Out):
    kind: str
    at: str
    where: str
    quote: str
    reading: str


class ServingOut(_Out):
    interval_s: float
    reads: int
    unreadable: int
    # The plane over the job: {t, running, queued, throughput, errors, down} per point.
    points: list[dict]
    failures: list[PlaneFailure]


def time_split(time: TrialTime | None) -> TimeSplit | None:
    if time is None:
        return None
    share = time.model_share
    return TimeSplit(
        setup_s=_round(time.setup_s), model_s=_round(time.model_s),
        commands_s=_round(time.commands_s), verification_s=_round(time.verification_s),
        model_share=round(share, 3) if share is not None else None, calls=time.calls,
        waiting_at_end=time.waiting_at_end, source=time.source, agent_start=time.agent_start,
        agent_end=time.agent_end,
    )


def _round(value: float | None) -> float | None:
    return round(value, 1) if value is not None else None


def annotate_timeouts(rows: list, record: ServingRecord) -> None:
    """Each agent_timeout row's time gets what the serving plane did while its agent ran."""
    if not record.present:
        return
    for row in rows:
        t = row.time
        if row.category != "agent_timeout" or t is None or t.agent_start is None \
                or t.agent_end is None:
            continue
        t.serving = record.during(t.agent_start, t.agent_end).line()


def serving_out(record: ServingRecord) -> ServingOut | None:
    if not record.present:
        return None
    return ServingOut(
        interval_s=record.interval_s, reads=len(record.reads), unreadable=record.unreadable,
        points=record.timeline(),
        failures=[PlaneFailure(kind=f.kind, at=f.read.at, where=f.read.where, quote=f.quote,
                               reading=f.reading) for f in record.failures()][:200],
    )
