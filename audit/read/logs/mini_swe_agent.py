"""mini-swe-agent's own trajectory: `agent/mini-swe-agent.trajectory.json` (Harbor's
mini-swe-agent agent has it written there and converts it to ATIF afterwards).

`messages` is the chat: assistant replies carry the command as a `tool_calls` entry (v2, the
`bash` tool's `command`), as `extra.actions`, or in a ```bash block (v1 text format), and
`extra.response.usage` when the endpoint sent usage; the observation that follows (`role`
tool, or user) holds the output, and a timeout as Python words it ("Command '...' timed out
after N seconds") or the v1 template ("The last command <command>...</command> timed out").
`info.exit_status` is how the run ended (`Submitted`, `LimitsExceeded`, or the name of the
exception that ended it, with `exception_str` in the last message's `extra`).
"""

from __future__ import annotations

import re

from audit.read.logs.common import (
    TrialFiles,
    answer,
    arguments,
    command_of,
    content_text,
    sub,
    usage_of,
)
from audit.read.logs.model import Action, AgentLog, Call, RunEnd

PATH = "agent/mini-swe-agent.trajectory.json"
_BASH_BLOCK = re.compile(r"```(?:bash|sh)?\s*\n(.*?)```", re.DOTALL)
_CLEAN_EXIT = ("Submitted", "")


def read(files: TrialFiles) -> AgentLog | None:
    if "mini-swe-agent.trajectory.json" not in files.agent_files():
        return None
    data = files.json(PATH)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        return None
    log = AgentLog("mini-swe-agent")
    pending: list[int] = []
    last_extra: dict = {}
    for i, message in enumerate(data["messages"]):
        if not isinstance(message, dict):
            continue
        where = f"{PATH} messages[{i}]"
        role = message.get("role")
        text = content_text(message.get("content"))
        extra = sub(message, "extra")
        last_extra = extra or last_extra
        if role == "assistant":
            commands = _commands(message, extra, text)
            response = sub(extra, "response")
            raw = response.get("usage") if isinstance(response.get("usage"), dict) else None
            usage = usage_of(raw) if raw is not None else None
            log.events.append(Call(where, text, bool(commands), usage))
            pending = []
            for command in commands:
                pending.append(len(log.events))
                log.events.append(Action(where, command))
        elif role in ("tool", "user") and i > 1 and pending:
            index = pending.pop(0)
            old = log.events[index]
            if isinstance(old, Action):
                log.events[index] = answer(old, text, where)
    info = sub(data, "info")
    status = str(info.get("exit_status") or last_extra.get("exit_status") or "")
    if status:
        log.end = RunEnd(
            f"{PATH} info.exit_status",
            status,
            str(last_extra.get("exception_str") or info.get("submission") or ""),
            status not in _CLEAN_EXIT and status != "LimitsExceeded",
        )
    return log if log.events or log.end else None


def _commands(message: dict, extra: dict, text: str) -> list[str]:
    found: list[str] = []
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            fn = sub(call, "function") or call
            command = command_of(arguments(fn.get("arguments")))
            if command:
                found.append(command)
    if not found:
        for action in extra.get("actions") or []:
            if isinstance(action, dict) and isinstance(action.get("command"), str):
                found.append(action["command"])
    if not found:
        found = [m.strip() for m in _BASH_BLOCK.findall(text) if m.strip()]
    return found
