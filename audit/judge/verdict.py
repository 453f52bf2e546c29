"""What the audit concludes about one trial, and the one rule every verdict passes: no excuse
without proof.

A verdict that puts a non-pass up for rerun (`infra`, `cancelled`: RERUN_CATEGORIES) says the
failure was outside the model's control. If it is wrong, the rerun may pass and the published
score rises for a failure that was the model's: the worst error the audit can make. So such a
verdict must carry at least one `Proof`: a line quoted from a file of the trial or of its job
(`where`, `quote`) of a kind that shows an OUTSIDE cause (`cause`, one of OUTSIDE_CAUSES).
`admit()` enforces it in one place (audit/judge/classify.py calls it on every verdict): a rerun
verdict without such proof becomes `insufficient_evidence`, never stays `infra`, whatever
detector or rule produced it. The rule is written down for people in audit/RULES.md.

A proof is the evidence, not a phrase match: it names the file (and line or step) it was read
from and quotes what is there, so a reader can open the file and check it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from audit.read import layout as L
from audit.read.evidence import TrialEvidence

CATEGORIES = (
    "passed",
    "agent_error",
    "agent_timeout",
    "verifier_timeout",
    "infra",
    "cancelled",
    "insufficient_evidence",
)
# The verdicts that list a trial for rerun (audit/score/submission.py RERUN).
RERUN_CATEGORIES = ("infra", "cancelled")

PASS_REWARD = 1.0
MAX_LINE = 240

OutsideCause = Literal[
    "endpoint_response",
    "network_outside",
    "environment_event",
    "host_platform",
    "serving_config",
    "setup_failed",
    "job_stopped",
    "serving_record",
    "launch_config",
]
# What each kind of proof must show; a proof of another kind excuses nothing.
OUTSIDE_CAUSES: dict[str, str] = {
    "endpoint_response": "the model endpoint's own answer (an error status or body, a reply "
    "missing what the protocol requires such as `usage`, a refused connection)",
    "network_outside": "a request to an endpoint outside the agent's control failed (its host "
    "named, not one the agent started or configured)",
    "environment_event": "the container or the daemon failed: a SIGKILL no timeout explains, "
    "the OOM killer, a full disk, an exec that never started, a trivial command or one of "
    "Harbor's own that never returned",
    "host_platform": "the host cannot run the task's binaries (CPU emulation)",
    "serving_config": "the serving plane was configured short: the window the server serves "
    "and the larger one the agent was told, both quoted",
    "setup_failed": "the environment or the agent's installation failed before the model was "
    "asked anything",
    "job_stopped": "the job was stopped from outside while the trial ran (a signal Harbor "
    "recorded, a job that never finished, a trial left mid-phase)",
    "serving_record": "the serving plane's own record beside the job shows it failing while "
    "the trial's model calls waited (a worker unhealthy, removed or not answering, a circuit "
    "breaker open, requests failing with no worker, a burst of 5xx), the read quoted",
    "launch_config": "the operator's launch configuration kept the model from being reached: "
    "the model client's own words that it could not build a request from the address it was "
    "given",
}


# The families of evidence a trial can hold (issue #34): every verdict says which ones its trial
# had, so a reader sees what it rests on. Harbor's record alone decides an owner only where its
# own words name the cause (audit/judge/calibrate.py).
FAMILIES: dict[str, str] = {
    "harbor_record": "Harbor's record of the trial (result.json, trial.log)",
    "exception_chain": "the exception chain: its traceback",
    "agent_log": "the agent's own log",
    "verifier_output": "the verifier's output",
    "serving_record": "the serving plane's own record beside the job",
    "job_trials": "the job's other trials",
}
# What Harbor keeps of every trial whatever the agent: the families of "Harbor's record alone".
HARBOR_ONLY = frozenset({"harbor_record", "exception_chain", "verifier_output", "job_trials"})


@dataclass(frozen=True)
class Proof:
    """One quoted line that shows the failure came from outside the model's control."""

    cause: OutsideCause
    where: str  # `file:line`, `file step N`, or a file and the field read from it
    quote: str  # verbatim from that place (shortened with "..." past MAX_LINE)
    reading: str = ""  # what the quote shows, in the audit's words (optional)

    def __str__(self) -> str:
        text = f"{self.where}: {self.quote}"
        return f"{text} ({self.reading})" if self.reading else text

    def valid(self) -> bool:
        return self.cause in OUTSIDE_CAUSES and bool(self.where.strip() and self.quote.strip())


@dataclass
class Classification:
    category: str
    signature: str | None
    phase: str | None
    explanation: str
    evidence: list[str] = field(default_factory=list)
    # The endpoint a network or model-endpoint verdict blames (None when it names none).
    endpoint: str | None = None
    # What shows an outside cause; required for RERUN_CATEGORIES (see admit()).
    proof: list[Proof] = field(default_factory=list)
    # The evidence families (FAMILIES) the trial had, set by audit/judge/classify.py.
    families: tuple[str, ...] = ()

    @property
    def record_alone(self) -> bool:
        """The trial kept only what Harbor records of every trial: no log of the agent's own,
        no serving record."""
        return bool(self.families) and set(self.families) <= HARBOR_ONLY


def excuse(
    category: str,
    signature: str,
    phase: str | None,
    explanation: str,
    proof: list[Proof],
    lead: list[str] | None = None,
    endpoint: str | None = None,
    more: list[str] | None = None,
) -> Classification:
    """A rerun verdict: its evidence is the lead lines (the exception), then every proof."""
    lines = list(lead or [])
    for p in proof:
        # The exception is quoted once: a proof that only repeats the lead line is not shown.
        if not any(p.quote in line for line in lines):
            lines.append(str(p))
    lines += [m for m in more or [] if m not in lines]
    return Classification(category, signature, phase, explanation, lines, endpoint, proof)


def admit(c: Classification) -> Classification:
    """The rule: a verdict that puts a non-pass up for rerun stands only with proof.

    Without a valid Proof the verdict becomes insufficient_evidence; the signature keeps what
    was suspected (`unproven_<signature>`) so the report shows where to look.
    """
    if c.category not in RERUN_CATEGORIES or any(p.valid() for p in c.proof):
        return c
    return replace(
        c,
        category="insufficient_evidence",
        signature=f"unproven_{c.signature or c.category}",
        explanation=f"Looks like {c.category} ({c.signature}), but nothing in the trial's "
        "files proves the cause was outside the model's control, so it is not put up for "
        f"rerun. {c.explanation}",
        proof=[],
    )


def short(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def exception_line(ev: TrialEvidence) -> list[str]:
    """The exception that ended the trial, quoted once with the file it is in."""
    info = ev.result.exception_info if ev.result else None
    if not info or not info.exception_type:
        return []
    message = (info.exception_message or "").strip().splitlines()
    first = message[0] if message else ""
    source = ev.exception_source or L.TRIAL_RESULT
    return [f"{source}: {info.exception_type}: {short(first)}".rstrip(": ")]


def exception_where(ev: TrialEvidence) -> str:
    """Where exception_line() quotes from: exception.txt, or result.json's exception_info."""
    return ev.exception_source or f"{L.TRIAL_RESULT} exception_info"


def exception_quote(ev: TrialEvidence) -> str:
    info = ev.result.exception_info if ev.result else None
    if not info or not info.exception_type:
        return ""
    message = (info.exception_message or "").strip().splitlines()
    return short(f"{info.exception_type}: {message[0] if message else ''}".rstrip(": "))
