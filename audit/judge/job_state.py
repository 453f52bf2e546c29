"""Did the job finish, or was it stopped from outside while trials ran? Read from its own files.

Harbor writes a trial's result.json whenever the trial ends, by error and by cancellation too
(reference §1.4, §3.2): a trial dir without one was stopped together with the Harbor process
(SIGKILL, a runner's `timeout`, a Ctrl-C that killed it, a lost machine), or is still running.
Which of the two, and whether the job as a whole finished, the job's own files tell:

- `result.json` `finished_at`: set when the job completes, null after an interrupt (§3.1);
- `lock.json`: the trials Harbor planned, against the trial dirs that were finalized;
- `job.log`: the lines Harbor and a runner leave when they stop it (`Trial X cancelled`, a
  received signal, KeyboardInterrupt);
- without any of those (no job result.json at all): the trial's own files, which show the phase
  it had reached when it stopped.

Each finding is a `Proof` of cause `job_stopped` quoting the file it came from (job files as
`../<file>`: a proof's place is relative to the trial dir). A job whose
files say nothing either way is `finished=None`: the trials without result.json are then
judged from what they left, and without that they are insufficient_evidence, never cancelled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from audit.judge.verdict import Proof, short
from audit.read import layout as L
from audit.read.models import JobResult
from contracts import jobdir

_STOP_MARKER = re.compile(
    r"(?i)(?:\bTrial \S+ cancelled\b|received (?:signal )?SIG(?:TERM|INT|KILL|HUP)\b|"
    r"\bKeyboardInterrupt\b|shutting down (?:gracefully|on signal)|"
    r"cancelled by (?:the )?(?:user|runner|orchestrator)|timeout: sending signal)"
)
_LOG_TAIL = 64 * 1024
# A proof read from the trial dir's file names rather than from one file's text.
LISTING = "trial dir listing"


@dataclass(frozen=True)
class JobRun:
    """What the job's files say about its end: finished True/False, or None (they do not say)."""

    finished: bool | None
    proof: tuple[Proof, ...] = ()
    result_present: bool = True


def read_job_run(
    layout: L.JobLayout, job_result: JobResult | None, result_present: bool, finalized: int
) -> JobRun:
    """`finalized`: how many trial dirs have a result.json."""
    if job_result is not None and jobdir.ended(job_result.finished_at):
        return JobRun(True)
    proof: list[Proof] = []
    if job_result is not None:
        proof.append(
            Proof(
                "job_stopped",
                f"../{L.JOB_RESULT}",
                "finished_at: null",
                "Harbor sets it when the job completes: the job was stopped or is still running",
            )
        )
    planned = _planned_trials(layout)
    if planned is not None and len(planned) > finalized:
        proof.append(
            Proof(
                "job_stopped",
                f"../{jobdir.JOB_LOCK}",
                f"name: {planned[-1]}" if planned[-1] else f"trials: {len(planned)} planned",
                f"the last of {len(planned)} trials lock.json plans; only {finalized} trial dirs "
                "were finalized with a result.json",
            )
        )
    marker = _stop_marker(layout)
    if marker is not None:
        proof.append(marker)
    if proof:
        return JobRun(False, tuple(proof), result_present)
    return JobRun(None, (), result_present)


def _planned_trials(layout: L.JobLayout) -> list[str] | None:
    """The task name of every trial lock.json plans ("" where it names none)."""
    raw = layout.read_text(jobdir.JOB_LOCK)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    trials = data.get("trials") if isinstance(data, dict) else None
    if not isinstance(trials, list):
        return None
    return [_task_name(t) for t in trials]


def _task_name(trial: object) -> str:
    task = trial.get("task") if isinstance(trial, dict) else None
    name = task.get("name") if isinstance(task, dict) else None
    return name if isinstance(name, str) else ""


def _stop_marker(layout: L.JobLayout) -> Proof | None:
    text = layout.read_text(L.JOB_LOG)
    if not text:
        return None
    start = max(0, len(text) - _LOG_TAIL)
    lines = text[start:].splitlines()
    offset = text.count("\n", 0, start)
    for i in range(len(lines) - 1, -1, -1):
        if _STOP_MARKER.search(lines[i]):
            return Proof(
                "job_stopped",
                f"../{L.JOB_LOG}:{offset + i + 1}",
                short(lines[i]),
                "the job was stopped from outside",
            )
    return None


def trial_left_mid_phase(files: list[str], trial_log: str | None) -> Proof | None:
    """The trial's own files that show it had started and not been finalized (no result.json).

    `files` are the trial's files relative to its dir.
    """
    if trial_log and trial_log.strip():
        lines = [ln for ln in trial_log.splitlines() if ln.strip()]
        return Proof(
            "job_stopped",
            f"{L.TRIAL_LOG}:{len(trial_log.splitlines())}",
            short(lines[-1]),
            "its last line; no result.json followed, which Harbor writes for every trial that "
            "ends (error and cancel included)",
        )
    started = sorted(f for f in files if f != L.TRIAL_RESULT)
    if not started:
        return None
    phase = "agent" if any(f.startswith(f"{L.AGENT_DIR}/") for f in started) else "setup"
    return Proof(
        "job_stopped",
        LISTING,
        short(", ".join(started[:6]) + (f" (+{len(started) - 6})" if len(started) > 6 else "")),
        f"it had reached its {phase} phase; no result.json followed, which Harbor writes for "
        "every trial that ends",
    )
