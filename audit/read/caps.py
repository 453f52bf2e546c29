"""Where an agent's log or an exception says that a command ran past a per-command cap.

`cap_in()` finds the line, as Harbor, Terminus-2, Claude Code, OpenHands, mini-swe-agent and
Python's subprocess word it, with the cap's seconds and the command when the line names it.
The log readers (audit/read/logs/) attach it to the command it answers; what the command was
decides who is to blame (audit/judge/commands.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --- "a command ran past the cap", as each harness words it ---------------------------------
_CAP_PATTERNS = [
    # Harbor's docker environment exec, and Terminus-2's blocking tmux wait.
    re.compile(r"Command timed out after (?P<s>\d+(?:\.\d+)?) seconds"),
    # Terminus-2's timeout template (the next prompt after a command that outran its duration).
    re.compile(r"The previous command timed out after (?P<s>\d+(?:\.\d+)?) seconds"),
    # Python's subprocess.TimeoutExpired (mini-swe-agent puts it in the observation).
    re.compile(r"Command '(?P<cmd>.*?)' timed out after (?P<s>\d+(?:\.\d+)?) seconds", re.DOTALL),
    # OpenHands' bash session.
    re.compile(r"\[The command timed out after (?P<s>\d+(?:\.\d+)?) seconds"),
    re.compile(r"\[The command has no new output after (?P<s>\d+(?:\.\d+)?) seconds"),
    # Claude Code's Bash tool ("Command timed out after 2m 0.0s").
    re.compile(r"[Cc]ommand timed out after (?:(?P<m>\d+)m\s*)?(?P<s>\d+(?:\.\d+)?)s\b"),
    # mini-swe-agent 1.x's timeout template.
    re.compile(r"The last command <command>(?P<cmd>.*?)</command> timed out", re.DOTALL),
]


@dataclass(frozen=True)
class CapHit:
    seconds: float | None
    quote: str
    command: str | None  # when the message names the command itself


def cap_in(text: str | None) -> CapHit | None:
    if not text:
        return None
    for pattern in _CAP_PATTERNS:
        m = pattern.search(text)
        if m is None:
            continue
        groups = m.groupdict()
        seconds = float(groups["s"]) if groups.get("s") else None
        if seconds is not None and groups.get("m"):
            seconds += 60 * float(groups["m"])
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        quote = text[start : end if end != -1 else len(text)].strip()
        return CapHit(seconds, quote[:240], (groups.get("cmd") or "").strip() or None)
    return None
