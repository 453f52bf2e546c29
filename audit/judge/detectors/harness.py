"""The agent's own code raised (not Harbor, not the model client): its harness crashed.

Run after the endpoint detector, which has already taken the crashes whose traceback shows the
endpoint's answer behind them (audit/judge/detectors/endpoint.py).
"""

from __future__ import annotations

from audit.judge.context import JobContext
from audit.judge.detectors.common import STDLIB, etype, exception_text, frames, innermost_owner
from audit.judge.verdict import Classification, exception_line, short
from audit.read import layout as L
from audit.read.evidence import TrialEvidence


def agent_harness_crash(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    if ev.result is None or ev.result.reward is not None:
        return None
    kind = etype(ev)
    if not kind or kind.endswith(("TimeoutError", "CancelledError")):
        return None
    text = exception_text(ev)
    if innermost_owner(ev) != "agent":
        return None
    frame = next((p for p in reversed(frames(text)) if not STDLIB.search(p)), "")
    line = next((ln for ln in text.splitlines() if frame and frame in ln), "")
    evidence = exception_line(ev) + (
        [f"{ev.exception_source or L.TRIAL_EXCEPTION}: raised in {short(line)}"] if line else []
    )
    return Classification(
        "agent_error",
        "agent_harness_crash",
        "agent",
        f"The agent's own code raised {kind} (innermost frame in the agent, not in Harbor or "
        "the model client), so the run stopped before verification. A harness bug counts "
        "against the agent; fix the harness and rerun if you are measuring the model alone.",
        evidence,
    )
