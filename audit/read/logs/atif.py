"""Harbor's ATIF trajectory (`agent/trajectory.json`), written by Terminus-2 and converted by
Harbor for Claude Code, OpenHands, mini-swe-agent and others (reference §5.4).

Agent steps that carry a model name or metrics are model calls; their `tool_calls` arguments
hold the commands; `observation.results` hold what came back, in the same step or (agents that
log a tool result as its own step) the next one. `metrics.prompt_tokens` is the usage block.
"""

from __future__ import annotations

from audit.read.logs.common import (
    TrialFiles,
    answer,
    arguments,
    as_int,
    command_of,
    content_text,
    usage_of,
)
from audit.read.logs.model import Action, AgentLog, Call

PATH = "agent/trajectory.json"


def read(files: TrialFiles) -> AgentLog | None:
    if "trajectory.json" not in files.agent_files():
        return None
    data = files.json(PATH)
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list):
        return None
    log = AgentLog("atif")
    for step in steps:
        if not isinstance(step, dict) or step.get("source") != "agent":
            continue
        where = f"{PATH} step {step.get('step_id')}"
        tool_calls = [c for c in step.get("tool_calls") or [] if isinstance(c, dict)]
        metrics = step.get("metrics") if isinstance(step.get("metrics"), dict) else None
        extra = step.get("extra") if isinstance(step.get("extra"), dict) else {}
        if step.get("model_name") or metrics:
            usage = usage_of(metrics)
            log.events.append(
                Call(
                    where,
                    str(step.get("message") or ""),
                    acted=bool(tool_calls),
                    usage=usage,
                    finish_reason=extra.get("stop_reason") if isinstance(extra, dict) else None,
                )
            )
        opened = 0
        for call in tool_calls:
            command = command_of(arguments(call.get("arguments")))
            if command:
                stamp = step.get("timestamp")
                log.events.append(
                    Action(where, command, started=stamp if isinstance(stamp, str) else None)
                )
                opened += 1
        results = (step.get("observation") or {}).get("results") or []
        text = "\n".join(
            t for r in results if isinstance(r, dict) and (t := content_text(r.get("content")))
        )
        if text:
            _attach(log, text, where, as_int((extra or {}).get("exec_exit_code")))
    return log if log.events else None


def _attach(log: AgentLog, text: str, where: str, exit_code: int | None) -> None:
    """Give the output to the last action still waiting for one."""
    for i in range(len(log.events) - 1, -1, -1):
        event = log.events[i]
        if isinstance(event, Action):
            if event.output is not None:
                return
            log.events[i] = answer(event, text, where, exit_code)
            return
