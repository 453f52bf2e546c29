"""Readers of the logs agents leave in a trial dir, by log family, all to one shape
(audit/read/logs/model.py: model calls with their time, status, tokens and error; commands with
their text, start, end, exit code or cap; how the run ended): Harbor's ATIF trajectory,
Terminus-2's episode dirs, raw model-API request/response dumps (Anthropic Messages, OpenAI
Chat and Responses), the JSONL event streams of CLI agents (Claude Code, Codex, Gemini CLI),
OpenHands' events, mini-swe-agent's trajectory, a custom agent's OpenAI-style messages, and a
harness's plain stdout. `read_all()` returns every log it finds (an agent may leave several:
Harbor converts Claude Code's stream to ATIF, for one), most native first.
"""

from __future__ import annotations

from audit.read.logs import (
    api_dumps,
    atif,
    claude_code,
    cli_events,
    mini_swe_agent,
    openai_messages,
    openhands,
    stdout,
    terminus_episodes,
)
from audit.read.logs.common import TrialFiles
from audit.read.logs.model import Action, AgentLog, Call, RunEnd, Usage

__all__ = ["Action", "AgentLog", "Call", "RunEnd", "TrialFiles", "Usage", "read_all"]


def read_all(files: TrialFiles) -> list[AgentLog]:
    logs: list[AgentLog] = []
    for reader in (
        claude_code.read,
        openhands.read,
        mini_swe_agent.read,
        terminus_episodes.read,
        api_dumps.read,
        atif.read,
    ):
        found = reader(files)
        if found is not None:
            logs.append(found)
    logs.extend(openai_messages.read(files))
    logs.extend(cli_events.read(files))
    logs.extend(stdout.read(files))
    return logs
