"""Terminus-2's per-episode logs: `agent/episode-N/{prompt.txt, response.txt, debug.json}`.

Each episode is one model call: `response.txt` is the model's reply (the JSON or XML of
Terminus-2's parsers: `commands` with `keystrokes`), the next episode's `prompt.txt` carries the
terminal output those commands produced, and Terminus-2's timeout template ("The previous
command timed out after N seconds") when one outran its duration. `debug.json` is litellm's log
of the request and response, where the usage block is when the endpoint sent one.
"""

from __future__ import annotations

import json
import re

from audit.read.caps import cap_in
from audit.read.logs.common import TrialFiles, load_json, usage_of
from audit.read.logs.model import Action, AgentLog, Call, Usage

_EPISODE = re.compile(r"^episode-(\d+)/")
_XML_KEYS = re.compile(r"<keystrokes[^>]*>(.*?)</keystrokes>", re.DOTALL)


def read(files: TrialFiles) -> AgentLog | None:
    numbers = sorted({int(m.group(1)) for f in files.agent_files() if (m := _EPISODE.match(f))})
    if not numbers:
        return None
    log = AgentLog("terminus-episodes")
    for n in numbers:
        base = f"agent/episode-{n}"
        response = files.text(f"{base}/response.txt")
        if response is None:
            continue
        analysis, commands = _parse(response)
        debug = load_json(files.text(f"{base}/debug.json"))
        sent = debug.get("end_time") if isinstance(debug, dict) else None
        log.events.append(
            Call(
                f"{base}/response.txt",
                analysis or response.strip()[:2000],
                acted=bool(commands),
                usage=_usage(debug),
                usage_at=f"{base}/debug.json",
            )
        )
        following = f"agent/episode-{n + 1}/prompt.txt"
        output = files.text(following)
        cap = cap_in(output)
        for i, keys in enumerate(commands):
            last = i == len(commands) - 1
            named = cap is not None and keys.strip() and keys.strip() in (output or "")
            log.events.append(
                Action(
                    f"{base}/response.txt",
                    keys,
                    output=output if last else None,
                    output_where=following if last and output is not None else None,
                    cap_seconds=cap.seconds if cap and (named or last) else None,
                    cap_quote=cap.quote if cap and (named or last) else None,
                    started=sent if isinstance(sent, str) else None,
                )
            )
    return log if log.events else None


def _parse(response: str) -> tuple[str, list[str]]:
    """(analysis, keystrokes) from a JSON reply (the object may sit inside other text)."""
    start, end = response.find("{"), response.rfind("}")
    if start != -1 and end > start:
        try:
            data = json.loads(response[start : end + 1])
        except ValueError:
            data = None
        if isinstance(data, dict):
            commands = [
                c["keystrokes"]
                for c in data.get("commands") or []
                if isinstance(c, dict) and isinstance(c.get("keystrokes"), str)
            ]
            return str(data.get("analysis") or ""), commands
    return "", [m.strip("\n") + "\n" for m in _XML_KEYS.findall(response)]


def _usage(debug: object) -> Usage | None:
    """The first `usage` object with token counts anywhere in litellm's debug log."""
    stack = [debug]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            usage = node.get("usage")
            if isinstance(usage, dict) and {"prompt_tokens", "completion_tokens"} & set(usage):
                return usage_of(usage)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None
