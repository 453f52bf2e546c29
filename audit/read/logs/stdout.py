"""A harness's own plain stdout (a text log under agent/, not JSON): what it ran and how it ended.

No schema to lean on, so only what a console log says in any harness's words is read:
- commands it echoes before running them: a shell's xtrace (`+ cmd`), a prompt (`$ cmd`), or a
  `Running:` / `Executing:` / `Command:` line; the lines up to the next such line are its output,
  with a per-command cap when a harness's words for one are there (audit/read/caps.py); a blank
  line ends an output;
- how the run ended: the last line, when it is an error (a Python exception's last line, an
  `Error:` / `error:` / `FATAL` line, an HTTP status) and not a command's output: the run's end
  in the harness's own words. The judge takes it for the endpoint's only when it names a model
  client's exception (audit/judge/detectors/endpoint.py).
JSON logs (the event streams, messages) and the files other readers own are skipped.
"""

from __future__ import annotations

import re

from audit.read.logs.common import TrialFiles, answer
from audit.read.logs.model import Action, AgentLog, RunEnd

_COMMAND = re.compile(r"^(?:\+{1,3} |\$ |(?:Running|Executing|Command|exec)\s*:\s*)(?P<cmd>\S.*)$")
_ENDS_IN_ERROR = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception)\b.*|(?:Error|ERROR|error|FATAL|Fatal)\b[:\s].*|"
    r".*\b(?:HTTP|status(?: code)?|Error code)\W{0,3}[45]\d\d\b.*)$"
)
# Files other readers own, and what Harbor writes there itself.
_OWNED = (
    "trajectory.json",
    "claude-code.txt",
    "terminus_2.pane",
    "recording.cast",
    "oracle.txt",
    "exit-code.txt",
)


def read(files: TrialFiles) -> list[AgentLog]:
    logs = []
    for rel in files.agent_files():
        if "/" in rel or not rel.endswith((".txt", ".log")) or rel in _OWNED:
            continue
        path = f"agent/{rel}"
        text = files.text(path)
        if not text or text.lstrip().startswith(("{", "[")):
            continue  # JSON: read by the readers of its format
        log = _read(path, text)
        if log.events or log.end:
            logs.append(log)
    return logs


def _read(path: str, text: str) -> AgentLog:
    log = AgentLog("stdout")
    lines = text.splitlines()
    current: int | None = None
    output: list[str] = []

    def close(until: int) -> None:
        if current is None:
            return
        action = log.events[current]
        if isinstance(action, Action) and output:
            log.events[current] = answer(action, "\n".join(output), f"{path}:{until}")

    for n, line in enumerate(lines, 1):
        m = _COMMAND.match(line.strip())
        if m:
            close(n - 1)
            current = len(log.events)
            output = []
            log.events.append(Action(f"{path}:{n}", m.group("cmd")))
        elif current is not None and line.strip():
            output.append(line)
        elif current is not None:
            close(n - 1)  # a blank line ends a command's output
            current, output = None, []
    close(len(lines))
    tail = [(n, ln.strip()) for n, ln in enumerate(lines, 1) if ln.strip()]
    in_output = current is not None and bool(output) and tail and output[-1].strip() == tail[-1][1]
    if tail and not in_output and _ENDS_IN_ERROR.match(tail[-1][1]):
        n, last = tail[-1]
        log.end = RunEnd(f"{path}:{n}", "error", last, True)
    return log
