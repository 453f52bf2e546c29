"""Helpers the log readers share: what a tool call's arguments name as its command."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Protocol

from audit.read.caps import cap_in
from audit.read.logs.model import Action, Usage

# Argument keys that carry a shell command (Terminus-2 `keystrokes`, the `command`/`cmd` of
# exec and bash tools of other agents, code runners' `code`/`script`).
COMMAND_KEYS = ("keystrokes", "command", "cmd", "script", "code", "input")


class TrialFiles(Protocol):
    """What a reader may read of a trial: its files by path, its agent/ listing, and the
    `agent_result.metadata` of its result.json (where custom agents keep their chat)."""

    def text(self, rel: str) -> str | None: ...
    def json(self, rel: str) -> object | None: ...  # parsed once, None if absent or damaged
    def agent_files(self) -> list[str]: ...
    def result_metadata(self) -> dict | None: ...


def as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def arguments(value: object) -> dict:
    """Tool-call arguments: a dict, or the JSON string OpenAI-style APIs carry them as."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def command_of(args: dict) -> str | None:
    parts = [args[k] for k in COMMAND_KEYS if isinstance(args.get(k), str) and args[k].strip()]
    return "\n".join(parts) if parts else None


def content_text(value: object) -> str:
    """A message's content: a string, or a list of {type: text, text} parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(p.get("text") if isinstance(p.get("text"), str) else p.get("content") or "")
            for p in value
            if isinstance(p, dict)
        ).strip()
    return ""


def load_json(text: str | None) -> object | None:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def jsonl(text: str | None) -> list[tuple[int, dict]]:
    """(line number, object) for every JSON object line; other lines are skipped."""
    out: list[tuple[int, dict]] = []
    for n, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append((n, value))
    return out


def usage_of(raw: object) -> Usage | None:
    """An OpenAI-style usage block (`prompt_tokens`, `completion_tokens`, cached tokens as
    ATIF's `cached_tokens` or OpenAI's `prompt_tokens_details.cached_tokens`); None if absent."""
    if not isinstance(raw, dict):
        return None
    cached = as_int(raw.get("cached_tokens")) or as_int(
        sub(raw, "prompt_tokens_details").get("cached_tokens")
    )
    return Usage(as_int(raw.get("prompt_tokens")), as_int(raw.get("completion_tokens")), cached)


def sub(node: object, key: str) -> dict:
    """`node[key]` when both are dicts, else {} (logs of other versions leave keys out)."""
    value = node.get(key) if isinstance(node, dict) else None
    return value if isinstance(value, dict) else {}


def answer(
    action: Action,
    text: str,
    where: str | None,
    exit_code: int | None = None,
    ended: str | None = None,
) -> Action:
    """The command with what came back: its output, where it was read, the cap it ran past when
    the output says so (audit/read/caps.py), its exit code and when it ended, when known."""
    cap = cap_in(text)
    return replace(
        action,
        output=text,
        output_where=where,
        cap_seconds=cap.seconds if cap else None,
        cap_quote=cap.quote if cap else None,
        exit_code=exit_code if exit_code is not None else action.exit_code,
        ended=ended or action.ended,
    )
