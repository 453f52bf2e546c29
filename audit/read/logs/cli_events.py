"""JSONL event streams of CLI agents other than Claude Code (audit/read/logs/claude_code.py):
Codex's `codex exec --json` and Gemini CLI's `--output-format stream-json`, wherever the harness
kept them under agent/ (a `*.txt`/`*.jsonl` log, or an installed agent's `command-N/stdout.txt`).
The stream is recognised by its own event types, not by the file's name.

Codex (`codex-rs/exec`'s JSONL events): `thread.started`, `turn.started`, `item.started` /
`item.completed` with an `item` (`agent_message` text, `reasoning`, `command_execution` with
`command`, `aggregated_output`, `exit_code`, `status`, `file_change` with the files the
agent changed, `error` with `message`),
`turn.completed` with `usage` (`input_tokens`, `cached_input_tokens`, `output_tokens`),
`turn.failed` with `error.message`, and a top-level `error` with `message`.

Gemini CLI (its headless mode reference): `init` (session, model), `message` (`role`,
`content`, `delta` chunks to join), `tool_use` (`tool_name`, `tool_id`, `parameters`: the shell
tool's `command`), `tool_result` (`tool_id`, `status` success|error, `output`, `error`),
`error` (non-fatal), `result` (`status`, `error`, `stats` with token counts).
"""

from __future__ import annotations

from dataclasses import replace

from audit.read.logs.common import TrialFiles, answer, as_int, jsonl, sub
from audit.read.logs.model import Action, AgentLog, Call, RunEnd, Usage

_CODEX = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.completed"}
_GEMINI = {"init", "tool_use", "tool_result", "result"}


def _candidates(files: TrialFiles) -> list[str]:
    out = []
    for rel in files.agent_files():
        top = "/" not in rel and rel.endswith((".txt", ".jsonl", ".json"))
        if top or (rel.startswith("command-") and rel.endswith("/stdout.txt")):
            out.append(f"agent/{rel}")
    return out


def read(files: TrialFiles) -> list[AgentLog]:
    logs: list[AgentLog] = []
    for path in _candidates(files):
        text = files.text(path)
        if not text or '"type"' not in text:
            continue
        events = jsonl(text)
        kinds = {str(e.get("type")) for _, e in events}
        if kinds & _CODEX and {"item.completed", "turn.completed", "turn.failed"} & kinds:
            log = _codex(path, events)
        elif len(kinds & _GEMINI) >= 2:
            log = _gemini(path, events)
        else:
            continue
        if log.events or log.end:
            logs.append(log)
    return logs


def _codex(path: str, events: list[tuple[int, dict]]) -> AgentLog:
    log = AgentLog("codex")
    text: list[str] = []
    acted = False
    started: dict[str, int] = {}  # item id -> index of its Action
    for n, event in events:
        where = f"{path}:{n}"
        kind = event.get("type")
        item = sub(event, "item")
        if kind in ("item.started", "item.completed") and item.get("type") == "command_execution":
            acted = True
            command = str(item.get("command") or "")
            key = str(item.get("id") or command)
            output = item.get("aggregated_output")
            action = Action(where, command)
            if key in started:
                action = log.events[started[key]]  # type: ignore[assignment]
            else:
                started[key] = len(log.events)
                log.events.append(action)
            if kind == "item.completed" and isinstance(action, Action):
                log.events[started[key]] = answer(
                    action, str(output or ""), where, as_int(item.get("exit_code"))
                )
        elif kind == "item.completed" and item.get("type") == "file_change":
            log.changes.append(where)
        elif kind == "item.completed" and item.get("type") == "agent_message":
            text.append(str(item.get("text") or ""))
        elif kind == "item.completed" and item.get("type") == "error":
            log.end = RunEnd(where, "error", str(item.get("message") or ""), True)
        elif kind == "turn.completed":
            usage = sub(event, "usage")
            log.events.append(
                Call(
                    where,
                    "\n".join(text).strip(),
                    acted,
                    Usage(as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")),
                          as_int(usage.get("cached_input_tokens"))),
                )
            )
            text, acted = [], False
        elif kind in ("turn.failed", "error"):
            message = str(sub(event, "error").get("message") or event.get("message") or "")
            log.events.append(Call(where, "", False, None, None, message or "error"))
            log.end = RunEnd(where, "failed", message, True)
    return log


def _gemini(path: str, events: list[tuple[int, dict]]) -> AgentLog:
    log = AgentLog("gemini-cli")
    by_tool: dict[str, int] = {}
    chunks: list[str] = []
    first = ""
    for n, event in events:
        where = f"{path}:{n}"
        kind = event.get("type")
        if kind == "message" and event.get("role") == "assistant":
            chunks.append(str(event.get("content") or ""))
            first = first or where
        elif kind == "tool_use":
            _flush(log, chunks, first or where, acted=True)
            chunks, first = [], ""
            params = sub(event, "parameters")
            command = params.get("command")
            if isinstance(command, str) and command.strip():
                by_tool[str(event.get("tool_id"))] = len(log.events)
                log.events.append(Action(where, command, started=_stamp(event)))
        elif kind == "tool_result":
            index = by_tool.get(str(event.get("tool_id")))
            if index is None:
                continue
            action = log.events[index]
            output = event.get("output")
            if not isinstance(output, str):
                output = str(sub(event, "error").get("message") or "")
            if isinstance(action, Action):
                log.events[index] = answer(action, output, where, ended=_stamp(event))
        elif kind == "result":
            _flush(log, chunks, first or where, acted=False)
            chunks, first = [], ""
            stats = sub(event, "stats")
            prompt = as_int(stats.get("input_tokens"))
            answered = as_int(stats.get("output_tokens"))
            calls = log.calls
            if calls and (prompt or answered):
                last = calls[-1]
                log.events[log.events.index(last)] = replace(
                    last, usage=Usage(prompt, answered), usage_at=where
                )
            status = str(event.get("status") or "")
            error = sub(event, "error")
            message = str(error.get("message") or "")
            if status or message:
                log.end = RunEnd(where, status, message, status == "error" or bool(message))
                if message and not calls:
                    log.events.append(Call(where, "", False, None, None, message))
    _flush(log, chunks, first, acted=False)
    return log


def _flush(log: AgentLog, chunks: list[str], where: str, acted: bool) -> None:
    text = "".join(chunks).strip()
    if text or acted:
        log.events.append(Call(where, text, acted))


def _stamp(event: dict) -> str | None:
    value = event.get("timestamp")
    return value if isinstance(value, str) else None
