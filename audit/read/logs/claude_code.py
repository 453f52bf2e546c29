"""Claude Code's stream (`agent/claude-code.txt`, `--output-format stream-json`) or its session
files (`agent/sessions/**/*.jsonl`), one JSON event a line.

`assistant` events carry `message.content` blocks (`text`, `thinking`, `tool_use` with the
Bash tool's `input.command`) and `message.usage` (`input_tokens`, `output_tokens`, cache
counts); one message can span several events with the same `message.id`. `user` events carry
the `tool_result` blocks that answer a `tool_use` id. The final `result` event says how the run
ended (`subtype`, `is_error`, `result`): an endpoint failure reads `API Error: <status> ...`
there and in a synthetic assistant message.
"""

from __future__ import annotations

from dataclasses import replace

from audit.read.logs.common import TrialFiles, answer, as_int, content_text, jsonl, sub
from audit.read.logs.model import Action, AgentLog, Call, RunEnd, Usage

STREAM = "agent/claude-code.txt"


def _paths(files: TrialFiles) -> list[str]:
    if "claude-code.txt" in files.agent_files():
        return [STREAM]
    return [
        f"agent/{f}"
        for f in files.agent_files()
        if f.startswith("sessions/") and f.endswith(".jsonl") and "/subagents/" not in f
    ]


def read(files: TrialFiles) -> AgentLog | None:
    paths = _paths(files)
    if not paths:
        return None
    log = AgentLog("claude-code")
    calls: dict[str, int] = {}  # message id -> index of its Call in log.events
    actions: dict[str, int] = {}  # tool_use id -> index of its Action
    for path in paths:
        for n, event in jsonl(files.text(path)):
            where = f"{path}:{n}"
            kind = event.get("type")
            message = sub(event, "message")
            if kind == "assistant":
                _assistant(log, event, message, where, calls, actions)
            elif kind == "user":
                _results(log, message, where, actions)
            elif kind == "result":
                log.end = RunEnd(
                    where,
                    str(event.get("subtype") or ""),
                    str(event.get("result") or ""),
                    bool(event.get("is_error")),
                )
    return log if log.events or log.end else None


def _assistant(log, event, message, where, calls, actions) -> None:
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    text = "\n".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text").strip()
    tools = [b for b in blocks if b.get("type") == "tool_use"]
    raw = message.get("usage") if isinstance(message.get("usage"), dict) else None
    usage = None
    if raw is not None:
        prompt = sum(
            as_int(raw.get(k)) or 0
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        usage = Usage(prompt, as_int(raw.get("output_tokens")))
    error = text if (event.get("isApiErrorMessage") or text.startswith("API Error")) else None
    mid = str(message.get("id") or where)
    if mid in calls:
        old = log.events[calls[mid]]
        if isinstance(old, Call):
            log.events[calls[mid]] = replace(
                old,
                text="\n".join(t for t in (old.text, text) if t),
                acted=old.acted or bool(tools),
                usage=usage or old.usage,
                finish_reason=message.get("stop_reason") or old.finish_reason,
                error=error or old.error,
            )
    else:
        calls[mid] = len(log.events)
        log.events.append(Call(where, text, bool(tools), usage, message.get("stop_reason"), error))
    for block in tools:
        data = sub(block, "input")
        command = data.get("command")
        if isinstance(command, str) and command.strip():
            actions[str(block.get("id"))] = len(log.events)
            log.events.append(Action(where, command))


def _results(log, message, where, actions) -> None:
    for block in message.get("content") or []:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        index = actions.get(str(block.get("tool_use_id")))
        if index is None:
            continue
        action = log.events[index]
        text = content_text(block.get("content"))
        if isinstance(action, Action):
            log.events[index] = answer(action, text, where)
