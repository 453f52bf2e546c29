"""Classify one trial: what happened, which signature explains it, and the evidence lines.

The order is the seed's audit procedure made explicit:
1. no readable result.json: insufficient_evidence (nothing to stand on);
2. CancelledError: cancelled (interrupted run; `harbor job resume` re-runs it);
3. reward 1: passed, or agent_timeout when the agent timed out and the verifier still passed it
   (the reward stands);
4. otherwise the first matching signature rule (rules.yaml) decides;
5. otherwise: AgentTimeoutError is agent_timeout (its reward stands), a graded 0 is the agent's
   error, and anything else is insufficient_evidence, with the exception named.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from audit import layout as L
from audit.evidence import TrialEvidence
from audit.rules import CompiledRule, Match

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


@dataclass
class Classification:
    category: str
    signature: str | None
    phase: str | None
    explanation: str
    evidence: list[str] = field(default_factory=list)


def classify(ev: TrialEvidence, rules: list[CompiledRule]) -> Classification:
    result = ev.result
    if result is None:
        missing = not any("corrupt" in p for p in ev.problems)
        return Classification(
            "insufficient_evidence",
            "no_result_json" if missing else "corrupt_result_json",
            None,
            "The trial dir has no readable result.json: the trial was killed before Harbor "
            "finalized it (SIGKILL, host crash) or the file is damaged. "
            "`harbor job resume -p <job dir>` deletes and re-runs such trials.",
            list(ev.problems),
        )
    info = result.exception_info
    etype = info.exception_type if info else None
    reward = result.reward

    if etype == "CancelledError":
        return Classification(
            "cancelled",
            "cancelled",
            None,
            "The job was interrupted (SIGTERM/SIGINT) while this trial ran. "
            "`harbor job resume -p <job dir>` re-runs cancelled trials.",
            _exception_line(ev),
        )
    if reward is not None and reward >= PASS_REWARD:
        if etype == "AgentTimeoutError":
            return Classification(
                "agent_timeout",
                "agent_timeout_graded",
                "agent",
                "The agent hit its timeout, but the verifier still ran and passed the task: "
                "the reward stands.",
                _exception_line(ev),
            )
        return Classification("passed", None, None, "Passed the verifier.", [])

    for rule in rules:
        matches = rule.match(ev, etype, reward)
        if matches is not None:
            head = _exception_line(ev)
            # The exception's first line is already shown once; keep the other matches.
            lines = [str(m) for m in matches if not (head and m.text in head[0])]
            if rule.rule.category == "verifier_timeout":
                lines += _pytest_progress(ev)
            return Classification(
                rule.rule.category,
                rule.rule.name,
                rule.rule.phase,
                rule.rule.explanation,
                head + lines,
            )
    return _fallback(ev, etype, reward)


_COLLECTED = re.compile(r"^collected (\d+) items?", re.MULTILINE)
_RESULT = re.compile(r"::\S+ (PASSED|FAILED|ERROR)\b")


def _pytest_progress(ev: TrialEvidence) -> list[str]:
    """How far pytest got before the verifier's budget ran out (what an adjudication needs)."""
    text = ev.text(L.VERIFIER_STDOUT)
    if not text:
        return []
    results = [m.group(1) for m in _RESULT.finditer(text)]
    collected = _COLLECTED.search(text)
    if not results and not collected:
        return []
    of = f" of {collected.group(1)} collected" if collected else ""
    return [
        f"{L.VERIFIER_STDOUT}: pytest progress before the timeout: "
        f"{results.count('PASSED')} passed, {results.count('FAILED')} failed, "
        f"{results.count('ERROR')} errors{of}"
    ]


def _fallback(ev: TrialEvidence, etype: str | None, reward: float | None) -> Classification:
    if etype == "AgentTimeoutError":
        graded = (
            f"the verifier still graded it ({reward:g}) and that reward stands"
            if reward is not None
            else "no reward was recorded"
        )
        return Classification(
            "agent_timeout",
            "agent_timeout",
            "agent",
            f"The agent ran out of time; {graded}. No infra signature in the evidence.",
            _exception_line(ev) + _verifier_tail(ev),
        )
    if reward is not None:
        return Classification(
            "agent_error",
            "graded_fail" if etype is None else f"graded_fail_{etype}",
            "verifier",
            f"The verifier graded the solution {reward:g} and no infra signature was found in "
            "the trial's logs, verifier output or trajectory.",
            _exception_line(ev) + _verifier_tail(ev),
        )
    if etype:
        return Classification(
            "insufficient_evidence",
            f"unexplained_{etype}",
            None,
            f"{etype} ended the trial without a reward and no signature rule explains it: "
            "read exception.txt and trial.log.",
            _exception_line(ev),
        )
    return Classification(
        "insufficient_evidence",
        "ungraded",
        None,
        "The trial has neither a reward nor an exception: verification was disabled or its "
        "result was lost.",
        [],
    )


def _exception_line(ev: TrialEvidence) -> list[str]:
    info = ev.result.exception_info if ev.result else None
    if not info or not info.exception_type:
        return []
    message = (info.exception_message or "").strip().splitlines()
    first = message[0] if message else ""
    if len(first) > 240:
        first = first[:237] + "..."
    return [f"{L.TRIAL_RESULT}: {info.exception_type}: {first}".rstrip(": ")]


def _verifier_tail(ev: TrialEvidence, n: int = 2) -> list[str]:
    text = ev.text(L.VERIFIER_STDOUT)
    if not text:
        return []
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [str(Match(f"{L.VERIFIER_STDOUT}:{i}", line[:240])) for i, line in lines[-n:]]
