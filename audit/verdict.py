"""What the audit concludes about one trial, and the small helpers every detector shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from audit import layout as L
from audit.evidence import TrialEvidence

CATEGORIES = (
    "passed",
    "agent_error",
    "agent_timeout",
    "verifier_timeout",
    "infra",
    "cancelled",
    "insufficient_evidence",
)

PASS_REWARD = 1.0
MAX_LINE = 240


@dataclass
class Classification:
    category: str
    signature: str | None
    phase: str | None
    explanation: str
    evidence: list[str] = field(default_factory=list)
    # The endpoint a network or model-endpoint verdict blames (None when it names none).
    endpoint: str | None = None


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
