"""Raw model-API request/response dumps a harness keeps of every call: a folder per call (or per
episode) holding `request*.json` and `response*.json`, optionally `tool-results*.json`, anywhere
under agent/ (e.g. `agent/episodes/episode-N/`).

The response is read by its protocol, recognised from its own fields, never from the folder's
name:
- Anthropic Messages: `{"type": "message", "content": [blocks], "stop_reason", "usage":
  {input_tokens, output_tokens, cache_*}}`; a `tool_use` block's `input.command` is a command;
  an error body is `{"type": "error", "error": {"type", "message"}}`;
- OpenAI Chat Completions: `{"object": "chat.completion", "choices": [{"message": {content,
  tool_calls: [{function: {arguments}}]}, "finish_reason"}], "usage": {prompt_tokens,
  completion_tokens}}`;
- OpenAI Responses: `{"object": "response", "status", "output": [{type: message |
  function_call (arguments) | local_shell_call (action.command)}], "usage": {input_tokens,
  output_tokens}, "error"}`;
- any of them as an error: `{"error": {...}}` (OpenAI), with a `status`/`status_code` when the
  harness kept the HTTP status beside the body.
What a command printed is the tool result that answers its id: in the call's own
`tool-results*.json`, else in the next call's request (an Anthropic `tool_result` block, an
OpenAI `tool` message, a Responses `function_call_output`). A call whose commands got no result
is where the run stopped.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from audit.read.logs.common import (
    TrialFiles,
    answer,
    arguments,
    as_int,
    command_of,
    content_text,
    sub,
)
from audit.read.logs.model import Action, AgentLog, Call, Usage

_NUMBER = re.compile(r"(\d+)(?!.*\d)")
_EXIT = re.compile(r"^\W*exit[_ ]?code\W{0,3}(-?\d+)", re.IGNORECASE)


def _dirs(files: TrialFiles) -> list[str]:
    """Folders under agent/ that hold a response*.json, in call order (their last number)."""
    found = {
        f.rsplit("/", 1)[0]
        for f in files.agent_files()
        if "/" in f and re.search(r"(?:^|/)response[\w.-]*\.json$", f)
    }

    def order(d: str) -> tuple[str, int]:
        m = _NUMBER.search(d)
        return (_NUMBER.sub("", d), int(m.group(1)) if m else -1)

    return sorted(found, key=order)


def _one(files: TrialFiles, folder: str, stem: str) -> tuple[str, object] | None:
    for f in sorted(files.agent_files()):
        if f.startswith(folder + "/") and "/" not in f[len(folder) + 1 :]:
            name = f[len(folder) + 1 :]
            if re.match(stem + r"[\w.-]*\.json$", name):
                return f"agent/{f}", files.json(f"agent/{f}")
    return None


def protocol(body: object) -> str | None:
    """anthropic | chat | responses | error, from the response body's own fields."""
    if not isinstance(body, dict):
        return None
    if body.get("type") == "message" and isinstance(body.get("content"), list):
        return "anthropic"
    if isinstance(body.get("choices"), list):
        return "chat"
    if body.get("object") == "response" or isinstance(body.get("output"), list):
        return "responses"
    if body.get("type") == "error" or "error" in body:
        return "error"
    return None


def read(files: TrialFiles) -> AgentLog | None:
    folders = _dirs(files)
    if not folders:
        return None
    log = AgentLog("api-dumps")
    waiting: dict[str, int] = {}  # tool call id -> index of its Action
    for folder in folders:
        response = _one(files, folder, "response")
        request = _one(files, folder, "request")
        if request is not None:
            _answer(log, waiting, request[0], _results_in_request(request[1]))
        if response is None or protocol(response[1]) is None:
            continue
        where, body = response
        if isinstance(body, dict):
            _call(log, waiting, where, body)
        results = _one(files, folder, "tool-results")
        if results is not None:
            _answer(log, waiting, results[0], _result_blocks(results[1]))
    return log if log.events else None


def _call(log: AgentLog, waiting: dict[str, int], where: str, body: dict) -> None:
    kind = protocol(body)
    status = as_int(body.get("status_code")) or as_int(body.get("status"))
    at = _time(body.get("created_at") or body.get("created"))
    if kind == "error":
        error = sub(body, "error")
        words = str(error.get("message") or error.get("type") or body.get("error") or "")
        log.events.append(
            Call(where, "", False, None, None, words or "error", at=at, status=status)
        )
        return
    if kind == "anthropic":
        blocks = [b for b in body["content"] if isinstance(b, dict)]
        text = "\n".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        tools = [(str(b.get("id")), sub(b, "input")) for b in blocks if b.get("type") == "tool_use"]
        raw = sub(body, "usage")
        prompt = sum(
            as_int(raw.get(k)) or 0
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        usage = Usage(prompt, as_int(raw.get("output_tokens"))) if raw else Usage(None, None)
        finish = body.get("stop_reason")
    elif kind == "chat":
        choice = next((c for c in body["choices"] if isinstance(c, dict)), {})
        message = sub(choice, "message")
        text = content_text(message.get("content"))
        tools = [
            (str(c.get("id")), arguments(sub(c, "function").get("arguments")))
            for c in message.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        usage = _usage(body, "prompt_tokens", "completion_tokens")
        finish = choice.get("finish_reason")
    else:  # responses
        items = [i for i in body.get("output") or [] if isinstance(i, dict)]
        text = "\n".join(
            content_text(i.get("content")) for i in items if i.get("type") == "message"
        ).strip()
        tools = []
        for i in items:
            if i.get("type") == "function_call":
                tools.append((str(i.get("call_id") or i.get("id")), arguments(i.get("arguments"))))
            elif i.get("type") == "local_shell_call":
                command = sub(i, "action").get("command")
                line = " ".join(command) if isinstance(command, list) else command
                tools.append((str(i.get("call_id") or i.get("id")), {"command": line}))
        usage = _usage(body, "input_tokens", "output_tokens")
        finish = body.get("status")
        failed = sub(body, "error")
        if failed:
            log.events.append(
                Call(where, text, False, usage, str(finish), str(failed.get("message")), at=at)
            )
            return
    commands = [(i, command_of(a)) for i, a in tools]
    log.events.append(
        Call(where, text.strip(), bool(tools), usage, str(finish) if finish else None, at=at)
    )
    for call_id, command in commands:
        if command:
            waiting[call_id] = len(log.events)
            log.events.append(Action(where, command))


def _usage(body: dict, prompt: str, output: str) -> Usage:
    """The reply's usage block under its protocol's names; no block: a Usage that is missing."""
    raw = sub(body, "usage")
    return Usage(as_int(raw.get(prompt)), as_int(raw.get(output))) if raw else Usage(None, None)


def _result_blocks(data: object) -> list[tuple[str, str]]:
    """(tool call id, text) of every tool result in a list of blocks or messages."""
    out: list[tuple[str, str]] = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "tool_result":
            out.append((str(item.get("tool_use_id")), content_text(item.get("content"))))
        elif kind == "function_call_output":
            out.append((str(item.get("call_id")), content_text(item.get("output"))))
        elif item.get("role") == "tool":
            out.append((str(item.get("tool_call_id")), content_text(item.get("content"))))
        elif item.get("role") == "user" and isinstance(item.get("content"), list):
            out.extend(_result_blocks(item["content"]))
    return out


def _results_in_request(body: object) -> list[tuple[str, str]]:
    """The tool results a request carries back: those after its last assistant turn."""
    if not isinstance(body, dict):
        return []
    history = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(history, list):
        return []
    last = max(
        (i for i, m in enumerate(history) if isinstance(m, dict) and m.get("role") == "assistant"),
        default=-1,
    )
    return _result_blocks(history[last + 1 :])


def _answer(log: AgentLog, waiting: dict[str, int], where: str, results) -> None:
    for call_id, text in results:
        index = waiting.pop(call_id, None)
        if index is None:
            continue
        action = log.events[index]
        if not isinstance(action, Action):
            continue
        code = _EXIT.match(text)
        log.events[index] = answer(action, text, where, int(code.group(1)) if code else None)


def _time(value: object) -> str | None:
    """An epoch (`created`, `created_at`) as an ISO time; None when absent."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value, UTC).isoformat()
    return value if isinstance(value, str) else None
