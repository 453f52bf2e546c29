"""tmux failures read in tmux's own words (issue #34).

Harbor drives Terminus-2 and its derivatives through tmux: the model's keystrokes go to the
pane as `tmux send-keys` arguments, and every call is an exec into the sandbox. When such a call
fails, tmux says why, and the words decide:

- a usage error of `send-keys` (tmux's argument parser: `command send-keys: unknown flag -m`,
  `invalid flag -`): tmux refused the arguments the harness's driver built from the model's own
  keystrokes (a chunk that starts with `-` read as a flag). Nothing outside answered wrongly:
  the harness's driver failed on the model's input, the agent's failure;
- the client cannot reach its server's socket (`error connecting to <socket> (No such file or
  directory)`, tmux's client) right after the agent's own last commands mounted over or removed
  the socket's directory (`mount ... /tmp`, `rm -rf /tmp/...`): the agent's doing;
- anything else (an exec killed from outside, a server gone with nothing of the agent's to
  explain it) is left to the rules of rules.yaml, as before.
"""

from __future__ import annotations

import re

from audit.judge.context import JobContext
from audit.judge.detectors.common import etype, exception_text
from audit.judge.verdict import Classification, exception_line, short
from audit.read import readings
from audit.read.evidence import TrialEvidence

_USAGE = re.compile(r"command send-keys: (?:unknown|invalid) (?:flag|option) -\S*")
_SOCKET = re.compile(r"error connecting to (?P<path>/\S+) \((?:No such file or directory)\)")


def tmux_own_words(ev: TrialEvidence, ctx: JobContext) -> Classification | None:
    if not readings.on("tmux_own_words"):
        return None
    if ev.result is None or ev.result.reward is not None or etype(ev) != "RuntimeError":
        return None
    text = exception_text(ev)
    usage = _USAGE.search(text)
    if usage is not None:
        return Classification(
            "agent_error",
            "tmux_usage_error",
            "agent",
            "tmux refused the send-keys arguments the harness's driver built from the model's "
            f"own keystrokes (`{usage.group(0)}`: a usage error, not a failure of tmux or the "
            "sandbox, which both answered): the agent harness failed on the model's input.",
            exception_line(ev),
        )
    socket = _SOCKET.search(text)
    if socket is not None:
        return _socket_removed(ev, socket.group("path"))
    return None


def _socket_removed(ev: TrialEvidence, socket: str) -> Classification | None:
    """The agent's last commands mounted over or removed a directory that holds the socket."""
    parents = [p for p in _ancestors(socket) if p != "/"]
    for log in ev.agent_logs():
        actions = log.actions
        if not actions:
            continue
        last = [a for a in actions if a.where == actions[-1].where]
        for action in last:
            for line in action.command.splitlines():
                if any(_hides(line, parent) for parent in parents):
                    return Classification(
                        "agent_error",
                        "agent_removed_tmux_socket",
                        "agent",
                        f"tmux could no longer reach its socket {socket} right after the agent's "
                        "own last command mounted over or removed a directory that holds it "
                        "(quoted): the agent cut off the terminal it was driven through.",
                        exception_line(ev) + [f"{action.where}: {short(line)}"],
                    )
    return None


def _ancestors(path: str) -> list[str]:
    parts = path.rstrip("/").split("/")
    return ["/".join(parts[:i]) or "/" for i in range(len(parts) - 1, 0, -1)]


def _hides(line: str, directory: str) -> bool:
    """The command line mounts onto, unmounts or recursively removes `directory`."""
    d = re.escape(directory.rstrip("/"))
    return bool(
        re.search(rf"\b(?:mount|umount)\b[^\n;&|]*\s{d}/?(?=\s|$|;|&)", line)
        or re.search(rf"\brm\s+(?:-\S*[rR]\S*\s+)+(?:\S+\s+)*{d}(?:/\*?)?(?=\s|$|;|&)", line)
    )
