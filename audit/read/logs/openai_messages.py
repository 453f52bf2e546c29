"""A custom agent's chat as OpenAI-style messages, wherever the agent kept it: a list of
`{role, content, tool_calls}` dicts inside result.json's `agent_result.metadata` (an agent's
`populate_context_post_run` stores what it likes there), or a `messages` list in a JSON file
of its own under agent/.

Assistant messages are model calls (their `tool_calls[].function.arguments` name the
command); `tool` messages answer them by `tool_call_id`. The dict that holds the list may say
how the run ended (`status`, `error`, `finish_reason`): that is the agent's own record.
"""

from __future__ import annotations

from audit.read.logs.common import TrialFiles, answer, arguments, command_of, content_text, sub
from audit.read.logs.model import Action, AgentLog, Call, RunEnd

_MAX_DEPTH = 4
_SKIP_FILES = ("trajectory.json", "mini-swe-agent.trajectory.json")


def _is_messages(value: object) -> bool:
    return (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(m, dict) and "role" in m for m in value[:5])
    )


def _find(node: object, path: str, depth: int = 0) -> list[tuple[str, list, dict]]:
    """(path, messages, the dict holding them) for every messages list under `node`."""
    if depth > _MAX_DEPTH or not isinstance(node, dict):
        return []
    out: list[tuple[str, list, dict]] = []
    for key, value in node.items():
        sub = f"{path}.{key}" if path else str(key)
        if _is_messages(value):
            out.append((sub, value, node))
        elif isinstance(value, dict):
            out.extend(_find(value, sub, depth + 1))
    return out


def read(files: TrialFiles) -> list[AgentLog]:
    logs: list[AgentLog] = []
    found = [
        (f"result.json agent_result.metadata.{p}", m, h)
        for p, m, h in _find(files.result_metadata() or {}, "")
    ]
    for rel in files.agent_files():
        if "/" in rel or not rel.endswith(".json") or rel in _SKIP_FILES:
            continue
        data = files.json(f"agent/{rel}")
        if isinstance(data, dict):
            found += [(f"agent/{rel} {p}", m, h) for p, m, h in _find(data, "")]
    for where, messages, holder in found:
        log = _read_messages(where, messages)
        status = holder.get("status")
        if isinstance(status, str) and status:
            error = holder.get("error")
            # Quoted from where the words are: the error's field, else the status itself.
            log.end = RunEnd(
                f"{where.rsplit('.', 1)[0]}.{'error' if error else 'status'}",
                status,
                str(error or holder.get("finish_reason") or ""),
                bool(error),
            )
        if log.events or log.end:
            logs.append(log)
    return logs


def _read_messages(where: str, messages: list) -> AgentLog:
    log = AgentLog("openai-messages")
    by_call: dict[str, int] = {}
    for i, message in enumerate(messages):
        at = f"{where}[{i}]"
        role = message.get("role")
        if role == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            log.events.append(Call(at, content_text(message.get("content")), bool(calls)))
            for call in calls:
                fn = sub(call, "function")
                command = command_of(arguments(fn.get("arguments")))
                if command:
                    by_call[str(call.get("id"))] = len(log.events)
                    log.events.append(Action(at, command))
        elif role == "tool":
            index = by_call.get(str(message.get("tool_call_id")))
            if index is None:
                continue
            old = log.events[index]
            text = content_text(message.get("content"))
            if isinstance(old, Action):
                log.events[index] = answer(old, text, at)
    return log
