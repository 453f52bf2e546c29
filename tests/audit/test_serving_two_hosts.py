"""The serving record with two workers, one lost mid-job (found by the two-host rehearsal,
tests/e2e/test_two_hosts.py: worker-a's link cut while a call was in flight there; the trial that
call belonged to timed out waiting for it while worker-b generated for the other trials, and the
audit called the timeout the agent's because *a* worker's generation counter rose).

The real Terminus-2 timeout trial of the reference samples with its last call left unanswered,
and a record of two workers in the sampler's shape (tests/audit/test_serving_record.py's helpers).
"""

from __future__ import annotations

from pathlib import Path

from audit.read import layout as L
from tests.audit.test_serving_record import (
    AGENT_END,
    AGENT_START,
    gateway_read,
    job,
    last_call_unanswered,
    verdict,
    worker_read,
    write_record,
)

OTHER = "http://10.0.0.12:30001"


def other_worker_read(t: float, generated: float) -> dict:
    read = worker_read(t, generated)
    return {**read, "url": f"{OTHER}/metrics"}


def two_workers(t_lost: float | None) -> list[dict]:
    """The first worker lost at `t_lost` (its endpoint refusing; None: never), the other
    generating for other trials throughout."""
    lines, mine, theirs = [], 0.0, 0.0
    for second in range(int(AGENT_START) - 5, int(AGENT_END) + 3):
        t = float(second)
        theirs += 40
        lines.append(other_worker_read(t, theirs))
        lines.append(gateway_read(t))
        if t_lost is None or t < t_lost:
            mine += 40
            lines.append(worker_read(t, mine))
        else:
            lines.append(worker_read(t, mine, ok=False))
    return lines


def judged(tmp_path: Path, t_lost: float | None, *, last_call_unanswered_: bool = True):
    """The real timeout trial's verdict beside a two-worker record."""
    job_dir = job(tmp_path)
    if last_call_unanswered_:
        last_call_unanswered(job_dir)
    write_record(job_dir, two_workers(t_lost))
    c, _ = verdict(job_dir)
    return c


def test_a_call_left_waiting_on_the_lost_worker_is_infra_while_the_other_generated(
        tmp_path: Path) -> None:
    c = judged(tmp_path, AGENT_START + 9)  # lost before the third call (37.08), never answered
    assert (c.category, c.signature) == ("infra", "serving_worker_down"), c
    quoted = [(p.where, p.quote) for p in c.proof if p.cause == "serving_record"]
    assert quoted and quoted[0][0].startswith(f"../{L.SERVING_RECORD}:")
    assert "Connection refused" in quoted[0][1]


def test_with_both_workers_up_the_timeout_stays_the_agents(tmp_path: Path) -> None:
    c = judged(tmp_path, None)
    assert (c.category, c.signature) == ("agent_timeout", "agent_timeout"), c


def test_a_worker_lost_after_the_last_answer_does_not_excuse_the_timeout(tmp_path: Path) -> None:
    """The real timeout's three calls were answered; a worker lost afterwards, the other
    generating: the time ran out in the agent's own command."""
    c = judged(tmp_path, AGENT_START + 12, last_call_unanswered_=False)
    assert (c.category, c.signature) == ("agent_timeout", "agent_timeout"), c
