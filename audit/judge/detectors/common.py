"""Helpers every detector shares: the trial's exception, its traceback frames, quoting a line."""

from __future__ import annotations

import re

from audit.judge.verdict import Proof, short
from audit.read import chain as C
from audit.read import layout as L
from audit.read.evidence import Chunk, TrialEvidence
from audit.read.memo import by_text


def etype(ev: TrialEvidence) -> str | None:
    info = ev.result.exception_info if ev.result else None
    return info.exception_type if info else None


def exception_text(ev: TrialEvidence) -> str:
    return "\n".join(c.text for c in ev.source("exception"))


def ungraded(ev: TrialEvidence) -> bool:
    return ev.result is not None and ev.result.reward is None


HARBOR_TIMEOUTS = {
    "AgentTimeoutError",
    "VerifierTimeoutError",
    "AgentSetupTimeoutError",
    "EnvironmentStartTimeoutError",
}

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>\S+)')
STDLIB = C.STDLIB  # Python's own files (frames that act for whoever called them)
# Who raised, in the words the detectors use, from the layer the chain's root cause arose in
# (audit/read/chain.py: file paths and the configured agent, no list of libraries).
_OWNER = {
    "model_client": "client",
    "agent": "agent",
    "environment": "harbor",
    "verifier": "harbor",
    "harbor": "harbor",
}


def frames(text: str) -> list[str]:
    return [m.group("path") for m in _FRAME.finditer(text)]


def frame_lines(text: str) -> list[tuple[str, str, str]]:
    """(path, function, source line) of every traceback frame, innermost last."""
    out: list[tuple[str, str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m:
            source = lines[i + 1].strip() if i + 1 < len(lines) else ""
            out.append((m.group("path"), m.group("func"), "" if _FRAME.search(source) else source))
    return out


def owner_of(ev: TrialEvidence, path: str) -> str | None:
    """`agent`, `harbor` (its trial, environments, verifier, model layer) or None (Python, or a
    library: they act for whoever called them)."""
    kind = C.layer(path, ev.agent())
    if kind in ("library", "stdlib"):
        return None
    return "agent" if kind == "agent" else "harbor"


def innermost_owner(ev: TrialEvidence) -> str | None:
    """Who raised the root cause: `client` (the model client), `harbor`, `agent`, or None."""
    found = ev.origin()
    return _OWNER.get(found.layer) if found else None


def first_hit(chunks: list[Chunk], pattern: re.Pattern[str]) -> tuple[str, str] | None:
    """(where, line) of the first line of `chunks` the pattern matches."""
    for c in chunks:
        hit = _first_line(c.text, pattern)
        if hit is not None:
            return c.where(hit[0]), short(hit[1])
    return None


@by_text()
def _first_line(text: str, pattern: re.Pattern[str]) -> tuple[int, str] | None:
    """(number, text) of the first line `pattern` matches in `text` (pure: remembered)."""
    m = pattern.search(text)
    if not m:
        return None
    line_no = text.count("\n", 0, m.start()) + 1
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.start())
    return line_no, text[start : end if end != -1 else None]


def proof_at(cause, chunks: list[Chunk], pattern: re.Pattern[str], reading: str = ""):
    hit = first_hit(chunks, pattern)
    return Proof(cause, hit[0], hit[1], reading) if hit else None


def last_line(chunks: list[Chunk]) -> tuple[str, str] | None:
    for c in reversed(chunks):
        lines = [(i, ln) for i, ln in enumerate(c.text.splitlines(), 1) if ln.strip()]
        if lines:
            i, ln = lines[-1]
            return c.where(i), short(ln)
    return None


_SUMMARY = re.compile(r"(?m)^=+ (?P<counts>.*\b\d+ (?:passed|failed|errors?)\b.*) in [\d.]+s")
_JUDGED = re.compile(r"\b[1-9]\d* (?:passed|failed)\b")
_PLAIN = re.compile(r"(?m)^[1-9]\d* (?:passed|failed)\b")


def tests_reported(ev: TrialEvidence) -> bool:
    """A test ran to a verdict: pytest's summary counts a passed or failed test. A summary of
    errors alone (every test failed in its fixtures or collection) judged nothing."""
    text = ev.text(L.VERIFIER_STDOUT) or ""
    found = _SUMMARY.search(text)
    if found:
        return bool(_JUDGED.search(found.group("counts")))
    return bool(_PLAIN.search(text))
