"""OpenHands' event stream: `agent/sessions/<id>/events/<n>.json`, one event a file (Harbor's
OpenHands agent keeps them there), or one JSON list of the same events.

An action event (`source: agent`, `action: run`, `args.command`) is a command; the observation
that answers it (`observation: run`, `cause: <action id>`) carries `content` and
`extras.metadata.exit_code`, which is -1 when the command timed out, with OpenHands' own
"[The command timed out after N seconds..." / "...has no new output after N seconds" note.
Agent actions that came from the model carry `tool_call_metadata.model_response.usage` or
`llm_metrics`. `agent_state_changed` to `error`, with `extras.reason`, is how a run dies.
"""

from __future__ import annotations

import re

from audit.read.logs.common import TrialFiles, answer, as_int, sub, usage_of
from audit.read.logs.model import Action, AgentLog, Call, RunEnd, Usage

_EVENT = re.compile(r"^(sessions/[^/]+/events)/(\d+)\.json$")
_LIST = "agent/openhands.trajectory.json"


def _events(files: TrialFiles) -> list[tuple[str, dict]]:
    found = sorted(
        ((m.group(1), int(m.group(2)), f) for f in files.agent_files() if (m := _EVENT.match(f))),
        key=lambda t: (t[0], t[1]),
    )
    out: list[tuple[str, dict]] = []
    for _, _, rel in found:
        event = files.json(f"agent/{rel}")
        if isinstance(event, dict):
            out.append((f"agent/{rel}", event))
    if not out and _LIST.removeprefix("agent/") in files.agent_files():
        data = files.json(_LIST)
        if isinstance(data, list):
            out = [(f"{_LIST} [{i}]", e) for i, e in enumerate(data) if isinstance(e, dict)]
    return out


def _usage(event: dict) -> Usage | None:
    meta = event.get("tool_call_metadata")
    response = meta.get("model_response") if isinstance(meta, dict) else None
    found = usage_of(response.get("usage")) if isinstance(response, dict) else None
    metrics = event.get("llm_metrics")
    if found is None and isinstance(metrics, dict):
        found = usage_of(metrics.get("accumulated_token_usage"))
    return found


def read(files: TrialFiles) -> AgentLog | None:
    events = _events(files)
    if not events:
        return None
    log = AgentLog("openhands")
    by_id: dict[object, int] = {}
    for where, event in events:
        action = event.get("action")
        args = sub(event, "args")
        if action and event.get("source") == "agent":
            if (
                event.get("tool_call_metadata")
                or event.get("llm_metrics")
                or action
                in (
                    "message",
                    "finish",
                )
            ):
                log.events.append(
                    Call(
                        where,
                        str(
                            args.get("thought") or args.get("content") or event.get("message") or ""
                        ),
                        acted=action not in ("message", "finish"),
                        usage=_usage(event),
                    )
                )
            if action == "run" and isinstance(args.get("command"), str):
                by_id[event.get("id")] = len(log.events)
                log.events.append(Action(where, args["command"]))
            continue
        observation = event.get("observation")
        extras = sub(event, "extras")
        if observation == "run":
            index = by_id.get(event.get("cause"))
            if index is None:
                continue
            meta = sub(extras, "metadata")
            text = "\n".join(str(t) for t in (event.get("content"), meta.get("suffix")) if t)
            exit_code = as_int(meta.get("exit_code"))
            old = log.events[index]
            if isinstance(old, Action):
                log.events[index] = answer(old, text, where, exit_code)
        elif observation == "agent_state_changed":
            state = str(extras.get("agent_state") or "")
            if state in ("error", "finished", "stopped", "rejected"):
                log.end = RunEnd(where, state, str(extras.get("reason") or ""), state == "error")
        elif observation == "error":
            log.end = RunEnd(where, "error", str(event.get("content") or ""), True)
    return log if log.events or log.end else None
