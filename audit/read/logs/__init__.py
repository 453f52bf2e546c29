"""Readers of the logs agents leave in a trial dir, one module per format, all to one shape
(audit/agent_logs/model.py): Harbor's ATIF trajectory, Terminus-2's episode dirs, Claude
Code's stream, OpenHands' events, mini-swe-agent's trajectory and a custom agent's
OpenAI-style messages. `read_all()` returns every log it finds (an agent may leave several:
Harbor converts Claude Code's stream to ATIF, for one), most native first.
"""

from __future__ import annotations

from audit.read.logs import (
    api_dumps,
    atif,
    claude_code,
    mini_swe_agent,
    openai_messages,
    openhands,
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
    return logs
