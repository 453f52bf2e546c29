"""The terminal error of an agent log no other reader knows, and of the output Harbor captured
when the agent's command exited non-zero.

An agent the audit has no reader for still leaves words about how its run ended. Without a
schema only what any tool's log means is read, and only the END of the run (issue #34):
- a JSON summary of the run whose `status` is an error (`error`, `failed`, `failure`, `aborted`)
  with its words (`reason`, `error`, `message`);
- an error-level JSON event (`level`/`severity` error or fatal, or `type`/`event` error or
  fatal) with its words;
- a plain `error:` line (`error: ...`, `<program>: error: ...`, `Error: ...`, `fatal: ...`).
The run's terminal error is the last such record, and only when it is among the last
TERMINAL_TAIL records of the file: an error followed by more work was retried or recovered (a
429 retried earlier in a run that went on is not how it ended). The judge takes it as the run's
end only when the run ended in failure (audit/judge/detectors/endpoint.py), and judges it by the
words it already knows.

Harbor's NonZeroAgentExitCodeError carries the agent's captured output in its message
(`stdout: ...`, `stderr: ...`): it is read the same way, the only record of the agent a job may
keep (a leaderboard submission keeps result.json alone).
"""

from __future__ import annotations

import json
import re

from audit.read import readings
from audit.read.logs.common import TrialFiles
from audit.read.logs.model import AgentLog, RunEnd

# How many records may follow the terminal error (a completion event, a summary, a line naming
# the crash report): more than that and the run went on after it.
TERMINAL_TAIL = 5
_ERROR_STATUS = {"error", "failed", "failure", "aborted", "fatal"}
_ERROR_LEVEL = {"error", "fatal", "critical"}
_WORD_KEYS = ("reason", "error", "message", "msg", "detail")
_ERROR_LINE = re.compile(
    r"^(?:[\w./-]+:\s+)?(?:error|fatal)(?:\[[^\]]*\])?:\s*(?P<words>\S.*)$", re.IGNORECASE
)
_LOGS = (".txt", ".log", ".json", ".jsonl")
_CAPTURED = re.compile(r"(?s)\bstdout:\s?(?P<out>.*?)(?:\nstderr:\s?(?P<err>.*))?$")
RESULT = "result.json"
EXIT_ERROR = "NonZeroAgentExitCodeError"


def read(files: TrialFiles, known: set[str]) -> list[AgentLog]:
    """A log for every agent file no reader read (`known`) that ends on an error, and one for
    the output a non-zero exit captured."""
    if not readings.on("terminal_error"):
        return []
    logs = []
    for rel in files.agent_files():
        path = f"agent/{rel}"
        if path in known or "/" in rel or not rel.endswith(_LOGS):
            continue
        text = files.text(path)
        end = _terminal(text, path) if text else None
        if end is not None:
            logs.append(AgentLog("terminal", end=end))
    captured = exit_output(files) if readings.on("exit_output_words") else None
    if captured is not None:
        end = _terminal(captured, f"{RESULT} exception_info")
        if end is not None:
            logs.append(AgentLog("exit-output", end=end))
    return logs


def exit_output(files: TrialFiles) -> str | None:
    """The output Harbor captured from the agent's command that exited non-zero."""
    data = files.json(RESULT)
    info = data.get("exception_info") if isinstance(data, dict) else None
    if not isinstance(info, dict) or info.get("exception_type") != EXIT_ERROR:
        return None
    found = _CAPTURED.search(str(info.get("exception_message") or ""))
    if found is None:
        return None
    parts = [p for p in (found.group("out"), found.group("err")) if p and p.strip() != "None"]
    return "\n".join(parts) or None


def _terminal(text: str, path: str) -> RunEnd | None:
    document = _load(text) if text.lstrip().startswith("{") else {}
    records: list[tuple[int, str | None, str]] = []  # (line, words if an error, its kind)
    if document:
        records = [(1, *_summary(document))]
    else:
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                records.append((n, *_error_of(line.strip())))
    errors = [(i, r) for i, r in enumerate(records) if r[1]]
    if not errors:
        return None
    index, (n, words, kind) = errors[-1]
    if len(records) - 1 - index > TERMINAL_TAIL:
        return None
    where = path if "exception_info" in path else f"{path}:{n}"
    return RunEnd(where, kind, words or "", True)


def _error_of(line: str) -> tuple[str | None, str]:
    """(the words, the kind of record) when the line is an error record, else (None, "")."""
    if line.startswith("{"):
        event = _load(line)
        words, kind = _summary(event)
        if words:
            return words, kind
        return _event(event)
    m = _ERROR_LINE.match(line)
    return (m.group("words"), "line") if m else (None, "")


def _load(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _words(node: dict) -> str | None:
    for key in _WORD_KEYS:
        value = node.get(key)
        if isinstance(value, dict):
            value = value.get("message") or value.get("reason")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _summary(node: dict) -> tuple[str | None, str]:
    status = node.get("status")
    if isinstance(status, str) and status.lower() in _ERROR_STATUS:
        return _words(node), "summary"
    return None, ""


def _event(node: dict) -> tuple[str | None, str]:
    level = node.get("level") or node.get("severity")
    kind = node.get("type") or node.get("event")
    if (isinstance(level, str) and level.lower() in _ERROR_LEVEL) or (
        isinstance(kind, str) and kind.lower() in ("error", "fatal")
    ):
        return _words(node), "event"
    return None, ""
