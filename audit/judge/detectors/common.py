"""Helpers every detector shares: the trial's exception, its traceback frames, quoting a line."""

from __future__ import annotations

import re

from audit.judge.verdict import Proof, short
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
CLIENT_LIBS = re.compile(
    r"/(?:openai|litellm|anthropic|httpx|httpcore|aiohttp|requests|urllib3|"
    r"tenacity|google/genai)/"
)
STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")
HARBOR = re.compile(r"/harbor/(?:trial|environments|agents|verifier|orchestrators|llms|utils)/")


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


def owner_of(path: str) -> str | None:
    if STDLIB.search(path):
        return None
    if CLIENT_LIBS.search(path):
        return "client"
    if HARBOR.search(path):
        return "harbor"
    return "agent"


def innermost_owner(text: str) -> str | None:
    """Who raised: `client` (a model/HTTP client library), `harbor`, `agent` code, or None."""
    for path in reversed(frames(text)):
        owner = owner_of(path)
        if owner is not None:
            return owner
    return None


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


_TESTS_REPORTED = re.compile(
    r"(?m)^=+ .*\b\d+ (?:passed|failed|error|errors)\b.* in [\d.]+s|^\d+ (?:passed|failed)\b"
)


def tests_reported(ev: TrialEvidence) -> bool:
    return bool(_TESTS_REPORTED.search(ev.text(L.VERIFIER_STDOUT) or ""))
