"""A trial that failed because the serving plane failed, in the serving plane's own words.

The stack keeps the serving plane's own record beside the job (audit/read/serving.py): the
gateway's and every worker's metrics, read every few seconds. When the record shows the plane
failing while the trial's model calls waited (audit/read/timing.py gives their windows; the
agent's execution when the agent's record keeps none), the trial is infra, with the read that
shows it quoted (`../serving-metrics.jsonl:N`):

- `serving_worker_down`: the gateway reports a worker unhealthy or it left the gateway's pool,
  or its metrics endpoint stopped answering the sampler;
- `serving_circuit_open`: the gateway's circuit breaker for a worker is open;
- `serving_no_workers`: the gateway failed requests for want of a worker;
- `serving_5xx_burst`: the gateway answered a burst of 5xx on the model routes.

Only where the failure can be the plane's:
- a trial that ended on an exception without a reward, whose own words are the model
  endpoint's (a 5xx, a refused or unanswered connection, a timeout, a reply cut off): the
  record is the proof those words lacked;
- a trial whose agent ran out of time (AgentTimeoutError, graded or not), only when the time it
  lost to the failing plane counts: its last call still unanswered when time ran out, or at
  least LOST_SHARE of its agent's time spent waiting while the plane failed; and never while the
  record shows the model generating normally during the overlap (a worker read whose generation
  counter rose): a timeout while the model generated is the agent's, however slow; unless its
  last call was left unanswered while a worker was down (with several workers, the others'
  generation does not show that this call was served).
Any other graded trial keeps its grade (the agent finished its work).

`corroborate`: an infra verdict of the model endpoint (the trial's own words: 5xx, no model
reached) gets the record's read as a second proof when the record shows the plane failing
then, so the report quotes the plane beside the agent.
"""

from __future__ import annotations

from dataclasses import replace

from audit.judge import model_endpoint as ME
from audit.judge.context import JobContext
from audit.judge.detectors.common import HARBOR_TIMEOUTS, etype, exception_text
from audit.judge.verdict import Classification, Proof, exception_line, excuse
from audit.read import layout as L
from audit.read import serving as S
from audit.read.evidence import TrialEvidence
from audit.read.timing import TrialTime, clock, trial_time

SIGNATURES = {
    "worker_down": "serving_worker_down",
    "circuit_open": "serving_circuit_open",
    "no_workers": "serving_no_workers",
    "burst_5xx": "serving_5xx_burst",
}
# The share of its agent's time a timed-out trial must have waited on a failing plane.
LOST_SHARE = 0.25
# The endpoint's own words that a failing serving plane explains.
_PLANE_KINDS = ("server_error", "internal_error", "unreachable", "unanswered", "timeout",
                "not_json", "malformed_reply")
_EXPLANATION = (
    "The serving plane's own record, kept beside the job, shows it failing while this trial's "
    "model calls waited ({what}): the model could not answer, so the trial did not fail on the "
    "model's account. Rerun it once the serving plane is sound (the record: "
    f"{L.SERVING_RECORD} in the job dir)."
)
_WHAT = {
    "worker_down": "a worker down",
    "circuit_open": "the gateway's circuit breaker open for a worker",
    "no_workers": "requests failing with no worker available",
    "burst_5xx": "a burst of 5xx answers from the gateway",
}


def record_for(layout: L.JobLayout, ctx: JobContext) -> S.ServingRecord:
    """The job's serving record, read once per job."""
    record = ctx.memo.get("serving")
    if not isinstance(record, S.ServingRecord):
        record = S.read_record(layout)
        ctx.memo["serving"] = record
    return record


def record_of(ev: TrialEvidence, ctx: JobContext) -> S.ServingRecord:
    return record_for(ev.layout, ctx)


def timing_of(ev: TrialEvidence) -> TrialTime | None:
    return trial_time(ev.result, ev.json(L.AGENT_TRAJECTORY), want_windows=True)


def waits(time: TrialTime | None) -> list[tuple[float, float]]:
    """When the trial waited on the model: its call windows, else its agent's execution."""
    if time is None:
        return []
    if time.windows:
        return list(time.windows)
    if time.agent_start is not None and time.agent_end is not None:
        return [(time.agent_start, time.agent_end)]
    return []


def overlapping(record: S.ServingRecord, windows: list[tuple[float, float]]
                ) -> list[tuple[S.Failure, tuple[float, float]]]:
    """Each failure of the plane that held while a window waited (a failure read at `t` may
    have begun since the read before: one interval earlier)."""
    out = []
    for failure in record.failures():
        for start, end in windows:
            if failure.overlaps(start - record.interval_s, end):
                out.append((failure, (start, end)))
                break
    # The cause before its consequences: a worker down, then its circuit, then the requests.
    return sorted(out, key=lambda fw: (list(SIGNATURES).index(fw[0].kind), fw[0].first))


def _proof(failure: S.Failure, window: tuple[float, float]) -> Proof:
    return Proof("serving_record", failure.read.where, S.short(failure.quote),
                 f"{failure.reading}, while the trial waited on the model "
                 f"({clock(window[0])}-{clock(window[1])})")


def _lost_to_it(record: S.ServingRecord, found: list[tuple[S.Failure, tuple[float, float]]],
                time: TrialTime | None) -> bool:
    """A timed-out trial lost its time to the failing plane: its last call was unanswered while
    the plane failed, or it waited LOST_SHARE of its agent's time while the plane failed."""
    if time is None or not time.agent_s:
        return False
    if time.waiting_at_end and time.windows and any(w == time.windows[-1] for _, w in found):
        return True
    lost = 0.0
    for failure, (start, end) in found:
        lost += max(0.0, min(end, failure.last + record.interval_s)
                    - max(start, failure.first - record.interval_s))
    return lost >= LOST_SHARE * time.agent_s


def _left_waiting_on_a_lost_worker(found: list[tuple[S.Failure, tuple[float, float]]],
                                   time: TrialTime | None) -> bool:
    """Its last call was still unanswered when its time ran out, and a worker was down during
    that call: with several workers (two hosts, one lost mid-job) the others' generation for
    other trials does not show that this call was answered (found by the two-host rehearsal: a
    trial whose call hung on the lost host timed out while the other host generated, and was
    called the agent's)."""
    if time is None or not (time.waiting_at_end and time.windows):
        return False
    return any(f.kind == "worker_down" and w == time.windows[-1] for f, w in found)


def _endpoint_words(ev: TrialEvidence) -> ME.EndpointFailure | None:
    words = exception_text(ev)
    failed = next((c for log in ev.agent_logs() for c in log.calls if c.error), None)
    if failed is not None and failed.error:
        words = f"{words}\n{failed.error}"
    return ME.classify_words(words) if words.strip() else None


def serving_record(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    """The trial failed while the serving plane's own record shows it failing."""
    result = ev.result
    kind = etype(ev)
    if result is None or kind is None:
        return None
    timeout = kind == "AgentTimeoutError"
    if not timeout and (result.reward is not None or kind in HARBOR_TIMEOUTS):
        return None
    record = record_of(ev, ctx)
    if not record.present:
        return None
    if not timeout:
        words = _endpoint_words(ev)
        if words is None or words.kind not in _PLANE_KINDS:
            return None
    time = timing_of(ev)
    found = overlapping(record, waits(time))
    if not found:
        return None
    if timeout and (not _lost_to_it(record, found, time)
                    or (any(record.generating(start, end) for _, (start, end) in found)
                        and not _left_waiting_on_a_lost_worker(found, time))):
        return None
    failure, window = found[0]
    return excuse(
        "infra",
        SIGNATURES[failure.kind],
        "model",
        _EXPLANATION.format(what=_WHAT[failure.kind]),
        [_proof(f, w) for f, w in found[:3]],
        lead=exception_line(ev),
        more=[f"../{L.SERVING_RECORD}: {record.unreadable} unreadable lines skipped"]
        if record.unreadable else None,
    )


def corroborate(ev: TrialEvidence, ctx: JobContext, c: Classification) -> Classification:
    """An endpoint's infra verdict with the record's read beside it, when the record shows the
    plane failing while the trial waited."""
    if c.category != "infra" or not (c.signature or "").startswith(("model_endpoint",
                                                                     "model_never_reached")):
        return c
    record = record_of(ev, ctx)
    if not record.present:
        return c
    found = overlapping(record, waits(timing_of(ev)))
    if not found:
        return c
    proof = [_proof(f, w) for f, w in found[:2]]
    return replace(c, proof=[*c.proof, *proof], evidence=[*c.evidence, *map(str, proof)])
